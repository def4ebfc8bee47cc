#!/usr/bin/env bash
# Mutation fuzzing of `snapthumb process` under AddressSanitizer.
#
#   Scripts/fuzz.sh                  every file of Tests/Fuzz/corpus, then 60 fresh mutations
#   Scripts/fuzz.sh --count 5000     longer, on demand (or FUZZ_COUNT=5000)
#   Scripts/fuzz.sh --seed 7         another sequence of mutations (or FUZZ_SEED=7; default: 1)
#   Scripts/fuzz.sh --binary PATH    a snapthumb to run (default: the ASan build in .build-asan,
#                                    built here when missing)
#   Scripts/fuzz.sh --make-corpus    rewrites Tests/Fuzz/corpus from Samples/ (small seeds, mutated)
#
# Each input must end with exit status 0 (processed) or 1 (refused with a code): a signal,
# another status, or a sanitizer report is a failure. Failing inputs are kept in
# .fuzz-failures/ with their stderr; the script exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."

count="${FUZZ_COUNT:-60}"
seed="${FUZZ_SEED:-1}"
binary=""
make_corpus=0
while [ $# -gt 0 ]; do
  case "$1" in
    --count) count="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --make-corpus) make_corpus=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fuzz: unknown argument $1" >&2; exit 2 ;;
  esac
done

corpus=Tests/Fuzz/corpus
RANDOM=$seed

# mutate <in> <out>: a copy with a few random bytes overwritten, sometimes also
# a run of bytes repeated into place, sometimes truncated.
mutate() {
  local in="$1" out="$2" size n offset byte i
  cp "$in" "$out"
  size=$(stat -c %s "$out")
  [ "$size" -gt 0 ] || return 0
  n=$(( 1 + RANDOM % 8 ))
  for ((i = 0; i < n; i++)); do
    offset=$(( (RANDOM * 32768 + RANDOM) % size ))
    byte=$(( RANDOM % 256 ))
    # Header bytes matter most: bias a third of the writes into the first 64 bytes.
    if (( RANDOM % 3 == 0 )); then offset=$(( offset % (size < 64 ? size : 64) )); fi
    printf '%b' "\\0$(printf %03o "$byte")" | dd of="$out" bs=1 seek="$offset" conv=notrunc status=none
  done
  if (( RANDOM % 4 == 0 )); then
    # Copy 16 bytes from one place to another (lengths and markers move around).
    local from=$(( (RANDOM * 32768 + RANDOM) % size )) to=$(( (RANDOM * 32768 + RANDOM) % size ))
    dd if="$in" of="$out" bs=1 skip="$from" seek="$to" count=16 conv=notrunc status=none
  fi
  if (( RANDOM % 5 == 0 )); then
    truncate -s $(( size - (RANDOM % (size / 2 + 1)) )) "$out"
  fi
}

if [ "$make_corpus" = 1 ]; then
  command -v vips >/dev/null || { echo "fuzz: --make-corpus needs the vips command (libvips-tools)" >&2; exit 1; }
  seeds=$(mktemp -d)
  trap 'rm -rf "$seeds"' EXIT
  # Small seeds of every accepted format and of the odd layouts the decoders branch on.
  vips thumbnail Samples/snaps/phone-portrait.jpg "$seeds/baseline.jpg[Q=70]" 48
  vips thumbnail Samples/snaps/phone-portrait.jpg "$seeds/progressive.jpg[Q=70,interlace]" 40
  vips thumbnail Samples/orientation/orientation-6.jpg "$seeds/exif-6.jpg[Q=60]" 40 --no-rotate
  vips resize Samples/snaps/cmyk-noprofile.jpg "$seeds/cmyk.jpg[Q=60,strip]" 0.04
  vips thumbnail Samples/snaps/alpha.png "$seeds/alpha.png" 32
  vips thumbnail Samples/snaps/alpha.png "$seeds/interlaced.png[interlace]" 24
  vips thumbnail Samples/snaps/sixteen-bit.png "$seeds/sixteen.png" 24
  vips thumbnail Samples/snaps/landscape.webp "$seeds/small.webp[Q=50]" 40
  vips thumbnail Samples/snaps/iphone.heic "$seeds/small.heic[Q=40]" 32 2>/dev/null || true
  cp Samples/snaps/small.avif Samples/snaps/tiny.png Samples/bad/bomb.jpg "$seeds/"
  vips thumbnail Samples/snaps/animated.gif "$seeds/small.gif" 24
  rm -rf "$corpus"
  mkdir -p "$corpus"
  for file in "$seeds"/*; do
    name=$(basename "$file")
    cp "$file" "$corpus/$name"
    for k in 1 2; do mutate "$file" "$corpus/m$k-$name"; done
  done
  echo "fuzz: $(ls "$corpus" | wc -l) files, $(du -sk "$corpus" | cut -f1) KB in $corpus"
  exit 0
fi

if [ -z "$binary" ]; then
  binary=.build-asan/debug/snapthumb
  if [ ! -x "$binary" ]; then
    swift build --sanitize address --scratch-path .build-asan --product snapthumb
    # Face detection (on by default) is the plugin beside the binary.
    swift build --sanitize address --scratch-path .build-asan --product SnapThumbFaces
  fi
fi
[ -x "$binary" ] || { echo "fuzz: no executable at $binary" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=.fuzz-failures
# Leaks are not crashes (libvips keeps caches for the life of the process).
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:exitcode=86${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

failed=0
ran=0
run_one() {
  local file="$1" status=0
  ran=$((ran + 1))
  # A generous limit: only a hang (not a slow debug build) trips it.
  timeout -s KILL 120 "$binary" process "$file" --store "$work/store" >/dev/null 2>"$work/stderr" || status=$?
  if { [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; } || grep -qE "Sanitizer|runtime error:" "$work/stderr"; then
    failed=$((failed + 1))
    mkdir -p "$failures"
    local keep="$failures/$(date +%s)-$ran-$(basename "$file")"
    cp "$file" "$keep"
    cp "$work/stderr" "$keep.stderr"
    echo "fuzz: FAIL (exit $status) on $file, kept as $keep" >&2
    head -n 20 "$work/stderr" >&2
  fi
}

inputs=("$corpus"/*)
for file in "${inputs[@]}"; do run_one "$file"; done
for ((n = 0; n < count; n++)); do
  source=${inputs[$(( RANDOM % ${#inputs[@]} ))]}
  mutate "$source" "$work/input"
  run_one "$work/input"
done
echo "fuzz: $ran inputs (${#inputs[@]} from the corpus, $count mutations, seed $seed), $failed failures"
[ "$failed" -eq 0 ]
