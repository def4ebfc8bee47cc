#!/usr/bin/env bash
# Regenerates every file under Samples/ from nothing: synthetic scenes drawn with
# numpy (fixed seeds), encoded with libvips, tagged with exiftool, plus a few
# hand-built broken files. Nothing is downloaded and no third-party image or
# profile is copied, so the whole Samples/ tree is CC0.
#
#   Scripts/make-samples.sh          # from the repository root (any cwd works)
#
# Needs: vips/vipsheader/vipsthumbnail (libvips-tools, with HEIF save), exiftool,
# ImageMagick's convert (animated GIF only), python3 with numpy. Missing tools
# are installed (apt-get / pip). Output is deterministic for a given toolchain:
# running the script twice gives byte-identical files.
#
# The end of the script checks the outputs: the orientation set must display as
# upright.png after `vips autorot` and after vipsthumbnail, every file must
# have the format, size, profile and tags it is meant to have.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/Samples

# ---------------------------------------------------------------- dependencies
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
need_apt() { # need_apt COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "installing $2 (for $1)" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need_apt vips libvips-tools
need_apt vipsheader libvips-tools
need_apt vipsthumbnail libvips-tools
need_apt exiftool libimage-exiftool-perl
# `convert` must be ImageMagick's own (some images ship a stand-in of that name).
convert -version 2>/dev/null | grep -q ImageMagick || { echo "installing imagemagick (for convert)" >&2
    as_root apt-get update -qq; as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq imagemagick >/dev/null; }
need_apt python3 python3
if ! python3 -c 'import numpy' >/dev/null 2>&1; then
    echo "installing numpy" >&2
    python3 -m pip install --quiet numpy || as_root apt-get install -y -qq python3-numpy >/dev/null
fi
case "$(vips -l)" in *heifsave*) ;; *) echo "libvips has no heifsave (libheif with an HEVC encoder is needed)" >&2; exit 1;; esac

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

rm -rf "$OUT/orientation" "$OUT/snaps" "$OUT/bad"
mkdir -p "$OUT/orientation" "$OUT/snaps" "$OUT/bad"

# ------------------------------------------------------------------ generator
# ------------------------------------------------------------------ generator
# Scripts/samples/draw.py draws the scenes and writes the broken files (see its docstring).
DRAW=$ROOT/Scripts/samples/draw.py

echo "drawing scenes..." >&2
python3 "$DRAW" scenes "$T"

# exiftool: edit in place, keep no _original copies
ET() { exiftool -q -q -overwrite_original "$@"; }

# ---------------------------------------------------------------- orientation
O=$OUT/orientation
vips copy "$T/upright.ppm" "$O/upright.png[compression=9]"
for n in 1 2 3 4 5 6 7 8; do
    vips copy "$T/orient-$n.ppm" "$O/orientation-$n.jpg[Q=90,optimize_coding]"
    ET -Orientation#=$n "$O/orientation-$n.jpg"
done

# ---------------------------------------------------------------------- snaps
S=$OUT/snaps
camera=(-Make=Acme "-Model=Acme Phone 12" "-Software=SnapThumb make-samples.sh"
        "-ExposureTime=1/250" -FNumber=1.8 -ISO=50 -FocalLength=4.2)

vips copy "$T/portrait.ppm" "$S/phone-portrait.jpg[Q=80,optimize_coding]"
ET "${camera[@]}" -Orientation#=1 "-DateTimeOriginal=2024:06:15 14:32:10" \
   "-CreateDate=2024:06:15 14:32:10" "-OffsetTimeOriginal=+02:00" "$S/phone-portrait.jpg"

vips copy "$T/rotated.ppm" "$S/phone-rotated.jpg[Q=80,optimize_coding]"
ET "${camera[@]}" -Orientation#=6 "-DateTimeOriginal=2024:06:15 14:35:02" \
   "-CreateDate=2024:06:15 14:35:02" "-OffsetTimeOriginal=+02:00" "$S/phone-rotated.jpg"

