#!/usr/bin/env bash
# Quality per byte of square100 (see quality.py): prepares the tools and the
# venv (Scripts/setup-quality.sh), builds snapthumb, and scores it on photos.
#
# Usage: Benchmarks/quality/run.sh [--count N] [--baseline LABEL=PATH] [PHOTO...]
#   Without photos: the first N (default 40) of .corpus/snaps (Scripts/make-corpus.sh).
#   Any other option is passed to quality.py (--budgets, --tsv, --extra, --side,
#   --modern avif|heic and --modern-efforts 0,2,4 for the modern square beside square100, with
#   avifenc speed 6 as an anchor when it is installed; --pixel-styles drawn,soft,retro for the
#   pixel-art measures, default all three, "" for none).
#   --people DIR (photos of people with truth.tsv, from make_people.py): afterwards the face
#   measures too, how many faces stay in the square (faces_eval.py) and faces in the pixel art
#   (face_measures.py), with PixelOE beside them when --pixeloe DIR (shared/tools/pixeloe) is given
#   (PixelOE needs opencv-python-headless in the venv).
#   --heic-fidelity: afterwards, the same photos as phones write them (12 MP HEIC with a 320 px
#   thumbnail, heif-enc from libheif-examples): square100 made from the embedded thumbnail against
#   the one from the whole primary image and the original (heic_fidelity.py; issue 41 item 1).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
COUNT=40
PEOPLE="" PIXELOE="" HEIC_FIDELITY=0
args=() photos=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --count) COUNT="$2"; shift 2 ;;
    --people) PEOPLE="$2"; shift 2 ;;
    --pixeloe) PIXELOE="$2"; shift 2 ;;
    --heic-fidelity) HEIC_FIDELITY=1; shift ;;
    --*) args+=("$1" "$2"); shift 2 ;;
    *) photos+=("$1"); shift ;;
  esac
done
"$REPO/Scripts/setup-quality.sh"
(cd "$REPO" && swift build -c release --static-swift-stdlib --product snapthumb >&2)
(cd "$REPO" && swift build -c release --static-swift-stdlib --product SnapThumbFaces >&2)   # faces: the plugin beside it
BIN="$(cd "$REPO" && swift build -c release --static-swift-stdlib --show-bin-path)/snapthumb"
if [[ ${#photos[@]} -eq 0 ]]; then
  [[ -d "$REPO/.corpus/snaps" ]] || "$REPO/Scripts/make-corpus.sh" >&2
  mapfile -t photos < <(ls "$REPO/.corpus/snaps"/*.jpg | sort | head -n "$COUNT")
fi
PY="$REPO/Benchmarks/quality/.venv/bin/python"
"$PY" "$REPO/Benchmarks/quality/quality.py" --snapthumb "$BIN" "${args[@]}" "${photos[@]}"
if [[ -n "$PEOPLE" ]]; then
  "$PY" "$REPO/Benchmarks/quality/faces_eval.py" --snapthumb "$BIN" --dir "$PEOPLE"
  "$PY" "$REPO/Benchmarks/quality/face_measures.py" --snapthumb "$BIN" --dir "$PEOPLE" ${PIXELOE:+--pixeloe "$PIXELOE"}
fi
if [[ "$HEIC_FIDELITY" == 1 ]]; then
  command -v heif-enc >/dev/null || { echo "run.sh: --heic-fidelity needs heif-enc (Debian's libheif-examples)" >&2; exit 2; }
  "$PY" "$REPO/Benchmarks/quality/heic_fidelity.py" --snapthumb "$BIN" "${photos[@]}"
fi
