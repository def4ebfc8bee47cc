#!/usr/bin/env python3
"""Photos of people with known face positions, for the faces-first crop and pixel art (issue 38).

Real faces (scikit-image's `astronaut.png`, NASA, public domain, and `camera.png`, the
cameraman, no known restrictions) composited with a feathered oval onto the real photographs
of Debian's mate-backgrounds (the corpus' photos, GPL-2+), at seeded positions and sizes from
4 % to 35 % of the short side, often off to one side; a quarter are tall portraits with a big
head near the top. The face boxes are known, so the crop can be checked against them.

    make_people.py --faces DIR --photos DIR --out DIR [--count 60] [--empty 24] [--seed 38]

DIR for --faces holds astronaut.png and camera.png (`pip download --no-deps scikit-image`,
then unzip its skimage/data/); --photos holds the mate-backgrounds nature/*.jpg. Writes
people-NNN.jpg (with truth.tsv: file, width, height, then x,y,w,h per face) and
empty-NNN.jpg (no people: for false positives). Deterministic for a seed."""
import argparse, os, random
import numpy as np
from PIL import Image, ImageFilter

# Face boxes in the source images (YuNet at full size; the oval keeps hair and chin).
SOURCES = {"astronaut.png": (178, 63, 90, 113), "camera.png": (196, 113, 61, 81)}


def head(src, box, flip):
    x, y, w, h = box
    # The head: the face box widened for hair and ears, taller above than below.
    hx0, hy0 = max(0, int(x - 0.45 * w)), max(0, int(y - 0.55 * h))
    hx1, hy1 = min(src.width, int(x + 1.45 * w)), min(src.height, int(y + 1.3 * h))
    patch = src.crop((hx0, hy0, hx1, hy1)).convert("RGB")
    face = (x - hx0, y - hy0, w, h)
    if flip:
        patch = patch.transpose(Image.FLIP_LEFT_RIGHT)
        face = (patch.width - face[0] - w, face[1], w, h)
    mask = Image.new("L", patch.size, 0)
    from PIL import ImageDraw
    ImageDraw.Draw(mask).ellipse((patch.width * 0.06, patch.height * 0.04, patch.width * 0.94, patch.height * 0.98), fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(max(1, patch.width // 25)))
    return patch, mask, face


def background(photo, rng, portrait):
    aspect = 3 / 4 if portrait else 4 / 3
    w, h = photo.size
    cw = min(w, int(h * aspect)); ch = int(cw / aspect)
    scale = rng.uniform(0.6, 1.0)
    cw, ch = int(cw * scale), int(ch * scale)
    left, top = rng.randint(0, w - cw), rng.randint(0, h - ch)
    size = (1080, 1440) if portrait else (1440, 1080)
    return photo.crop((left, top, left + cw, top + ch)).resize(size, Image.LANCZOS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--faces", required=True); ap.add_argument("--photos", required=True); ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=60); ap.add_argument("--empty", type=int, default=24); ap.add_argument("--seed", type=int, default=38)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    photos = sorted(os.path.join(a.photos, f) for f in os.listdir(a.photos) if f.lower().endswith(".jpg"))
    sources = {name: Image.open(os.path.join(a.faces, name)).convert("RGB") for name in SOURCES}
    rows = []
    for i in range(a.count):
        portrait = rng.random() < 0.7
        img = background(Image.open(rng.choice(photos)).convert("RGB"), rng, portrait)
        short = min(img.size)
        tall = portrait and rng.random() < 0.25
        n = 1 if tall else rng.choices([1, 2, 3], [0.6, 0.25, 0.15])[0]
        boxes = []
        for k in range(n):
            for _ in range(50):
                name = rng.choice(sorted(SOURCES))
                patch, mask, face = head(sources[name], SOURCES[name], rng.random() < 0.5)
                fh = short * (rng.uniform(0.25, 0.35) if tall and k == 0 else np.exp(rng.uniform(np.log(0.04), np.log(0.3))))
                s = fh / face[3]
                pw, ph = max(2, int(patch.width * s)), max(2, int(patch.height * s))
                fx, fy, fw, fhh = face[0] * s, face[1] * s, face[2] * s, face[3] * s
                if tall and k == 0:
                    cx, cy = rng.uniform(0.3, 0.7) * img.width, rng.uniform(0.12, 0.3) * img.height
                else:
                    cx, cy = rng.uniform(fw, img.width - fw), rng.uniform(fhh, img.height - fhh)
                px, py = int(cx - fx - fw / 2), int(cy - fy - fhh / 2)
                box = (px + fx, py + fy, fw, fhh)
                if box[0] < 0 or box[1] < 0 or box[0] + fw > img.width or box[1] + fhh > img.height:
                    continue
                if any(not (box[0] > b[0] + b[2] * 1.6 or b[0] > box[0] + fw * 1.6 or box[1] > b[1] + b[3] * 1.6 or b[1] > box[1] + fhh * 1.6) for b in boxes):
                    continue
                img.paste(patch.resize((pw, ph), Image.LANCZOS), (px, py), mask.resize((pw, ph), Image.LANCZOS))
                boxes.append(box)
                break
        name = f"people-{i:03d}.jpg"
        img.save(os.path.join(a.out, name), quality=88)
        rows.append("\t".join([name, str(img.width), str(img.height)] + [",".join(f"{v:.1f}" for v in b) for b in boxes]))
    for i in range(a.empty):
        img = background(Image.open(rng.choice(photos)).convert("RGB"), rng, rng.random() < 0.7)
        img.save(os.path.join(a.out, f"empty-{i:03d}.jpg"), quality=88)
    with open(os.path.join(a.out, "truth.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
