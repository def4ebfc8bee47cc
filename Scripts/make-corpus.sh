#!/usr/bin/env bash
# make-corpus.sh - build the SnapThumb benchmark image corpus from real photographs.
#
# Usage: Scripts/make-corpus.sh [--out DIR] [--snaps N] [--originals N] [--heic N]
#                               [--png N] [--mixed N] [--seed N] [--jobs N]
#                               [--photos DIR] [--force]
#
# Source photos: the real photographs in Debian's `mate-backgrounds` package
# (usr/share/backgrounds/mate/nature/*.jpg, 12 photos, 1280x1024 .. 2560x1920,
# GPL-2+). The .deb is fetched with `apt-get download` into a temp dir and
# unpacked with `dpkg-deb -x` (nothing is installed). If the package is already
# installed its files are used directly; on machines without apt (e.g. macOS)
# pass --photos DIR with your own JPEGs (the corpus then differs, of course).
#
# Output (DIR defaults to <repo>/.corpus, which must be gitignored):
#   snaps/      ~1080x1440 portrait JPEGs (some 1440x1080 landscape), Q 75-85,
#               random-but-seeded crops/zooms/flips; ~25% stored rotated with
#               EXIF Orientation 6/8/3 so they *display* upright; ~half carry
#               EXIF Make/Model.
#   originals/  4032x3024 (12 MP) JPEGs, Q 88-92, upscaled ~1.8-4.5x from the
#               photos with seeded gaussian grain (sigma 2-4) so they compress
#               like camera files (~1-3 MB); ~20-30% are portrait shots stored
#               sideways with Orientation 6 (like phone cameras); all Make/Model.
#   heic/       1512x2016 (some 2016x1512) HEIC, Q=50.
#   png/        1512x2016 (some 2016x1512) PNGs, half RGBA with a soft vignette alpha.
#   mixed/      hardlinks (copies if linking fails) of a shuffled mix:
#               60% snaps, 15% originals, 10% heic, 15% png.
#   manifest.tsv  one row per generated file (source photo, crop, size, Q, EXIF).
#   .complete   marker holding the parameters; a rerun with the same parameters
#               (and the same script and libvips version) does nothing.
#
# Deterministic: all choices come from Python's random.Random seeded per
# category (so changing e.g. --heic does not change the snaps) and the grain
# from seeded `vips gaussnoise`; same inputs + libvips => byte-identical files,
# whatever --jobs is. --jobs defaults to the number of cores (xargs -P).
# Requires: bash, python3 (stdlib only), vips CLI (tested with libvips 8.14;
# needs heif support for HEIC), exiftool, and apt-get + dpkg-deb unless
# --photos is given. KEEP_TMP=1 keeps the temp dir for debugging.
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO="$(cd "$(dirname "$SELF")/.." && pwd)"

OUT="$REPO/.corpus"
SNAPS=1000 ORIGINALS=100 HEIC=20 PNG=20 MIXED=100 SEED=1
JOBS="$(nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)"
PHOTOS="" FORCE=0

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p;}' "$SELF"; }
die() { echo "make-corpus: error: $*" >&2; exit 1; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT="${2:?--out needs a value}"; shift 2 ;;
    --snaps) SNAPS="${2:?}"; shift 2 ;;
    --originals) ORIGINALS="${2:?}"; shift 2 ;;
    --heic) HEIC="${2:?}"; shift 2 ;;
    --png) PNG="${2:?}"; shift 2 ;;
    --mixed) MIXED="${2:?}"; shift 2 ;;
    --seed) SEED="${2:?}"; shift 2 ;;
    --jobs|-j) JOBS="${2:?}"; shift 2 ;;
    --photos) PHOTOS="${2:?}"; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
for v in SNAPS ORIGINALS HEIC PNG MIXED SEED JOBS; do
  is_uint "${!v}" || die "--$(tr 'A-Z' 'a-z' <<<"$v") must be a non-negative integer (got '${!v}')"
done
[[ $JOBS -ge 1 ]] || JOBS=1

for tool in python3 vips vipsheader exiftool; do
  command -v "$tool" >/dev/null || die "'$tool' not found (need python3, libvips tools, exiftool)"
done

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SCRIPT_HASH="$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest()[:16])' "$SELF")"
SOURCE_ID="mate-backgrounds"
[[ -n $PHOTOS ]] && SOURCE_ID="photos:$(cd "$PHOTOS" && pwd)"
MARKER="snaps=$SNAPS originals=$ORIGINALS heic=$HEIC png=$PNG mixed=$MIXED seed=$SEED source=$SOURCE_ID script=$SCRIPT_HASH $(vips --version)"