vips copy "$T/gps.ppm" "$S/gps-tagged.jpg[Q=80,optimize_coding]"
ET "${camera[@]}" -Orientation#=1 "-DateTimeOriginal=2024:06:16 09:05:44" \
   -GPS:GPSLatitude=51.477928 -GPS:GPSLatitudeRef=N -GPS:GPSLongitude=0.001545 -GPS:GPSLongitudeRef=W \
   -GPS:GPSAltitude=46 -GPS:GPSAltitudeRef=0 "-GPS:GPSDateStamp=2024:06:16" "-GPS:GPSTimeStamp=08:05:44" \
   "-XMP-dc:Title=Sample with location" "-XMP-dc:Creator=SnapThumb samples" \
   "-XMP-dc:Subject=sample" "-XMP-dc:Subject=privacy" "-XMP-dc:Subject=gps" \
   "-XMP-exif:GPSLatitude=51.477928" "-XMP-exif:GPSLongitude=-0.001545" \
   "-IPTC:Keywords=sample" "-IPTC:Keywords=privacy" "-IPTC:Keywords=gps" \
   "-IPTC:City=Greenwich" "-IPTC:By-line=SnapThumb samples" \
   "$S/gps-tagged.jpg"

# Display P3: convert the sRGB scene, then paste pure P3 primaries (outside sRGB)
vips icc_transform "$T/p3.ppm" "$T/p3.v" p3 --input-profile srgb
vips insert "$T/p3.v" "$T/swatches.ppm" "$T/p3s.v" 24 664
vips copy "$T/p3s.v" "$S/display-p3.jpg[Q=88,optimize_coding]"

# Adobe RGB (1998)-compatible, with the profile generated above
vips icc_transform "$T/a98.ppm" "$T/a98.v" "$T/a98.icc" --input-profile srgb
vips insert "$T/a98.v" "$T/swatches.ppm" "$T/a98s.v" 24 664
vips copy "$T/a98s.v" "$S/adobe-rgb.jpg[Q=88,optimize_coding]"

# CMYK with the small CMYK profile generated above (libvips' built-in "cmyk"
# profile would add ~1 MB), then a copy without the profile
vips icc_transform "$T/cmyk.ppm" "$S/cmyk-profile.jpg[Q=85,optimize_coding]" "$T/cmyk.icc" --input-profile srgb
cp "$S/cmyk-profile.jpg" "$S/cmyk-noprofile.jpg"
ET -ICC_Profile:all= "$S/cmyk-noprofile.jpg"

# HEIC, Display P3 (libvips' built-in "p3" profile, CC0)
vips icc_transform "$T/heic.ppm" "$T/heic.v" p3 --input-profile srgb
vips heifsave "$T/heic.v" "$S/iphone.heic" --Q 45 --compression hevc
# The same HEIC with an EXIF Orientation tag of 6 and no HEIF transform box:
# HEIF's own boxes (applied by libheif) rule, so this must NOT be rotated.
exiftool -q -n -Orientation=6 -o "$S/heic-exif-orientation-6.heic" "$S/iphone.heic"

# RGBA sticker
vips bandjoin "$T/sticker-rgb.ppm $T/sticker-a.pgm" "$S/alpha.png[compression=9]"

# 16-bit RGB
vips copy "$T/sixteen.ppm" "$S/sixteen-bit.png[compression=9,filter=up]"

# WebP
vips webpsave "$T/webp.ppm" "$S/landscape.webp" --Q 75
# AVIF through libheif's AV1 encoder: a small one, to show the loader takes it.
vips thumbnail "$T/webp.ppm" "$T/avif-src.v" 480
vips heifsave "$T/avif-src.v" "$S/small.avif" --compression av1 --Q 50 --strip

# animated GIF, 3 frames, 0.5 s each, looping
convert -delay 50 -loop 0 "$T/frame0.ppm" "$T/frame1.ppm" "$T/frame2.ppm" \
    -dither None -colors 128 "$S/animated.gif"

# tiny: 40x30
vips resize "$T/tiny-src.ppm" "$S/tiny.png[compression=9]" 0.125

# greyscale JPEG
vips colourspace "$T/grey.ppm" "$T/grey.v" b-w
vips copy "$T/grey.v" "$S/grey.jpg[Q=85,optimize_coding]"

