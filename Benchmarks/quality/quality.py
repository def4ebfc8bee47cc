#!/usr/bin/env python3
"""Quality per byte of square100, against plain libjpeg on reference pixels.

For every photo: the reference is the upright photo at full resolution, centre
square, Lanczos (Pillow) to SIDE x SIDE. Each contender makes a SIDE px JPEG
within each budget and is scored against the reference with SSIMULACRA2 (PyPI
`ssimulacra2`; higher is better, 90 is visually lossless) and butteraugli
(Debian's `butteraugli`; lower is better):

  snapthumb          `snapthumb process --budget B` (whatever its defaults are)
  <label>            the same with another snapthumb binary (--baseline LABEL=PATH)
  libjpeg-420/444    Pillow's libjpeg-turbo on the reference pixels, optimised
                     Huffman, baseline, the highest quality that fits (binary search)
  avif-e<N>          with --modern avif (or heic): the modern square
  (heic-e<N>)        (square100-avif / -heic) of `snapthumb process --modern avif
                     --modern-effort N`, for each N of --modern-efforts; decoded to
                     PNG with `vips copy` for scoring. A second table gives its
                     encodes and CPU time: the CPU of that run less the CPU of the
                     plain snapthumb run, per image and per encode (run it under
                     `flock /work/notes/measure.lock` on a shared machine)
  avifenc-s6         the anchor, when `avifenc` (Debian's libavif-bin) is installed
                     and --modern avif is given: libavif's encoder at speed 6, 4:4:4
                     8-bit full range, sRGB colour box, one thread, on the reference
                     pixels; the lowest quantiser (--min = --max, 0-63) that fits
                     (binary search); its CPU per image (the final encode) in the
                     timing table

Beside the SSIMULACRA2 table it prints the pixel-art measures of each style in
--pixel-styles (default drawn,soft,retro; empty for none): each style's pixel25
against the plain box average of SnapThumb's own square (square100 at --budget none,
quality 100; pixel_measures.py).

Prints a Markdown table (mean per budget) and writes per-image rows as TSV.
Run through Benchmarks/quality/run.sh, which prepares the venv.
"""
import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image, ImageOps
from ssimulacra2 import compute_ssimulacra2

import pixel_measures


def reference(path, side):
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im).convert("RGB")
        w, h = im.size
        s = min(w, h)
        box = ((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)
        return im.resize((side, side), Image.LANCZOS, box=box)


def libjpeg_fit(img, budget, subsampling):
    """Highest Pillow quality 1-100 whose JPEG fits; the bytes."""
    def enc(q):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=q, subsampling=subsampling, optimize=True, progressive=False)
        return buf.getvalue()
    lo, hi, best = 1, 100, None
    while lo <= hi:
        mid = (lo + hi) // 2
        data = enc(mid)
        if len(data) <= budget:
            best, lo = data, mid + 1
        else:
            hi = mid - 1
    return best if best is not None else enc(1)


def snapthumb_squares(binary, files, budget, workdir, extra, variant_name="square100"):
    """(bytes per file, encodes per file, CPU seconds) of one `snapthumb process` run."""
    store = tempfile.mkdtemp(dir=workdir)
    before = os.times()
    out = subprocess.run([binary, "process", *files, "--store", store, "--budget", str(budget), *extra],
                         capture_output=True, text=True, check=False)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    result, encodes = {}, {}
    for line in out.stdout.splitlines():
        manifest = json.loads(line)
        variant = manifest["variants"][variant_name]
        with open(os.path.join(store, variant["path"]), "rb") as f:
            result[manifest["key"]] = f.read()
        encodes[manifest["key"]] = variant["encodes"]
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
    return result, encodes, cpu


def avifenc_fit(ref_png, budget, workdir):
    """(bytes, CPU seconds of the final encode) of avifenc speed 6 at the lowest quantiser that fits."""
    def enc(q):
        out = os.path.join(workdir, "anchor.avif")
        before = os.times()
        subprocess.run(["avifenc", "-s", "6", "-j", "1", "-c", "aom", "-y", "444", "-d", "8", "-r", "full",
                        "--cicp", "1/13/6", "--min", str(q), "--max", str(q), ref_png, out],
                       capture_output=True, check=True)
        after = os.times()
        with open(out, "rb") as f:
            return f.read(), (after.children_user - before.children_user) + (after.children_system - before.children_system)
    lo, hi, best = 0, 63, None
    while lo <= hi:
        mid = (lo + hi) // 2
        data, cpu = enc(mid)
        if len(data) <= budget:
            best, hi = (data, cpu), mid - 1
        else:
            lo = mid + 1
    return best if best is not None else enc(63)


