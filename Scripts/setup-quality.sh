#!/usr/bin/env bash
# Installs what the quality benchmark (Benchmarks/quality) and the corpus script
# need, only when missing: Debian's butteraugli, exiftool and heif-enc, and a Python venv
# (Benchmarks/quality/.venv) with ssimulacra2, Pillow and NumPy from PyPI.
# Safe to run again. Not part of Scripts/setup.sh: the tests do not need it.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${QUALITY_VENV:-$REPO/Benchmarks/quality/.venv}"

packages=()
command -v butteraugli >/dev/null 2>&1 || packages+=(butteraugli)
command -v exiftool >/dev/null 2>&1 || packages+=(libimage-exiftool-perl)
command -v vips >/dev/null 2>&1 || packages+=(libvips-tools)
command -v heif-enc >/dev/null 2>&1 || packages+=(libheif-examples)
python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3-venv)
if [ ${#packages[@]} -gt 0 ]; then
  echo "setup-quality: installing ${packages[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REPO/Benchmarks/quality/requirements.txt"