# ------------------------------------------------------------------------ bad
B=$OUT/bad
vips copy "$T/bad-src.ppm" "$T/bad-src.jpg[Q=85]"
vips copy "$T/small.ppm" "$T/small.jpg[Q=75]"
python3 "$DRAW" bad "$B" "$T/bad-src.jpg" "$T/small.jpg"
vips tiffsave "$T/tiff.ppm" "$B/tiff-image.tif" --compression deflate


# ---------------------------------------------------------------------- checks
echo "checking..." >&2
fail() { echo "CHECK FAILED: $*" >&2; exit 1; }
hdr() { vipsheader -a "$1" | sed -n "s/^$2: //p"; }
# mean and max absolute difference of two images of the same size
diffstat() {
    [ "$(hdr "$1" width)x$(hdr "$1" height)" = "$(hdr "$2" width)x$(hdr "$2" height)" ] || { echo "size 999"; return; }
    vips subtract "$1" "$2" "$T/d.v"
    vips abs "$T/d.v" "$T/a.v"
    echo "$(vips avg "$T/a.v") $(vips max "$T/a.v")"
}
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

UP=$O/upright.png
[ "$(hdr "$UP" width)x$(hdr "$UP" height)x$(hdr "$UP" bands)x$(hdr "$UP" format)" = "600x400x3xuchar" ] || fail "upright.png"
for n in 1 2 3 4 5 6 7 8; do
    f=$O/orientation-$n.jpg
    [ "$(exiftool -s3 -n -Orientation "$f")" = "$n" ] || fail "$f: Orientation tag"
    vips autorot "$f" "$T/r.png"
    read -r mean max < <(diffstat "$T/r.png" "$UP")
    lt "$mean" 3 || fail "$f: autorot differs from upright.png (mean $mean)"
    vipsthumbnail "$f" --size 600x600 -o "$T/t.png"
    read -r tmean _ < <(diffstat "$T/t.png" "$UP")
    lt "$tmean" 3 || fail "$f: vipsthumbnail differs from upright.png (mean $tmean)"
    # the stored pixels must NOT look upright (except for 1): asymmetry catches mistakes
    if [ "$n" != 1 ]; then
        vips copy "$f" "$T/s.png"
        read -r smean _ < <(diffstat "$T/s.png" "$UP")
        lt 20 "$smean" || fail "$f: stored pixels too close to upright (mean $smean)"
    fi
    printf '  orientation-%s: autorot mean %.2f max %s, vipsthumbnail mean %.2f\n' "$n" "$mean" "$max" "$tmean" >&2