summary() {
  local sub n kb
  printf '%-10s %6s %10s\n' "set" "files" "size"
  for sub in snaps originals heic png mixed; do
    [[ -d $OUT/$sub ]] || continue
    n=$(find "$OUT/$sub" -type f | wc -l | tr -d ' ')
    kb=$(du -sk "$OUT/$sub" | cut -f1)
    printf '%-10s %6s %8.1f MB\n' "$sub" "$n" "$(echo "$kb" | awk '{print $1/1024}')"
  done
  kb=$(du -sk "$OUT" | cut -f1)   # du counts mixed/ hardlinks once
  printf '%-10s %6s %8.1f MB   (%s)\n' "total" "" "$(echo "$kb" | awk '{print $1/1024}')" "$OUT"
}

if [[ $FORCE -eq 0 && -f $OUT/.complete && "$(cat "$OUT/.complete")" == "$MARKER" ]]; then
  echo "make-corpus: $OUT is up to date ($MARKER); use --force to rebuild"
  summary
  exit 0
fi

START=$SECONDS
echo "make-corpus: building $OUT"
echo "  params: $MARKER"
# Only remove what this script creates; never the whole --out directory.
rm -rf "$OUT/.complete" "$OUT/snaps" "$OUT/originals" "$OUT/heic" "$OUT/png" "$OUT/mixed" "$OUT/manifest.tsv"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/make-corpus.XXXXXX")"
trap '[[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------- sources
if [[ -n $PHOTOS ]]; then
  SRCDIR="$(cd "$PHOTOS" && pwd)"
  echo "  source: --photos $SRCDIR"
elif [[ -d /usr/share/backgrounds/mate/nature ]]; then
  SRCDIR=/usr/share/backgrounds/mate/nature
  echo "  source: installed mate-backgrounds ($SRCDIR)"
else
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null \
    || die "apt-get/dpkg-deb not available; pass --photos DIR with JPEG photos"
  mkdir -p "$TMP/deb"
  echo "  source: apt-get download mate-backgrounds"
  APT_OPTS=(-q)
  [[ $EUID -eq 0 ]] && APT_OPTS+=(-o APT::Sandbox::User=root)  # root: skip the _apt sandbox warning
  if ! (cd "$TMP/deb" && apt-get download "${APT_OPTS[@]}" mate-backgrounds); then
    echo "  apt-get download failed; running apt-get update and retrying" >&2
    apt-get update -q || die "apt-get update failed (need root and network to the Debian mirror)"
    (cd "$TMP/deb" && apt-get download "${APT_OPTS[@]}" mate-backgrounds) || die "could not download mate-backgrounds"
  fi
  DEB="$(ls "$TMP"/deb/mate-backgrounds_*.deb | head -n1)"
  echo "  unpacking $(basename "$DEB") (version $(dpkg-deb -f "$DEB" Version))"
  dpkg-deb -x "$DEB" "$TMP/deb/root"
  SRCDIR="$TMP/deb/root/usr/share/backgrounds/mate/nature"
fi
[[ -d $SRCDIR ]] || die "photo directory not found: $SRCDIR"

# Decode each usable photo once to an upright sRGB .v file (fast mmap loads later).
mkdir -p "$TMP/src" "$TMP/work"
: >"$TMP/sources.txt"
i=0
while IFS= read -r f; do
  w=$(vipsheader -f width "$f" 2>/dev/null) || continue
  h=$(vipsheader -f height "$f")
  if [[ $w -lt 1000 || $h -lt 1000 ]]; then echo "  skip (too small): $(basename "$f") ${w}x${h}"; continue; fi
  vips autorot "$f" "$TMP/src/a.v"
  vips colourspace "$TMP/src/a.v" "$TMP/src/$i.v" srgb
  vips flip "$TMP/src/$i.v" "$TMP/src/${i}f.v" horizontal   # mirrored copy for "flipped" crops
  rm -f "$TMP/src/a.v"
  w=$(vipsheader -f width "$TMP/src/$i.v"); h=$(vipsheader -f height "$TMP/src/$i.v")
  printf '%s %s %s %s\n' "$i" "$w" "$h" "$(basename "$f")" >>"$TMP/sources.txt"
  i=$((i + 1))
