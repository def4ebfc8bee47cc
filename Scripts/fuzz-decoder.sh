#!/usr/bin/env bash
# Differential fuzzing of SnapThumb's own JPEG decoding (issue 41): libFuzzer with
# AddressSanitizer and UndefinedBehaviorSanitizer over Tests/Fuzz/decoder/fuzz_decoder.c,
# which decodes each input the program's way (our Huffman decoder and paired IDCTs) and
# with libjpeg-turbo alone, at 1/1, 1/2, 1/4, 1/8 and the centre region, and stops at the
# first difference (see the harness's comment for the documented ones it only counts).
#
#   Scripts/fuzz-decoder.sh SECONDS          build, then fuzz for SECONDS from the seed corpus
#   Scripts/fuzz-decoder.sh --replay FILE... build, then run each file once (a reproducer)
#   Scripts/fuzz-decoder.sh --make-corpus    rewrites Tests/Fuzz/decoder-corpus (installs libjpeg-turbo-progs' cjpeg)
#   FUZZ_JOBS=2                              parallel fuzzing processes (default 1)
#   SNAP_FUZZ_STRICT=1                       compare the documented differences too
#
# The build goes to .build-fuzz/ (the binary .build-fuzz/fuzz-decoder); inputs the fuzzer
# finds go to .build-fuzz/corpus-decoder/, failing inputs to .fuzz-failures/decoder-*.
# Exit status 0: no sanitizer report and no difference in the time given.
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=Tests/Fuzz/decoder-corpus
out=.build-fuzz

usage() { sed -n '2,16p' "$0"; }

# ---- The seed corpus: small JPEGs of every layout the decoders branch on.
if [ "${1:-}" = --make-corpus ]; then
  # cjpeg and jpegtran write the layouts libvips cannot (4:1:1, 4:4:0, arithmetic, restart intervals).
  if ! command -v cjpeg >/dev/null || ! command -v jpegtran >/dev/null || ! command -v vips >/dev/null; then
    echo "fuzz-decoder: installing libjpeg-turbo-progs and libvips-tools" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends libjpeg-turbo-progs libvips-tools >/dev/null
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # Two small pictures (a photo and an EXIF-rotated one), as binary PPM and grey PGM, at sizes
  # that are and are not whole MCUs, portrait and landscape (the centre region runs along the long side).
  vips thumbnail Samples/snaps/phone-portrait.jpg "$work/p.ppm" 72 --size both --height 96 >/dev/null
  vips thumbnail Samples/orientation/orientation-6.jpg "$work/l.ppm" 101 --height 67 --size both >/dev/null
  vips colourspace "$work/p.ppm" "$work/g.pgm" b-w >/dev/null
  # Larger ones too: libjpeg-turbo's fast Huffman path runs only with 512 bytes per block
  # of an MCU left in the buffer (3 KB for 4:2:0), so the small seeds never reach it.
  vips thumbnail Samples/snaps/phone-portrait.jpg "$work/big.ppm" 240 --size both --height 320 >/dev/null
  # Wide enough that the centre region's left edge moves past the first iMCU at 1/1 and 1/2.
  vips thumbnail Samples/orientation/orientation-6.jpg "$work/w.ppm" 192 --height 96 --size both >/dev/null
  rm -rf "$seeds"
  mkdir -p "$seeds"
  c() { local name="$1" in="$2"; shift 2; cjpeg "$@" -outfile "$seeds/$name.jpg" "$work/$in"; }
  c base-420 p.ppm -quality 80
  c base-420-opt l.ppm -quality 70 -optimize
  c base-444 p.ppm -quality 90 -sample 1x1
  c base-422 l.ppm -quality 75 -sample 2x1
  c base-440 p.ppm -quality 75 -sample 1x2
  c base-411 l.ppm -quality 60 -sample 4x1
  c base-420-q100 l.ppm -quality 100
  c restart-420 p.ppm -quality 80 -restart 1
  c restart-444 l.ppm -quality 85 -sample 1x1 -restart 3B
  c grey g.pgm -quality 80
  c grey-restart g.pgm -quality 70 -restart 2B
  c rgb l.ppm -quality 80 -rgb
  c progressive-420 p.ppm -quality 80 -progressive
  c progressive-444 l.ppm -quality 80 -progressive -sample 1x1
  c arithmetic l.ppm -quality 80 -arithmetic
  c dct-float p.ppm -quality 85 -dct float
  c smooth l.ppm -quality 50 -smooth 30
  c big-420 big.ppm -quality 85
  c wide-422 w.ppm -quality 80 -sample 2x1
  c wide-420 w.ppm -quality 80
  c big-444-restart big.ppm -quality 75 -sample 1x1 -restart 4B
  # CMYK with Adobe's marker (libvips writes it so), and an odd size at 1×1 sampling.
  vips colourspace "$work/p.ppm" "$seeds/cmyk.jpg[Q=70,strip]" cmyk 2>/dev/null || \
    vips icc_export "$work/p.ppm" "$seeds/cmyk.jpg[Q=70,strip]" 2>/dev/null || true
  jpegtran -copy none -optimize -outfile "$seeds/trans-opt.jpg" "$seeds/base-420.jpg"
  jpegtran -copy none -restart 1 -outfile "$seeds/trans-restart.jpg" "$seeds/base-422.jpg"
  # An EXIF-carrying file, as phones write them.
  cp Tests/Fuzz/corpus/exif-6.jpg "$seeds/exif-6.jpg"
  ls -l "$seeds"
  du -sh "$seeds"
  exit 0
