#!/usr/bin/env python3
"""The pixel-art gallery of docs/pixel-art.md: contact sheets and measures, made from photos.

For every photo: the photo (fitted to 100 px high), square100 with --faces off (the centre
crop) and with faces (the default), and pixel100 in each style,
side by side, one row per photo; one PNG contact sheet per --per-sheet photos. Then a
Markdown table of the pixel-art measures (Benchmarks/quality/pixel_measures.py) per style:
each style's pixel25 against the box average of SnapThumb's square of the photo (square100
without a budget: quality 100, 4:4:4), as PixelStyleTests measures it.

Usage (from the repository root; the venv comes from Scripts/setup-quality.sh):
  Benchmarks/quality/.venv/bin/python Scripts/pixel-gallery.py --snapthumb .build/release/snapthumb \\
      --out docs/pixel-art Samples/snaps/phone-portrait.jpg ...
Without --out it only prints the measures (e.g. for held-out photos that cannot be committed).
Deterministic: the same snapthumb and photos give the same sheets.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Benchmarks", "quality"))
import pixel_measures  # noqa: E402

LABEL = 14  # height of the caption strip


def vips_thumbnail(path, width, height, work, crop):
    """libvips' thumbnail of any format SnapThumb reads, converted to sRGB (HEIC, CMYK and
    wide-gamut photos included), as an RGB image."""
    out = tempfile.mktemp(suffix=".png", dir=work)
    subprocess.run(["vips", "thumbnail", path, out, str(width), "--height", str(height), "--export-profile", "srgb",
                    *(["--crop", "centre"] if crop else [])], check=True, capture_output=True)
    return Image.open(out).convert("RGB")


def reference_square(binary, path, work):
    """SnapThumb's own square of the photo, nearly lossless: square100 at `--budget none` is a
    quality-100 4:4:4 JPEG of the very pixels the grid is made from (another resampler's
    square would add its own differences to the drift)."""
    store = tempfile.mkdtemp(dir=work)
    out = subprocess.run([binary, "process", path, "--store", store, "--budget", "none", "--pixel-style", "soft"],
                         capture_output=True, text=True, check=True)
    variant = json.loads(out.stdout.splitlines()[0])["variants"]["square100"]
    return Image.open(os.path.join(store, variant["path"])).convert("RGB")


def photo_thumb(path, height, work):
    return vips_thumbnail(path, 4 * height, height, work, crop=False)


def run(binary, photo, style, work, *extra):
    """{variant: decoded RGB image} of one `snapthumb process` run."""
    store = tempfile.mkdtemp(dir=work)
    out = subprocess.run([binary, "process", photo, "--store", store, "--pixel-style", style, *extra],
                         capture_output=True, text=True, check=True)
    manifest = json.loads(out.stdout.splitlines()[0])
    return {name: Image.open(os.path.join(store, v["path"])).convert("RGB") for name, v in manifest["variants"].items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("photos", nargs="+")
    ap.add_argument("--snapthumb", required=True)
    ap.add_argument("--styles", default="drawn,soft,retro")
    ap.add_argument("--out", help="directory for the contact sheets (sheet-1.png, …)")
    ap.add_argument("--per-sheet", type=int, default=4)
    args = ap.parse_args()
    styles = args.styles.split(",")
    work = tempfile.mkdtemp(prefix="snapthumb-gallery-")
    rows, scores = [], {s: [] for s in styles}
    for photo in args.photos:
        outputs = {s: run(args.snapthumb, photo, s, work) for s in styles}
        grid = np.asarray(outputs[styles[0]]["pixel25"]).shape[0]
        average = pixel_measures.box_average(np.asarray(reference_square(args.snapthumb, photo, work)), grid)
        for s in styles:
            m = pixel_measures.measures(np.asarray(outputs[s]["pixel25"]), average)
            scores[s].append(m)
            print(f"{os.path.basename(photo)}\t{s}\t{pixel_measures.format_row(m)}", file=sys.stderr)
        # The crop side by side (issue 38): the square without faces first (the centre), then
        # the default, placed around the faces.
        centre = run(args.snapthumb, photo, styles[0], work, "--faces", "off")["square100"]
        tiles = [("photo", photo_thumb(photo, 100, work)), ("faces off", centre), ("square100", outputs[styles[0]]["square100"])]
        tiles += [(s, outputs[s]["pixel100"]) for s in styles]
        rows.append((os.path.basename(photo), tiles))

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for n, start in enumerate(range(0, len(rows), args.per_sheet), 1):
            chunk = rows[start:start + args.per_sheet]
            widths = [max(t[1].width for t in col) for col in zip(*[r[1] for r in chunk])]
            gap = 4
            sheet = Image.new("RGB", (sum(widths) + gap * (len(widths) + 1), LABEL + len(chunk) * (100 + gap) + gap),
                              (255, 255, 255))
            draw = ImageDraw.Draw(sheet)
            x = gap
            for (label, _), w in zip(chunk[0][1], widths):
                draw.text((x, 1), label, fill=(0, 0, 0))
                x += w + gap
            for r, (_, tiles) in enumerate(chunk):
                x = gap
                for (_, img), w in zip(tiles, widths):
                    sheet.paste(img, (x, LABEL + gap + r * (100 + gap)))
                    x += w + gap
            path = os.path.join(args.out, f"sheet-{n}.png")
            sheet.save(path, optimize=True)
            print(f"wrote {path} ({os.path.getsize(path)} B)", file=sys.stderr)

    print(f"{len(args.photos)} photos; each style's pixel25 against the box average of the same square (OKLab):\n")
    print("| style | chroma | lightness spread | neighbour contrast | colours | drift |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in styles:
        m = pixel_measures.mean_measures(scores[s])
        print(f"| {s} | {m['chroma']:.2f}× | {m['spread']:.2f}× | {m['contrast']:.2f}× | {m['colours']:.1f} | {m['drift']:.3f} |")


if __name__ == "__main__":
    main()
