#!/usr/bin/env bash
# Installs snapthumb, its face plugin, man page, shell completions, docs, manifest schema and the systemd unit templates (watch, consume).
#
#   Scripts/install.sh                      # build a release binary and install under /usr/local
#   Scripts/install.sh --binary PATH        # install this binary (and the face plugin beside it) instead of building
#   Scripts/install.sh --destdir DIR        # stage everything under DIR (packaging, tests)
#   Scripts/install.sh --prefix /usr        # another prefix
#   Scripts/install.sh --manual-tool PATH   # swift-argument-parser's generate-manual, already built
#
# Then, on a systemd host:  systemctl enable --now snapthumb-watch@1 snapthumb-watch@2
#   (or, with QUEUE_URL in /etc/snapthumb/consume.env:  systemctl enable --now snapthumb-consume@1)
# The man page (snapthumb(1)) is generated from the binary's own help by swift-argument-parser's
# generate-manual, the tool its generate-manual plugin runs; it is built once (about 15 s).
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
destdir=""
binary=""
manual_tool=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --destdir) destdir="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --manual-tool) manual_tool="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  Scripts/setup.sh
  swift build -c release --static-swift-stdlib --product snapthumb
  swift build -c release --static-swift-stdlib --product SnapThumbFaces
  swift build -c release --static-swift-stdlib --product generate-manual
  binary=.build/release/snapthumb
fi
[ -x "$binary" ] || { echo "install: $binary is not an executable" >&2; exit 1; }
# Face detection (on by default) is a plugin the binary opens on first use: OpenCV and the model,
# libSnapThumbFaces.so, built beside the binary; installed as <prefix>/lib/snapthumb/libSnapThumbFaces.so.
plugin="$(dirname "$binary")/libSnapThumbFaces.so"
[ -f "$plugin" ] || { echo "install: the face plugin $plugin is missing (swift build -c release --static-swift-stdlib --product SnapThumbFaces)" >&2; exit 1; }

# generate-manual: given, beside the binary (Scripts/test.sh builds it), or built now.
[ -n "$manual_tool" ] || manual_tool="$(dirname "$binary")/generate-manual"
if [ ! -x "$manual_tool" ]; then
  case "$binary" in */debug/*) configuration=debug ;; *) configuration=release ;; esac
  swift build -c "$configuration" --product generate-manual >/dev/null
  manual_tool="$(swift build -c "$configuration" --show-bin-path)/generate-manual"
fi
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT

share="$destdir$prefix/share"
install -d "$destdir$prefix/bin" "$destdir$prefix/lib/snapthumb" "$share/snapthumb" "$share/man/man1" "$share/doc/snapthumb" \
  "$share/bash-completion/completions" "$share/zsh/site-functions" "$share/fish/vendor_completions.d" \
  "$destdir/etc/systemd/system" "$destdir/etc/snapthumb"
install -m 0755 "$binary" "$destdir$prefix/bin/snapthumb"
install -m 0644 "$plugin" "$destdir$prefix/lib/snapthumb/libSnapThumbFaces.so"
# verify looks for the schema in <prefix>/share/snapthumb when the resource bundle is not beside the binary.
install -m 0644 Sources/SnapThumbVerify/Resources/manifest.v1.schema.json "$share/snapthumb/"
# generate-manual drops every character outside ASCII ("100100 JPEG" for "100×100 JPEG"): it reads
# the help through a wrapper that spells each as an ASCII marker (@U+00D7@), which the page then
# gets as roff's own escape (\[u00D7]), shown as × by man and mandoc. perl-base is essential on Debian.
cat > "$staging/snapthumb" <<WRAPPER
#!/bin/sh
"$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")" "\$@" | perl -CSD -pe 's/([^\\x00-\\x7F])/sprintf("\@U+%04X\@", ord(\$1))/ge'
WRAPPER
chmod 0755 "$staging/snapthumb"
"$manual_tool" "$staging/snapthumb" --output-directory "$staging" >/dev/null
perl -pe 's/\@U\+([0-9A-F]{4,6})\@/\\[u$1]/g' "$staging/snapthumb.1" > "$staging/snapthumb.1.roff"
install -m 0644 "$staging/snapthumb.1.roff" "$share/man/man1/snapthumb.1"
"$binary" --generate-completion-script bash > "$share/bash-completion/completions/snapthumb"
"$binary" --generate-completion-script zsh > "$share/zsh/site-functions/_snapthumb"
"$binary" --generate-completion-script fish > "$share/fish/vendor_completions.d/snapthumb.fish"
chmod 0644 "$share/bash-completion/completions/snapthumb" "$share/zsh/site-functions/_snapthumb" "$share/fish/vendor_completions.d/snapthumb.fish"
install -m 0644 README.md docs/*.md "$share/doc/snapthumb/"
# The units name the binary and its documentation under the prefix.
for unit in snapthumb-watch@.service snapthumb-consume@.service; do
  sed "s#/usr/local/#$prefix/#g" "dist/systemd/$unit" > "$destdir/etc/systemd/system/$unit"
  chmod 0644 "$destdir/etc/systemd/system/$unit"
done
[ -e "$destdir/etc/snapthumb/snapthumb.json" ] || install -m 0644 dist/snapthumb.json "$destdir/etc/snapthumb/snapthumb.json"

if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ]; then
  getent passwd snapthumb >/dev/null || useradd --system --home-dir /srv/snapthumb --shell /usr/sbin/nologin snapthumb
  install -d -o snapthumb -g snapthumb /srv/snapthumb /srv/snapthumb/uploads /srv/snapthumb/store
  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
fi
case "$("$destdir$prefix/bin/snapthumb" version --json)" in *'"present":true}'*) ;;
  *) echo "install: $destdir$prefix/bin/snapthumb does not find its face plugin in $destdir$prefix/lib/snapthumb" >&2; exit 1 ;; esac
echo "install: snapthumb $("$destdir$prefix/bin/snapthumb" --version) in $destdir$prefix/bin, face plugin in $destdir$prefix/lib/snapthumb; unit in $destdir/etc/systemd/system"
