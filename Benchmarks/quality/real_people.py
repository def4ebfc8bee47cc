#!/usr/bin/env python3
"""Real photos of people for faces_eval.py and face_measures.py (issue 38), with an independent
detector's faces as the truth.

    real_people.py --photos DIR [DIR…] --out DIR [--min-score 0.8] [--skip TEXT…]

Every JPEG/PNG under the --photos directories is written to --out as a JPEG (Q 92), with two or
three crops of it, all of real pixels:
  sideL-/sideR-NAME  a 2:1 crop with the largest face near the left or right edge (a person off
                     to one side of a wide snap);
  tall-NAME          a 9:16 crop with the largest face near the top (a tall portrait).
A photo where no face is found is written as empty-NAME (a photo without people).
truth.tsv lists file, width, height, then x,y,w,h per face: OpenCV's own FaceDetectorYN (the
opencv-python wheel, not Debian's 4.6 that SnapThumb runs) on the whole photo at up to 1600 px,
score >= --min-score. It is the same model family as SnapThumb's detector but at about ten times
the resolution, so it sees the small faces SnapThumb's 144 px pass cannot.

The photos used for docs/pixel-art.md (not committed: their licences are not all clear) are the
test photos of two public face-recognition repositories: davisking/dlib examples/faces/*.jpg
(PASCAL VOC / Flickr photos and two of dlib's own) and ageitgey/face_recognition
examples/ and tests/test_images/ (news and portrait photos), files prefixed dlib- and fr-, with
`--skip obama- 32bit` (copies of other photos at other sizes): 87 photos with 237 faces and one
without people (dlib's dogs)."""
import argparse, glob, os
import cv2
import numpy as np

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Sources", "CFaceShim", "model",
                     "face_detection_yunet.onnx")


def faces(img, min_score):
    h, w = img.shape[:2]
    s = min(1.0, 1600 / max(w, h))
    im = cv2.resize(img, (int(w * s), int(h * s)), interpolation=cv2.INTER_AREA) if s < 1 else img
    detector = cv2.FaceDetectorYN.create(MODEL, "", (im.shape[1], im.shape[0]), min_score, 0.3, 5000)
    _, found = detector.detect(im)
    return [] if found is None else [tuple(float(v) / s for v in r[:4]) for r in found]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", nargs="+", required=True); ap.add_argument("--out", required=True)
    ap.add_argument("--min-score", type=float, default=0.8)
    ap.add_argument("--skip", nargs="*", default=[], help="leave out files whose name contains any of these")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []

    def save(name, img, found):
        cv2.imwrite(os.path.join(a.out, name + ".jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 92])
        h, w = img.shape[:2]
        rows.append("\t".join([name + ".jpg", str(w), str(h)] + [",".join(f"{v:.1f}" for v in f) for f in found]))

    paths = sorted(p for d in a.photos for ext in ("jpg", "jpeg", "png") for p in glob.glob(os.path.join(d, "*." + ext)))
    for path in paths:
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            continue
        base = os.path.splitext(os.path.basename(path))[0]
        if any(part in base for part in a.skip):
            continue
        found = faces(img, a.min_score)
        h, w = img.shape[:2]
        if not found:
            save("empty-" + base, img, [])
            continue
        save(base, img, found)
        big = max(found, key=lambda f: f[2] * f[3])
        if w >= h:
            ch = int(min(h, w / 2)); cw = 2 * ch
            if cw <= w:
                for side, frac in (("L", 0.12), ("R", 0.88)):
                    x0 = int(np.clip(big[0] + big[2] / 2 - frac * cw, 0, w - cw))
                    y0 = int(np.clip(big[1] + big[3] / 2 - ch / 2, 0, h - ch))
                    whole = [f for f in found if f[0] >= x0 and f[1] >= y0 and f[0] + f[2] <= x0 + cw and f[1] + f[3] <= y0 + ch]
                    if side == "R" and (not whole or (x0, y0) == (0, 0)):
                        continue  # no whole face in it, or the same crop as sideL
                    sub = img[y0:y0 + ch, x0:x0 + cw]
                    save(f"side{side}-{base}", sub, faces(sub, a.min_score))
        cw = int(min(w, h * 9 / 16)); ch = int(cw * 16 / 9)
        if ch <= h and cw < w:
            x0 = int(np.clip(big[0] + big[2] / 2 - cw / 2, 0, w - cw)); y0 = int(np.clip(big[1] - 0.1 * ch, 0, h - ch))
            sub = img[y0:y0 + ch, x0:x0 + cw]
            save(f"tall-{base}", sub, faces(sub, a.min_score))
    with open(os.path.join(a.out, "truth.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows)} photos in {a.out}")


if __name__ == "__main__":
    main()
