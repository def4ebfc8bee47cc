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

Prints a Markdown table (mean per budget) and writes per-image rows as TSV.
Run through Benchmarks/quality/run.sh, which prepares the venv.
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from PIL import Image, ImageOps
from ssimulacra2 import compute_ssimulacra2


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


def snapthumb_squares(binary, files, budget, workdir, extra):
    """square100 bytes per file from one `snapthumb process` run."""
    store = tempfile.mkdtemp(dir=workdir)
    out = subprocess.run([binary, "process", *files, "--store", store, "--budget", str(budget), *extra],
                         capture_output=True, text=True, check=False)
    result = {}
    for line in out.stdout.splitlines():
        manifest = json.loads(line)
        variant = manifest["variants"]["square100"]
        with open(os.path.join(store, variant["path"]), "rb") as f:
            result[manifest["key"]] = f.read()
    return result


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
    args = ap.parse_args()
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

    rows = []  # (budget, contender, key, bytes, ssimulacra2, butteraugli)
    for budget in budgets:
        outputs = {}
        for label, binary, extra in contenders:
            outputs[label] = snapthumb_squares(binary, files, budget, work, extra)
        for k in keys:
            ref_img = Image.open(refs[k]).convert("RGB")
            outputs.setdefault("libjpeg-420", {})[k] = libjpeg_fit(ref_img, budget, "4:2:0")
            outputs.setdefault("libjpeg-444", {})[k] = libjpeg_fit(ref_img, budget, "4:4:4")
        for label, per_key in outputs.items():
            for k, data in per_key.items():
                path = os.path.join(work, f"{budget}-{label}-{k}.jpg")
                with open(path, "wb") as f:
                    f.write(data)
                rows.append((budget, label, k, len(data), compute_ssimulacra2(refs[k], path), butteraugli(refs[k], path)))
        print(f"budget {budget}: done", file=sys.stderr)

    if args.tsv:
        with open(args.tsv, "w") as f:
            f.write("budget\tencoder\timage\tbytes\tssimulacra2\tbutteraugli\n")
            for r in rows:
                f.write("\t".join(str(x) for x in r) + "\n")

    labels = [c[0] for c in contenders] + ["libjpeg-420", "libjpeg-444"]
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


if __name__ == "__main__":
    main()