done < <(find "$SRCDIR" -maxdepth 1 -type f \( -iname '*.jpg' -o -iname '*.jpeg' \) | LC_ALL=C sort)
[[ $i -gt 0 ]] || die "no usable JPEG photos (>= 1000 px) in $SRCDIR"
echo "  $i source photos ($((SECONDS - START))s):"
awk '{n = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", n); printf "    %-18s %sx%s\n", n, $2, $3}' "$TMP/sources.txt"

# ---------------------------------------------------------------- plan
# Python only decides *what* to make (seeded RNG); vips does all pixel work.
python3 - "$TMP" "$SEED" "$SNAPS" "$ORIGINALS" "$HEIC" "$PNG" "$MIXED" <<'PY'
import os, random, sys

tmp, seed = sys.argv[1], int(sys.argv[2])
n_snaps, n_orig, n_heic, n_png, n_mixed = map(int, sys.argv[3:8])
sources = []
for line in open(os.path.join(tmp, "sources.txt")):
    idx, w, h, name = line.split(maxsplit=3)
    sources.append((idx, int(w), int(h), name.strip()))

PHONES = [("Apple", "iPhone 12"), ("Apple", "iPhone 13 Pro"), ("Apple", "iPhone 14"),
          ("Apple", "iPhone SE (2nd generation)"), ("samsung", "SM-G991B"),
          ("samsung", "SM-A536B"), ("Google", "Pixel 7"), ("Xiaomi", "Redmi Note 10 Pro")]
# stored pixels = upright image rotated by this, so that a viewer applying the
# EXIF orientation shows it upright (6 = "rotate 90 CW to display").
ROT = {1: "d0", 6: "d270", 8: "d90", 3: "d180"}

def rng_for(cat):
    return random.Random(f"snapthumb-corpus/{seed}/{cat}")

def source_cycle(rng):
    while True:
        order = list(sources)
        rng.shuffle(order)
        yield from order

def crop(rng, sw, sh, W, H, zmin, max_up):
    """Random WxH-aspect window covering zmin..1 of the largest such window, but
    (where the photo allows) no smaller than W/max_up wide, so that the resize
    upscales at most max_up times and the output does not turn to mush."""
    aspect = W / H
    if sw / sh > aspect:
        ch, cw = sh, sh * aspect
    else:
        cw, ch = sw, sw / aspect
    zmin = min(1.0, max(zmin, W / max_up / cw))
    z = rng.uniform(zmin, 1.0)
    cw, ch = max(64, int(cw * z)), max(64, int(ch * z))
    return rng.randint(0, sw - cw), rng.randint(0, sh - ch), cw, ch

def exif_date(rng):
    return "%04d:%02d:%02d %02d:%02d:%02d" % (rng.randint(2021, 2024), rng.randint(1, 12),
            rng.randint(1, 28), rng.randint(7, 21), rng.randint(0, 59), rng.randint(0, 59))

jobs, exif, manifest, noise_fields = [], [], [], set()
cats = {"snaps": [], "originals": [], "heic": [], "png": []}

def add(cat, rel, src, box, W, H, flip, orient, q, alpha=0.0, noise=0.0, phone=None, date=None):
    x, y, w, h = box
    stored = (H, W) if orient in (6, 8) else (W, H)
    # a flipped crop is the mirrored window of the pre-mirrored source "<idx>f"
    jobs.append([cat, rel, src[0] + "f" if flip else src[0], src[1] - x - w if flip else x,
                 y, w, h, W, H, ROT[orient], q, "%.2f" % alpha,
                 "noise-%.1f-%dx%d" % ((noise,) + stored) if noise else "-"])
    if noise:
        noise_fields.add((noise,) + stored)
    cats[cat].append(rel)
    tags = []
    if orient != 1:
        tags.append("-Orientation#=%d" % orient)
    if phone:
        tags += ["-Make=" + phone[0], "-Model=" + phone[1], "-DateTimeOriginal=" + date,
                 "-CreateDate=" + date]
    if tags:
        exif.extend(tags + [rel, "-execute"])
    manifest.append([rel, src[3], "%d,%d,%d,%d" % box, "%dx%d" % stored, "%dx%d" % (W, H),
                     str(q), str(orient), "1" if flip else "0",
                     "%.2f" % alpha if alpha else "-", "%.1f" % noise if noise else "-",
                     "%s %s" % phone if phone else "-"])

