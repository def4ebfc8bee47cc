#!/usr/bin/env bash
# Builds SnapThumb's container image here, with no registry but Debian's: an OCI archive.
#
#   Scripts/build-image.sh OUT.tar [--binary PATH] [--mirror URL]
#
# - The runtime comes from Debian's packages (mmdebstrap, bookworm: the release the binary is
#   built on; SnapThumb refuses to publish with a libvips other than its build's). Only the files
#   the binary needs are kept: the shared libraries that ldd finds for snapthumb, for the libraries
#   it opens on first need (libvips.so.42, libcurl.so.4) and for libvips' HEIF module (the only
#   loader module SnapThumb uses: JPEG, PNG, WebP, GIF are built in; every other loader is blocked)
#   and for the face plugin (libSnapThumbFaces.so: OpenCV's dnn, imgproc and core, opened on the
#   first face detection),
#   with their Debian copyright files, the CA certificates and the dynamic loader. No shell, no apt.
# - The release binary (swift build -c release --static-swift-stdlib, unless --binary names one),
#   stripped; its debug info is kept beside the archive (OUT.tar -> OUT.debug, linked by
#   .gnu_debuglink), not in the image. The face plugin beside it goes to /usr/local/lib/snapthumb/
#   (stripped too; its debug info OUT.faces.debug).
# - A non-root user (snapthumb, uid and gid 10001), `snapthumb` on PATH as the entrypoint.
# - The layer is reproducible for the same inputs (sorted, numeric owners, SOURCE_DATE_EPOCH).
# The image's digest is printed last: pin it in deploy/kubernetes (image: …:VERSION@sha256:DIGEST).
# Load it with `podman load -i OUT.tar` (or skopeo copy oci-archive:OUT.tar …).
# Needs root (mmdebstrap's root mode and chroot) and Debian's mmdebstrap and umoci, which it installs.
set -euo pipefail
cd "$(dirname "$0")/.."

out=""; binary=""; mirror="${SNAPTHUMB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${SNAPTHUMB_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --mirror) mirror="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "build-image.sh: unknown option $1" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
[ -n "$out" ] || { echo "usage: Scripts/build-image.sh OUT.tar [--binary PATH] [--mirror URL]" >&2; exit 2; }
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: run as root (mmdebstrap and chroot)" >&2; exit 2; }

missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
command -v umoci >/dev/null 2>&1 || missing+=(umoci)
command -v objcopy >/dev/null 2>&1 || missing+=(binutils)
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-image.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -z "$binary" ]; then
  echo "build-image.sh: building the release binary (minutes on 2 cores)" >&2
  swift build -c release --product snapthumb --static-swift-stdlib >&2
  swift build -c release --product SnapThumbFaces --static-swift-stdlib >&2
  binary="$(swift build -c release --show-bin-path)/snapthumb"
fi
plugin="$(dirname "$binary")/libSnapThumbFaces.so"
[ -f "$plugin" ] || { echo "build-image.sh: the face plugin $plugin is missing (swift build -c release --product SnapThumbFaces --static-swift-stdlib)" >&2; exit 2; }
version="$("$binary" --version)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

