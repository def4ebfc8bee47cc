#!/usr/bin/env bash
# Installs snapthumb, its manifest schema and the systemd unit template.
#
#   Scripts/install.sh                      # build a release binary and install under /usr/local
#   Scripts/install.sh --binary PATH        # install this binary instead of building
#   Scripts/install.sh --destdir DIR        # stage everything under DIR (packaging, tests)
#   Scripts/install.sh --prefix /usr        # another prefix
#
# Then, on a systemd host:  systemctl enable --now snapthumb-watch@1 snapthumb-watch@2
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
destdir=""
binary=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --destdir) destdir="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "install: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  Scripts/setup.sh
  swift build -c release --product snapthumb
  binary=.build/release/snapthumb
fi
[ -x "$binary" ] || { echo "install: $binary is not an executable" >&2; exit 1; }

install -d "$destdir$prefix/bin" "$destdir$prefix/share/snapthumb" "$destdir/etc/systemd/system" "$destdir/etc/snapthumb"
install -m 0755 "$binary" "$destdir$prefix/bin/snapthumb"
# verify looks for the schema in <prefix>/share/snapthumb when the resource bundle is not beside the binary.
install -m 0644 Sources/SnapThumbVerify/Resources/manifest.v1.schema.json "$destdir$prefix/share/snapthumb/"
sed "s#/usr/local/bin/snapthumb#$prefix/bin/snapthumb#" dist/systemd/snapthumb-watch@.service \
  > "$destdir/etc/systemd/system/snapthumb-watch@.service"
chmod 0644 "$destdir/etc/systemd/system/snapthumb-watch@.service"
[ -e "$destdir/etc/snapthumb/snapthumb.json" ] || install -m 0644 dist/snapthumb.json "$destdir/etc/snapthumb/snapthumb.json"

if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ]; then
  getent passwd snapthumb >/dev/null || useradd --system --home-dir /srv/snapthumb --shell /usr/sbin/nologin snapthumb
  install -d -o snapthumb -g snapthumb /srv/snapthumb /srv/snapthumb/uploads /srv/snapthumb/store
  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
fi
echo "install: snapthumb $("$destdir$prefix/bin/snapthumb" --version) in $destdir$prefix/bin; unit in $destdir/etc/systemd/system"