# originals: 4032x3024 stored; ~30% portrait shots stored sideways + Orientation 6
rng = rng_for("originals"); srcs = source_cycle(rng)
for i in range(1, n_orig + 1):
    s = next(srcs)
    portrait = rng.random() < 0.30
    W, H = (3024, 4032) if portrait else (4032, 3024)
    box = crop(rng, s[1], s[2], W, H, 0.85, 99)
    add("originals", "originals/IMG_%04d.jpg" % i, s, box, W, H, rng.random() < 0.5,
        6 if portrait else 1, rng.choice([88, 90, 90, 90, 92]),
        noise=rng.choice([2.0, 3.0, 4.0]), phone=rng.choice(PHONES), date=exif_date(rng))

# heic: phone-size, mostly portrait
rng = rng_for("heic"); srcs = source_cycle(rng)
for i in range(1, n_heic + 1):
    s = next(srcs)
    W, H = (2016, 1512) if rng.random() < 0.2 else (1512, 2016)
    add("heic", "heic/heic-%04d.heic" % i, s, crop(rng, s[1], s[2], W, H, 0.6, 1.6),
        W, H, rng.random() < 0.5, 1, 50)

# png: phone-size, half with a soft vignette alpha channel
rng = rng_for("png"); srcs = source_cycle(rng)
for i in range(1, n_png + 1):
    s = next(srcs)
    W, H = (2016, 1512) if rng.random() < 0.2 else (1512, 2016)
    box = crop(rng, s[1], s[2], W, H, 0.6, 1.6)
    alpha = rng.uniform(0.8, 1.0) if i % 2 == 0 else 0.0
    add("png", "png/png-%04d.png" % i, s, box, W, H, rng.random() < 0.5, 1, 0, alpha=alpha)

# snaps: ~1080x1440 portrait (20% landscape), slight size jitter, Q 75-85,
# ~25% stored rotated with Orientation 6/8/3, ~half with Make/Model
rng = rng_for("snaps"); srcs = source_cycle(rng)
for i in range(1, n_snaps + 1):
    s = next(srcs)
    k = 1.0 if rng.random() < 0.7 else rng.uniform(0.9, 1.1)
    W, H = round(1080 * k), round(1440 * k)
    if rng.random() < 0.2:
        W, H = H, W
    box = crop(rng, s[1], s[2], W, H, 0.6, 1.3)
    flip = rng.random() < 0.5
    orient = rng.choice([6, 6, 8, 3]) if rng.random() < 0.25 else 1
    q = rng.randint(75, 85)
    phone = rng.choice(PHONES) if (orient != 1 or rng.random() < 0.4) else None
    add("snaps", "snaps/snap-%04d.jpg" % i, s, box, W, H, flip, orient, q,
        phone=phone, date=exif_date(rng) if phone else None)

# mixed: shuffled hardlinks, 60% snaps / 15% originals / 10% heic / 15% png
rng = rng_for("mixed")
mixed = []
if n_mixed:
    share = {"originals": 0.15, "heic": 0.10, "png": 0.15}
    want = {c: round(n_mixed * f) for c, f in share.items()}
    want["snaps"] = n_mixed - sum(want.values())
    for c in ("snaps", "originals", "heic", "png"):
        pool = cats[c]
        if not pool:
            continue
        k = want[c]
        pick = rng.sample(pool, min(k, len(pool)))
        pick += [rng.choice(pool) for _ in range(k - len(pick))]  # repeat if pool is small
        mixed += pick
    rng.shuffle(mixed)

total = len(jobs)
with open(os.path.join(tmp, "jobs.txt"), "w") as f:
    for n, j in enumerate(jobs, 1):
        f.write(" ".join(map(str, [j[0], n, total] + j[1:])) + "\n")
with open(os.path.join(tmp, "noise.txt"), "w") as f:
    for sigma, w, h in sorted(noise_fields):   # seeded: gaussnoise is random otherwise
        f.write("noise-%.1f-%dx%d %d %d %.1f %d\n" % (sigma, w, h, w, h, sigma,
                                                    (seed * 7919 + int(sigma * 10)) % 2**31))
with open(os.path.join(tmp, "exif.args"), "w") as f:
    f.write("".join(a + "\n" for a in exif))
with open(os.path.join(tmp, "mixed.txt"), "w") as f:
    for n, rel in enumerate(mixed):
        f.write("%s mixed/%04d-%s\n" % (rel, n, os.path.basename(rel)))
with open(os.path.join(tmp, "manifest.tsv"), "w") as f:
    f.write("\t".join(["file", "source", "crop_xywh", "stored_wxh", "upright_wxh", "q",
                       "orientation", "flipped", "alpha_cutoff", "noise_sigma", "camera"]) + "\n")
    for row in manifest:
        f.write("\t".join(row) + "\n")
PY