def pixel_scores(binary, files, keys, styles, workdir):
    """{style: [measures per photo]} of each style's pixel25 against the box average of SnapThumb's square."""
    scores = {}
    squares = snapthumb_square_pixels(binary, files, workdir)
    for style in styles:
        store = tempfile.mkdtemp(dir=workdir)
        out = subprocess.run([binary, "process", *files, "--store", store, "--pixel-style", style],
                             capture_output=True, text=True, check=False)
        grids = {}
        for line in out.stdout.splitlines():
            manifest = json.loads(line)
            variant = manifest["variants"]["pixel25"]
            grids[manifest["key"]] = np.asarray(Image.open(os.path.join(store, variant["path"])).convert("RGB"))
        rows = []
        for k in keys:
            if k in grids and k in squares:
                rows.append(pixel_measures.measures(grids[k], pixel_measures.box_average(squares[k], grids[k].shape[0])))
        scores[style] = rows
    return scores


def snapthumb_square_pixels(binary, files, workdir):
    """{key: SnapThumb's own square}: square100 at --budget none is a quality-100 4:4:4 JPEG of the
    pixels the grid is made from (the Pillow reference would add its resampler's differences)."""
    store = tempfile.mkdtemp(dir=workdir)
    out = subprocess.run([binary, "process", *files, "--store", store, "--budget", "none", "--pixel-style", "soft"],
                         capture_output=True, text=True, check=False)
    squares = {}
    for line in out.stdout.splitlines():
        manifest = json.loads(line)
        path = os.path.join(store, manifest["variants"]["square100"]["path"])
        squares[manifest["key"]] = np.asarray(Image.open(path).convert("RGB"))
    return squares


def as_png(path):
    """A PNG copy of an AVIF/HEIC for the scorers (Pillow and butteraugli read PNG)."""
    png = path + ".png"
    subprocess.run(["vips", "copy", path, png], check=True)
    return png