work="$(mktemp -d /tmp/snapthumb-image-XXXXXX)"
[ -n "${KEEP_IMAGE_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
full="$work/full" root="$work/root"

# 1. The runtime packages, in a throwaway root to pick files from.
if [ -n "${IMAGE_RUNTIME_ROOT:-}" ]; then
  # For working on this script: a runtime root made by an earlier run (KEEP_IMAGE_WORK=1 keeps it).
  cp -a "$IMAGE_RUNTIME_ROOT" "$full"
else
  echo "build-image.sh: mmdebstrap bookworm from $mirror" >&2
  mmdebstrap --quiet --variant=apt --include=libvips42,libcurl4,libopencv-dnn406,libopencv-imgproc406,libopencv-core406,ca-certificates bookworm "$full" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $security bookworm-security main" >&2
fi

# 2. The binary, stripped; its debug info beside the archive.
debug="${out%.tar}.debug"
objcopy --only-keep-debug "$binary" "$debug"
install -d "$full/usr/local/bin" "$full/usr/local/share/snapthumb" "$full/usr/local/lib/snapthumb"
objcopy --strip-all --add-gnu-debuglink="$debug" "$binary" "$full/usr/local/bin/snapthumb"
faces_debug="${out%.tar}.faces.debug"
objcopy --only-keep-debug "$plugin" "$faces_debug"
objcopy --strip-unneeded --add-gnu-debuglink="$faces_debug" "$plugin" "$full/usr/local/lib/snapthumb/libSnapThumbFaces.so"
chmod 0644 "$full/usr/local/lib/snapthumb/libSnapThumbFaces.so"
install -m 0644 Sources/SnapThumbVerify/Resources/manifest.v1.schema.json "$full/usr/local/share/snapthumb/"

# 3. What it needs: ldd inside that root, for the binary and what it opens later.
heif="$(cd "$full" && ls usr/lib/*/vips-modules-*/vips-heif.so | sed -n 1p)"
needs=(/usr/local/bin/snapthumb /usr/local/lib/snapthumb/libSnapThumbFaces.so "/$heif")
for soname in libvips.so.42 libcurl.so.4; do needs+=("$(chroot "$full" /sbin/ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64|x86_64|64bit/ && !found {print $NF; found = 1}')"); done
if missing_libs="$(for file in "${needs[@]}"; do chroot "$full" /usr/bin/ldd "$file"; done | grep 'not found')"; then
  echo "build-image.sh: libraries missing from the runtime packages:" >&2; echo "$missing_libs" >&2; exit 1
fi
libs="$(for file in "${needs[@]}"; do chroot "$full" /usr/bin/ldd "$file"; done | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}' | sort -u)"

# 4. The image's root: usrmerge links, those files at their real paths, users, certificates.
install -d "$root/usr/lib" "$root/usr/bin" "$root/etc/ssl/certs" "$root/usr/share/doc" "$root/usr/lib64"
ln -s usr/lib "$root/lib"; ln -s usr/bin "$root/bin"; ln -s usr/lib64 "$root/lib64"
install -d -m 1777 "$root/tmp"
install -d "$root/proc" "$root/dev" "$root/sys"
copy() {  # the file a path resolves to, at that resolved path, and the path itself as a link to it
  local path="$1" real
  real="$(cd "$full" && realpath -m -s --relative-to=/ "$(chroot "$full" /usr/bin/readlink -f "$path")")"
  install -D -m "$(stat -c %a "$full/$real")" "$full/$real" "$root/$real"
  local rel; rel="$(realpath -m -s --relative-to=/ "$path")"
  case "$rel" in lib/*|lib64/*) rel="usr/$rel" ;; esac
  if [ "$rel" != "$real" ] && [ ! -e "$root/$rel" ] && [ ! -L "$root/$rel" ]; then
    install -d "$(dirname "$root/$rel")"
    ln -s "$(realpath -m -s --relative-to="/$(dirname "$rel")" "/$real")" "$root/$rel"
  fi
}
for lib in $libs; do copy "$lib"; done
copy "/$heif"
install -m 0755 "$full/usr/local/bin/snapthumb" "$root/usr/local/bin/snapthumb" 2>/dev/null || { install -d "$root/usr/local/bin"; install -m 0755 "$full/usr/local/bin/snapthumb" "$root/usr/local/bin/snapthumb"; }
install -D -m 0644 "$full/usr/local/lib/snapthumb/libSnapThumbFaces.so" "$root/usr/local/lib/snapthumb/libSnapThumbFaces.so"
install -D -m 0644 "$full/usr/local/share/snapthumb/manifest.v1.schema.json" "$root/usr/local/share/snapthumb/manifest.v1.schema.json"
cp -L "$full/etc/ssl/certs/ca-certificates.crt" "$root/etc/ssl/certs/ca-certificates.crt"
cp -a "$full/etc/ld.so.conf" "$full/etc/ld.so.conf.d" "$root/etc/"
# The Debian copyright file of every package a kept file came from.
for file in $(cd "$root" && find usr -type f -name '*.so*'); do
  chroot "$full" /usr/bin/dpkg -S "/$file" 2>/dev/null | sed -n '1s/:.*//p' || true
done | sort -u | while read -r package; do
  if [ -f "$full/usr/share/doc/$package/copyright" ]; then
    install -D -m 0644 "$full/usr/share/doc/$package/copyright" "$root/usr/share/doc/$package/copyright"
  fi
done
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nsnapthumb:x:10001:10001:SnapThumb:/tmp:/usr/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nsnapthumb:x:10001:\n' > "$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$root/etc/nsswitch.conf"
ldconfig -r "$root"
# A smoke test before packing: the binary starts as the user and libvips loads (Swift reads its
# arguments from /proc, which a container runtime mounts: so does this).
[ "$(unshare --fork --pid --mount --mount-proc="$root/proc" chroot --userspec=10001:10001 "$root" /usr/local/bin/snapthumb --version)" = "$version" ]
smoke="$(unshare --fork --pid --mount --mount-proc="$root/proc" chroot --userspec=10001:10001 "$root" /usr/local/bin/snapthumb version --json)"
case "$smoke" in *'"facePlugin":{"path":"/usr/local/lib/snapthumb/libSnapThumbFaces.so","present":true}'*) ;;
  *) echo "build-image.sh: the image's snapthumb does not find its face plugin: $smoke" >&2; exit 1 ;; esac
# and a face is found (the plugin and OpenCV load): a sample in, the store out, both removed.
cp Samples/people/astronaut.jpg "$root/tmp/smoke.jpg"
smoke="$(unshare --fork --pid --mount --mount-proc="$root/proc" chroot --userspec=10001:10001 "$root" /usr/local/bin/snapthumb process /tmp/smoke.jpg --store /tmp/smoke-store)"
rm -rf "$root/tmp/smoke.jpg" "$root/tmp/smoke-store"
case "$smoke" in *'"faces":1'*) ;; *) echo "build-image.sh: no face found in the image's smoke test: $smoke" >&2; exit 1 ;; esac

# 5. The OCI layout, then the archive.
find "$root" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
tar -C "$root" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" -cf "$work/layer.tar" .
tag="$version"
umoci init --layout "$work/oci"
umoci new --image "$work/oci:$tag"
umoci raw add-layer --image "$work/oci:$tag" "$work/layer.tar"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
umoci config --image "$work/oci:$tag" --config.user 10001:10001 --config.entrypoint /usr/local/bin/snapthumb \
  --config.cmd --help --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env HOME=/tmp --config.workingdir /tmp \
  --os linux --architecture amd64 --created "$created" --author SnapThumb \
  --config.label org.opencontainers.image.version="$version" --config.label org.opencontainers.image.title=snapthumb \
  --history.created "$created" --history.created_by "Scripts/build-image.sh"
umoci gc --layout "$work/oci"
tar -C "$work/oci" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" -cf "$out" .
size="$(du -sb --apparent-size "$root" | cut -f1)"
digest="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/oci/index.json")"
echo "build-image.sh: $out: snapthumb $version, $((size / 1000000)) MB unpacked, user 10001, debug info in $debug" >&2
echo "$digest"
