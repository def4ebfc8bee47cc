#!/usr/bin/env python3
"""How faithful square100 stays when SnapThumb makes it from a HEIC's embedded thumbnail.

Issue 41 item 1: phones write a 12 MP primary image with a small thumbnail (320x240) inside;
SnapThumb decodes the thumbnail when it can serve (the manifest's `source.decodedFrom`). For
every photo given (JPEG snaps; run.sh passes the quality set):

  phone.heic     the photo upscaled to 12 MP (4032x3024 or 3024x4032, Lanczos) and written as a
                 phone does: `heif-enc -q 50 -t 320` (HEVC, a 320 px thumbnail inside)
  primary.png    the HEIC's primary image, decoded whole (`vips copy`)
  reference      the upright primary at full resolution, centre square, Lanczos (Pillow) to 100 px
                 (as quality.py's reference)

and SnapThumb's square100 (`--faces off`, so that every side crops the centre) made from

  thumbnail      phone.heic, as it runs (checked: decodedFrom is "thumbnail")
  primary        primary.png: the same pixels decoded whole, what it did before issue 41
  original       the JPEG itself

and, for scale, the peer's square (`vipsthumbnail -s 100x100 -c`, Q80 stripped, as `bench` runs it)
from phone.heic (libvips uses the same thumbnail) and from primary.png.

Prints, per photo and as means: SSIMULACRA2 of the thumbnail's and the primary's square (SnapThumb's
and vipsthumbnail's) against the reference (higher is better; their difference is what the thumbnail costs), and the mean and the
largest absolute difference in 8-bit RGB between the thumbnail's square and the primary's and the
original's.

Usage: heic_fidelity.py --snapthumb BIN [--tsv OUT] PHOTO...
(Benchmarks/quality/run.sh --heic-fidelity runs it on the quality set.)
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image
from ssimulacra2 import compute_ssimulacra2

from quality import reference


def run(args):
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"heic_fidelity: {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def phone_heic(photo, workdir):
    """The photo as a phone writes it: 12 MP HEIC with a 320 px thumbnail; and its primary as PNG."""
    with Image.open(photo) as im:
        w, h = im.size
        if im.getexif().get(0x0112, 1) in (5, 6, 7, 8):  # stored sideways: upright is the other way
            w, h = h, w
    size = (4032, 3024) if w >= h else (3024, 4032)
    big = os.path.join(workdir, "big.png")
    heic = os.path.join(workdir, "phone.heic")
    primary = os.path.join(workdir, "primary.png")
    run(["vips", "thumbnail", photo, big, str(size[0]), "--height", str(size[1]), "--size", "force"])
    run(["heif-enc", "-q", "50", "-t", "320", "-o", heic, big])
    run(["vips", "copy", heic, primary])
    os.remove(big)
    return heic, primary


def square(binary, source, workdir, name):
    """(square100 decoded, manifest) of `snapthumb process SOURCE --faces off`."""
    store = os.path.join(workdir, "store-" + name)
    manifest = json.loads(run([binary, "process", source, "--store", store, "--faces", "off"]).splitlines()[0])
    with open(os.path.join(store, manifest["variants"]["square100"]["path"]), "rb") as f:
        pixels = Image.open(io.BytesIO(f.read())).convert("RGB")
    return pixels, manifest


def vipsthumbnail(source, workdir, name):
    """vipsthumbnail's square of `source`, as `bench` runs it (100 px, centre crop, Q80, stripped), as PNG."""
    jpeg = os.path.join(workdir, name + ".jpg")
    run(["vipsthumbnail", source, "-s", "100x100", "-c", "-o", jpeg + "[Q=80,strip]"])
    png = os.path.join(workdir, name + ".png")
    Image.open(jpeg).convert("RGB").save(png)
    return png


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapthumb", required=True)
    parser.add_argument("--tsv")
    parser.add_argument("photos", nargs="+")
    args = parser.parse_args()

    rows = []
    for photo in args.photos:
        with tempfile.TemporaryDirectory() as workdir:
            heic, primary = phone_heic(photo, workdir)
            ref = reference(primary, 100)
            thumb, manifest = square(args.snapthumb, heic, workdir, "thumbnail")
            decoded = manifest.get("source", {}).get("decodedFrom")
            if decoded != "thumbnail":
                sys.exit(f"heic_fidelity: {photo}: the HEIC's square was made from {decoded!r}, not the thumbnail")
            whole, _ = square(args.snapthumb, primary, workdir, "primary")
            original, _ = square(args.snapthumb, photo, workdir, "original")
            t, p, o = (np.asarray(x, dtype=np.int16) for x in (thumb, whole, original))
            paths = {}
            for name, image in (("reference", ref), ("thumbnail", thumb), ("primary", whole)):
                paths[name] = os.path.join(workdir, name + ".png")
                image.save(paths[name])
            peer_thumbnail = vipsthumbnail(heic, workdir, "vips-thumbnail")
            peer_primary = vipsthumbnail(primary, workdir, "vips-primary")
            rows.append({
                "vips_thumbnail": compute_ssimulacra2(paths["reference"], peer_thumbnail),
                "vips_primary": compute_ssimulacra2(paths["reference"], peer_primary),
                "photo": os.path.basename(photo),
                "ssim2_thumbnail": compute_ssimulacra2(paths["reference"], paths["thumbnail"]),
                "ssim2_primary": compute_ssimulacra2(paths["reference"], paths["primary"]),
                "mad_primary": float(np.abs(t - p).mean()),
                "max_primary": int(np.abs(t - p).max()),
                "mad_original": float(np.abs(t - o).mean()),
                "max_original": int(np.abs(t - o).max()),
            })
            r = rows[-1]
            print(f"{r['photo']}: SSIMULACRA2 thumbnail {r['ssim2_thumbnail']:.2f}, primary {r['ssim2_primary']:.2f}; "
                  f"|thumbnail - primary| mean {r['mad_primary']:.2f} max {r['max_primary']}; "
                  f"|thumbnail - original| mean {r['mad_original']:.2f} max {r['max_original']}; "
                  f"vipsthumbnail {r['vips_thumbnail']:.2f} from the HEIC, {r['vips_primary']:.2f} from the primary", file=sys.stderr)

    keys = ["ssim2_thumbnail", "ssim2_primary", "vips_thumbnail", "vips_primary", "mad_primary", "max_primary", "mad_original", "max_original"]
    if args.tsv:
        with open(args.tsv, "w") as f:
            f.write("\t".join(["photo"] + keys) + "\n")
            for r in rows:
                f.write("\t".join([r["photo"]] + [f"{r[k]:.3f}" for k in keys]) + "\n")
    gap = [r["ssim2_primary"] - r["ssim2_thumbnail"] for r in rows]
    print(f"| photos | SSIMULACRA2 from the thumbnail | from the primary | primary - thumbnail (median, worst) "
          f"| mean abs diff to the primary's square (mean, worst max) | to the original's "
          f"| vipsthumbnail from the HEIC | vipsthumbnail from the primary |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(rows)} | {statistics.mean(r['ssim2_thumbnail'] for r in rows):.2f} "
          f"| {statistics.mean(r['ssim2_primary'] for r in rows):.2f} "
          f"| {statistics.median(gap):.2f}, {max(gap):.2f} "
          f"| {statistics.mean(r['mad_primary'] for r in rows):.2f}, {max(r['max_primary'] for r in rows)} "
          f"| {statistics.mean(r['mad_original'] for r in rows):.2f}, {max(r['max_original'] for r in rows)} "
          f"| {statistics.mean(r['vips_thumbnail'] for r in rows):.2f} | {statistics.mean(r['vips_primary'] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