# ---------------------------------------------------------------- render
make_one() {
  set -euo pipefail
  local cat=$1 n=$2 total=$3 rel=$4 src=$5 x=$6 y=$7 w=$8 h=$9
  local W=${10} H=${11} rot=${12} q=${13} alpha=${14} noise=${15}
  local t="$CORPUS_TMP/work/$n" ext="${rel##*.}" opts cur
  mkdir -p "$t"
  case $ext in
    jpg|heic) opts="[Q=$q,strip]" ;;
    png) opts="[strip]" ;;
  esac
  local final="$t/out.$ext$opts"
  # Each vips CLI call costs ~0.1 s of startup, so the last step of the chain
  # writes the final file directly instead of going through another .v.
  vips extract_area "$CORPUS_TMP/src/$src.v" "$t/crop.v" "$x" "$y" "$w" "$h"
  # exact WxH: the crop already has the target aspect, so --crop trims <1px
  if [[ $rot == d0 && $noise == - && $alpha == 0.00 ]]; then
    vips thumbnail "$t/crop.v" "$final" "$W" --height "$H" --crop centre
  else
    vips thumbnail "$t/crop.v" "$t/a.v" "$W" --height "$H" --crop centre
    cur="$t/a.v"
    if [[ $rot != d0 ]]; then   # store rotated; EXIF Orientation (set later) undoes it
      if [[ $noise == - && $alpha == 0.00 ]]; then
        vips rot "$cur" "$final" "$rot"; cur=
      else
        vips rot "$cur" "$t/b.v" "$rot"; cur="$t/b.v"
      fi
    fi
    if [[ $noise != - ]]; then  # add precomputed sensor-like grain; the save clips to 0..255
      vips add "$cur" "$CORPUS_TMP/$noise.v" "$final"; cur=
    fi
    if [[ $alpha != 0.00 ]]; then  # soft elliptical vignette as the alpha channel
      vips mask_butterworth "$t/mask.v" "$W" "$H" 3 "$alpha" 0.5 --optical --uchar --reject
      vips bandjoin "$cur $t/mask.v" "$final"
    fi
  fi
  mv "$t/out.$ext" "$CORPUS_OUT/$rel"
  rm -rf "$t"
  printf '  [%*d/%d] %s\n' "${#total}" "$n" "$total" "$rel"
}
export -f make_one
export CORPUS_TMP="$TMP" CORPUS_OUT="$OUT"
export VIPS_CONCURRENCY=1   # parallelism comes from xargs -P

# Grain for the 12 MP originals: a few shared noise fields (rounded to signed
# char), generated once instead of per image.
while read -r name nw nh sigma nseed; do
  vips gaussnoise "$TMP/n.v" "$nw" "$nh" --sigma "$sigma" --mean 0 --seed "$nseed"
  vips round "$TMP/n.v" "$TMP/r.v" rint
  vips cast "$TMP/r.v" "$TMP/$name.v" char
  rm -f "$TMP/n.v" "$TMP/r.v"
done <"$TMP/noise.txt"

mkdir -p "$OUT/snaps" "$OUT/originals" "$OUT/heic" "$OUT/png" "$OUT/mixed"
NJOBS=$(wc -l <"$TMP/jobs.txt" | tr -d ' ')
echo "  rendering $NJOBS images with $JOBS parallel jobs ($((SECONDS - START))s)"
if [[ $NJOBS -gt 0 ]]; then
  xargs -P "$JOBS" -L 1 bash -c 'make_one "$@"' _ <"$TMP/jobs.txt" \
    || die "some images failed to render (see messages above)"
fi

# ---------------------------------------------------------------- EXIF
if [[ -s $TMP/exif.args ]]; then
  echo "  writing EXIF tags into $(grep -c -- '^-execute$' "$TMP/exif.args") files ($((SECONDS - START))s)"
  (cd "$OUT" && exiftool -@ "$TMP/exif.args" -common_args -q -overwrite_original) \
    || die "exiftool failed"
fi

# ---------------------------------------------------------------- mixed
if [[ -s $TMP/mixed.txt ]]; then
  echo "  linking $(wc -l <"$TMP/mixed.txt" | tr -d ' ') files into mixed/"
  while read -r src dst; do
    ln "$OUT/$src" "$OUT/$dst" 2>/dev/null || cp "$OUT/$src" "$OUT/$dst"
  done <"$TMP/mixed.txt"
fi

cp "$TMP/manifest.tsv" "$OUT/manifest.tsv"
printf '%s\n' "$MARKER" >"$OUT/.complete"
echo "make-corpus: done in $((SECONDS - START))s"
summary