fi

seconds=""
replay=()
case "${1:-}" in
  --replay) shift; replay=("$@"); [ ${#replay[@]} -gt 0 ] || { usage >&2; exit 2; } ;;
  -h|--help) usage; exit 0 ;;
  ''|-*) usage >&2; exit 2 ;;
  *) seconds="$1"; [[ "$seconds" =~ ^[0-9]+$ ]] || { usage >&2; exit 2; } ;;
esac

# ---- A clang that links libFuzzer: the Swift toolchain's (it ships the fuzzer runtime),
# else Debian's clang with libclang-rt-dev (installed here when neither is there).
can_fuzz() {
  local cc="$1" probe
  probe=$(mktemp -d)
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void) d; (void) n; return 0; }\n' >"$probe/p.c"
  "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1
  local status=$?
  rm -rf "$probe"
  return $status
}
find_clang() {
  local swift_clang=""
  if command -v swift >/dev/null 2>&1; then
    swift_clang="$(dirname "$(readlink -f "$(command -v swift)")")/clang"
  fi
  for cc in "${FUZZ_CC:-}" "$swift_clang" /opt/swift/usr/bin/clang clang; do
    [ -n "$cc" ] && command -v "$cc" >/dev/null 2>&1 && can_fuzz "$cc" && { echo "$cc"; return 0; }
  done
  return 1
}
cc=$(find_clang) || {
  echo "fuzz-decoder: no clang with libFuzzer found: installing Debian's clang and libclang-rt-dev" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
  cc=$(find_clang) || { echo "fuzz-decoder: still no clang that links -fsanitize=fuzzer" >&2; exit 1; }
}

# ---- The build: the project's C decoding as it is, with the harness, instrumented.
mkdir -p "$out"
sources=(Tests/Fuzz/decoder/fuzz_decoder.c Sources/CJPEGShim/jpeg_decode.c Sources/CJPEGShim/jpeg_entropy.c
         Sources/CJPEGShim/jpeg_idct.c Sources/CJPEGShim/jpeg_version.c Sources/CKernelShim/oklab.c Sources/CKernelShim/base.c)
binary="$out/fuzz-decoder"
if [ ! -x "$binary" ] || [ -n "$(find "${sources[@]}" Sources/CJPEGShim/jpeg_entropy.h Sources/CJPEGShim/include/jpegshim.h Sources/CKernelShim/include/kernelshim.h "$0" -newer "$binary" 2>/dev/null)" ]; then
  echo "fuzz-decoder: building $binary with $cc" >&2
    "$cc" -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -ISources/CJPEGShim/include -ISources/CKernelShim/include -ISources/CJPEGShim "${sources[@]}" -ljpeg -lm -ldl -o "$binary.tmp"
  mv "$binary.tmp" "$binary"
fi

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

if [ ${#replay[@]} -gt 0 ]; then
  exec "$binary" -runs=1 "${replay[@]}"
fi

# ---- The run: new inputs in .build-fuzz/corpus-decoder (not in the repository), seeds read
# from Tests/Fuzz/decoder-corpus, and the reproducers of the documented differences from
# Tests/Fuzz/decoder-known (each run checks that they are still told apart); a hang is an
# input taking over 10 s.
mkdir -p "$out/corpus-decoder" .fuzz-failures
jobs="${FUZZ_JOBS:-1}"
args=(-max_total_time="$seconds" -timeout=10 -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix=.fuzz-failures/decoder- "$out/corpus-decoder" "$seeds" Tests/Fuzz/decoder-known)
if [ "$jobs" -gt 1 ]; then
  # libFuzzer's -fork mode: crashes end the run like in one process.
  args=(-fork="$jobs" "${args[@]}")
fi
echo "fuzz-decoder: fuzzing for $seconds s" >&2
"$binary" "${args[@]}"