def butteraugli(ref_png, dist_path):
    out = subprocess.run(["butteraugli", ref_png, dist_path], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("photos", nargs="+", help="photo files (JPEG etc.)")
    ap.add_argument("--snapthumb", required=True, help="snapthumb binary")
    ap.add_argument("--baseline", action="append", default=[], metavar="LABEL=PATH",
                    help="another snapthumb binary to score beside it (e.g. before=/tmp/old)")
    ap.add_argument("--budgets", default="1500,2300,3072,4096")
    ap.add_argument("--side", type=int, default=100)
    ap.add_argument("--tsv", help="write per-image scores here")
    ap.add_argument("--extra", default="", help="extra flags for the snapthumb side, space-separated")
    ap.add_argument("--modern", choices=["avif", "heic"], help="also score snapthumb's modern square")
    ap.add_argument("--modern-efforts", default="2", help="--modern-effort values to score, comma-separated")
    ap.add_argument("--pixel-styles", default="drawn,soft,retro", help="pixel-art styles to measure, comma-separated (empty: none)")
    args = ap.parse_args()
    anchor = args.modern == "avif" and shutil.which("avifenc") is not None
    budgets = [int(b) for b in args.budgets.split(",")]
    files = sorted(args.photos)
    keys = [os.path.basename(f) for f in files]

    work = tempfile.mkdtemp(prefix="snapthumb-quality-")
    refs = {}
    for f, k in zip(files, keys):
        png = os.path.join(work, k + ".ref.png")
        reference(f, args.side).save(png)
        refs[k] = png

    contenders = [("snapthumb", args.snapthumb, args.extra.split())]
    for spec in args.baseline:
        label, _, path = spec.partition("=")
        contenders.append((label, path, []))

    efforts = [int(e) for e in args.modern_efforts.split(",")] if args.modern else []
    rows = []  # (budget, contender, key, bytes, ssimulacra2, butteraugli)
    timing = []  # (budget, label, mean encodes, CPU ms per image over plain snapthumb, ms per encode)
    for budget in budgets:
        outputs = {}
        plain_cpu = None
        for label, binary, extra in contenders:
            outputs[label], _, cpu = snapthumb_squares(binary, files, budget, work, extra)
            if label == "snapthumb":
                plain_cpu = cpu
        for effort in efforts:
            label = f"{args.modern}-e{effort}"
            extra = args.extra.split() + ["--modern", args.modern, "--modern-effort", str(effort)]
            outputs[label], encodes, cpu = snapthumb_squares(args.snapthumb, files, budget, work, extra,
                                                             variant_name=f"square100-{args.modern}")
            total = sum(encodes.values())
            extra_ms = (cpu - plain_cpu) * 1000
            timing.append((budget, label, total / max(1, len(encodes)), extra_ms / max(1, len(encodes)),
                           extra_ms / max(1, total)))
        anchor_cpu = 0.0
        for k in keys:
            ref_img = Image.open(refs[k]).convert("RGB")
            outputs.setdefault("libjpeg-420", {})[k] = libjpeg_fit(ref_img, budget, "4:2:0")
            outputs.setdefault("libjpeg-444", {})[k] = libjpeg_fit(ref_img, budget, "4:4:4")
            if anchor:
                outputs.setdefault("avifenc-s6", {})[k], cpu = avifenc_fit(refs[k], budget, work)
                anchor_cpu += cpu
        if anchor:
            timing.append((budget, "avifenc-s6", float("nan"), anchor_cpu * 1000 / max(1, len(keys)), float("nan")))
        for label, per_key in outputs.items():
            for k, data in per_key.items():
                modern = label.startswith(("avif-", "heic-", "avifenc"))
                path = os.path.join(work, f"{budget}-{label}-{k}.{label[:4] if modern else 'jpg'}")
                with open(path, "wb") as f:
                    f.write(data)
                scored = as_png(path) if modern else path
                rows.append((budget, label, k, len(data), compute_ssimulacra2(refs[k], scored), butteraugli(refs[k], scored)))
        print(f"budget {budget}: done", file=sys.stderr)

    if args.tsv:
        with open(args.tsv, "w") as f:
            f.write("budget\tencoder\timage\tbytes\tssimulacra2\tbutteraugli\n")
            for r in rows:
                f.write("\t".join(str(x) for x in r) + "\n")

    labels = [c[0] for c in contenders] + ["libjpeg-420", "libjpeg-444"] + [f"{args.modern}-e{e}" for e in efforts]
    labels += ["avifenc-s6"] if anchor else []
    print(f"Measured {time.strftime('%Y-%m-%d')} on {len(files)} photos, {args.side} px square; "
          "mean SSIMULACRA2 (higher is better) / mean butteraugli (lower is better) / mean bytes.\n")
    print("| budget | " + " | ".join(labels) + " |")
    print("|---:|" + "---:|" * len(labels))
    for budget in budgets:
        cells = []
        for label in labels:
            sel = [r for r in rows if r[0] == budget and r[1] == label]
            if not sel:
                cells.append("–")
                continue
            cells.append("%.1f / %.2f / %d" % (statistics.mean(r[4] for r in sel), statistics.mean(r[5] for r in sel),
                                                statistics.mean(r[3] for r in sel)))
        print(f"| {budget} B | " + " | ".join(cells) + " |")
    if timing:
        print(f"\n{args.modern} encodes per image / CPU ms per image more than snapthumb without it / CPU ms per encode:\n")
        timed = [f"{args.modern}-e{e}" for e in efforts] + (["avifenc-s6"] if anchor else [])
        print("| budget | " + " | ".join(timed) + " |")
        print("|---:|" + "---:|" * len(timed))
        for budget in budgets:
            cells = ["%.2f / %.1f / %.1f" % t[2:] for t in timing if t[0] == budget]
            print(f"| {budget} B | " + " | ".join(cells) + " |")
        if anchor:
            print("\n(avifenc-s6: CPU ms of the final encode per image; its quantiser search is not counted.)")

    styles = [s for s in args.pixel_styles.split(",") if s]
    if styles:
        scores = pixel_scores(args.snapthumb, files, keys, styles, work)
        print("\nPixel art, each style's pixel25 against the box average of SnapThumb's square (OKLab): "
              "chroma / lightness spread / neighbour contrast / colours / drift (targets for the default: "
              ">= 1.15 / 1.10 / 1.20 / 12, <= 0.06):\n")
        print("| style | pixel art |")
        print("|---|---:|")
        for style in styles:
            if scores[style]:
                print(f"| {style} | {pixel_measures.format_row(pixel_measures.mean_measures(scores[style]))} |")


if __name__ == "__main__":
    main()
