#!/usr/bin/env python3
"""Issue 27's check, outside SnapThumb: CPU (user + system, every process) per image of

  floor      floor.c: each JPEG decoded at 1/4 by libjpeg-turbo, nothing else (built here with cc)
  pillow     Pillow: draft, EXIF transpose, fit to 100x100 (Lanczos), Q80 JPEG in memory; one process
  snapthumb  `snapthumb backfill --jobs 1 --faces off` (--faces on: with face detection) into a
             fresh store directory (removed after its round)

in alternating rounds on the same files, and the medians of the per-round ratios. Several
snapthumb builds may be given (comma-separated); they take turns within each round.

  Benchmarks/floor-check/check.py --snapthumb .build/release/snapthumb .corpus/snaps
  Benchmarks/floor-check/check.py --snapthumb old/snapthumb,new/snapthumb --limit 120 --rounds 5 DIR

Needs cc and libjpeg's headers (libjpeg62-turbo-dev, which Scripts/setup.sh installs);
Pillow is optional (the pillow side is left out, and said so, without it).
"""
import argparse, os, resource, shutil, statistics, subprocess, sys, tempfile

PILLOW = r'''
import io, sys
from PIL import Image, ImageOps
for path in sys.argv[1:]:
    with Image.open(path) as img:
        img.draft("RGB", (200, 200))
        img = ImageOps.exif_transpose(img).convert("RGB")
        img = ImageOps.fit(img, (100, 100), Image.LANCZOS)
        out = io.BytesIO()
        img.save(out, "JPEG", quality=80)
'''


def cpu_ms_per_image(command, images):
    """User + system CPU of `command` and all its children, milliseconds per image."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    return (user + system) * 1000 / images, user * 1000 / images, system * 1000 / images


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="directory of JPEG snaps (only *.jpg / *.jpeg directly in it)")
    parser.add_argument("--snapthumb", required=True, help="snapthumb binary, or several separated by commas")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=120, help="use the first N files by name (default 120)")
    parser.add_argument("--work", default=None, help="where stores are made (default: a temporary directory)")
    parser.add_argument("--faces", choices=["on", "off"], default="off",
                        help="snapthumb's --faces (default off: issue 41's floor target is without face detection)")
    args = parser.parse_args()

    files = sorted(os.path.join(args.dir, n) for n in os.listdir(args.dir) if n.lower().endswith((".jpg", ".jpeg")))[: args.limit]
    if not files:
        sys.exit("floor-check: no JPEG files in %s" % args.dir)
    builds = [os.path.abspath(b) for b in args.snapthumb.split(",")]
    work = args.work or tempfile.mkdtemp(prefix="floor-check-")
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs, exist_ok=True)
    for f in files:  # the backfill's input: exactly these files, linked (or copied) into one directory
        target = os.path.join(inputs, os.path.basename(f))
        if not os.path.exists(target):
            try:
                os.link(f, target)
            except OSError:
                shutil.copyfile(f, target)
    floor = os.path.join(work, "floor")
    subprocess.run(["cc", "-O2", os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor.c"), "-o", floor, "-ljpeg"], check=True)
    has_pillow = subprocess.run([sys.executable, "-c", "import PIL"], stderr=subprocess.DEVNULL).returncode == 0
    if not has_pillow:
        print("floor-check: Pillow is not installed (pip install pillow): its side is left out")
    for f in files:  # read every file once, untimed
        with open(f, "rb") as handle:
            handle.read()

    n = len(files)
    results = {"floor": [], "pillow": []}
    results.update({b: [] for b in builds})
    for r in range(args.rounds):
        results["floor"].append(cpu_ms_per_image([floor] + files, n))
        if has_pillow:
            results["pillow"].append(cpu_ms_per_image([sys.executable, "-c", PILLOW] + files, n))
        for b in builds if r % 2 == 0 else builds[::-1]:
            store = os.path.join(work, "store-%d-%d" % (builds.index(b), r))
            results[b].append(cpu_ms_per_image([b, "backfill", "--jobs", "1", "--faces", args.faces, "--store", store, inputs], n))
            shutil.rmtree(store)
        print("round %d/%d done" % (r + 1, args.rounds), file=sys.stderr)

    def show(name, rows):
        print("%-40s CPU ms/img %s   (user %s; system %s)" % (name, " ".join("%.2f" % t for t, _, _ in rows),
              " ".join("%.2f" % u for _, u, _ in rows), " ".join("%.2f" % s for _, _, s in rows)))
    print("%d images, %d rounds, faces %s, load average %.2f" % (n, args.rounds, args.faces, os.getloadavg()[0]))
    show("floor (C, libjpeg-turbo at 1/4)", results["floor"])
    if has_pillow:
        show("pillow (in memory)", results["pillow"])
    for b in builds:
        show(b, results[b])
        to_floor = [s[0] / f[0] for s, f in zip(results[b], results["floor"])]
        line = "  x floor: median %.2f (rounds %.2f-%.2f)" % (statistics.median(to_floor), min(to_floor), max(to_floor))
        if has_pillow:
            to_pillow = [s[0] / p[0] for s, p in zip(results[b], results["pillow"])]
            line += "   x pillow: median %.2f (rounds %.2f-%.2f)" % (statistics.median(to_pillow), min(to_pillow), max(to_pillow))
        print(line)
    if not args.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