done
# every wrong fix is detectable: upright vs each of its 3 same-size transforms
for op in "flip horizontal" "flip vertical" "rot d180"; do
    vips ${op%% *} "$UP" "$T/w.png" ${op#* }
    read -r wmean _ < <(diffstat "$T/w.png" "$UP")
    lt 20 "$wmean" || fail "upright vs $op too similar ($wmean)"
done

expect() { # expect FILE FIELD VALUE
    local got; got=$(hdr "$1" "$2")
    [ "$got" = "$3" ] || fail "$1: $2 is '$got', want '$3'"
}
expect "$S/phone-portrait.jpg" width 1080; expect "$S/phone-portrait.jpg" height 1440
expect "$S/phone-rotated.jpg" width 1440; expect "$S/phone-rotated.jpg" height 1080
[ "$(exiftool -s3 -n -Orientation "$S/phone-rotated.jpg")" = 6 ] || fail "phone-rotated orientation"
vips autorot "$S/phone-rotated.jpg" "$T/pr.v"; expect "$T/pr.v" width 1080
[ -n "$(exiftool -s3 -DateTimeOriginal -Make -Model "$S/phone-portrait.jpg")" ] || fail "phone-portrait EXIF"
for tag in GPS:GPSLatitude GPS:GPSLongitude GPS:GPSAltitude XMP-exif:GPSLatitude XMP-dc:Subject IPTC:Keywords; do
    [ -n "$(exiftool -s3 "-$tag" "$S/gps-tagged.jpg")" ] || fail "gps-tagged: no $tag"
done
[ "$(exiftool -s3 -ProfileDescription "$S/display-p3.jpg")" = sP3C ] || fail "display-p3 profile"
exiftool -s3 -ProfileDescription "$S/adobe-rgb.jpg" | grep A98 >/dev/null || fail "adobe-rgb profile"
expect "$S/cmyk-profile.jpg" interpretation cmyk; expect "$S/cmyk-profile.jpg" bands 4
expect "$S/cmyk-noprofile.jpg" interpretation cmyk
vipsheader -a "$S/cmyk-profile.jpg" | grep '^icc-profile-data' >/dev/null || fail "cmyk-profile has no profile"
! vipsheader -a "$S/cmyk-noprofile.jpg" | grep '^icc-profile-data' >/dev/null || fail "cmyk-noprofile has a profile"
vipsheader -a "$S/iphone.heic" | grep '^icc-profile-data' >/dev/null || fail "iphone.heic has no profile"
[ "$(exiftool -s3 -ProfileDescription "$S/iphone.heic")" = sP3C ] || fail "iphone.heic profile is not P3"
[ "$(exiftool -s3 -ProfileDescription "$S/cmyk-profile.jpg")" = "Simple CMYK (SnapThumb, CC0)" ] || fail "cmyk profile"
# the generated CMYK profile must round-trip: sRGB -> CMYK -> sRGB close to the start
vips icc_transform "$T/cmyk.ppm" "$T/c.v" "$T/cmyk.icc" --input-profile srgb
vips icc_transform "$T/c.v" "$T/c2.v" srgb --input-profile "$T/cmyk.icc"
read -r cmean _ < <(diffstat "$T/c2.v" "$T/cmyk.ppm")
lt "$cmean" 2 || fail "CMYK profile round trip mean error $cmean"
# the generated A98 profile must be invertible too
vips icc_transform "$T/a98.ppm" "$T/r.v" "$T/a98.icc" --input-profile srgb
vips icc_transform "$T/r.v" "$T/r2.v" srgb --input-profile "$T/a98.icc"
read -r amean _ < <(diffstat "$T/r2.v" "$T/a98.ppm")
lt "$amean" 1 || fail "A98 profile round trip mean error $amean"
# bad files: header-level facts the expectations rely on
vips copy "$T/bad-src.jpg" "$T/x.v" 2>/dev/null || fail "bad-src.jpg (before damage) does not load"
expect "$S/iphone.heic" vips-loader heifload
[ "$(exiftool -s3 -n -Orientation "$S/heic-exif-orientation-6.heic")" = 6 ] || fail "heic-exif-orientation-6.heic is not tagged"
[ "$(stat -c %s "$S/iphone.heic")" -lt 400000 ] || fail "iphone.heic too big"
expect "$S/alpha.png" bands 4
expect "$S/sixteen-bit.png" format ushort; expect "$S/sixteen-bit.png" interpretation rgb16
expect "$S/landscape.webp" vips-loader webpload
expect "$S/small.avif" vips-loader heifload
expect "$S/animated.gif" n-pages 3
expect "$S/tiny.png" width 40; expect "$S/tiny.png" height 30
expect "$S/grey.jpg" bands 1
# the bad ones
expect "$B/bomb.png" width 60000; expect "$B/bomb.png" height 60000
expect "$B/bomb.jpg" width 60000; expect "$B/bomb.jpg" height 60000
[ "$(stat -c %s "$B/bomb.png")" -lt 100000 ] || fail "bomb.png too big"
[ ! -s "$B/empty.png" ] || fail "empty.png not empty"
expect "$B/tiff-image.tif" vips-loader tiffload
expect "$B/vector.svg" vips-loader svgload
expect "$B/document.pdf" vips-loader pdfload
! vips copy "$B/not-an-image.jpg" "$T/x.v" 2>/dev/null || fail "not-an-image.jpg loads"
! vips copy "$B/truncated.jpg[fail_on=warning]" "$T/x.v" 2>/dev/null || fail "truncated.jpg loads with fail_on=warning"
! vips copy "$B/corrupt.jpg[fail_on=warning]" "$T/x.v" 2>/dev/null || fail "corrupt.jpg loads with fail_on=warning"

total=$(du -sb "$OUT" | cut -f1)
[ "$total" -lt 3500000 ] || fail "Samples/ is $total bytes"
echo "all checks passed; Samples/ is $total bytes" >&2
