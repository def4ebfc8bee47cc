#!/usr/bin/env bash
# Installs moto's S3-compatible server (moto[server], from PyPI) into a virtual
# environment, .venv-moto/ at the top of the checkout, when it is missing.
# The S3 store's integration tests start `.venv-moto/bin/moto_server` on
# 127.0.0.1 themselves; they are skipped, with a message, when it is absent.
# Safe to run again and again; run by setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-moto
if [ -x "$venv/bin/moto_server" ] && "$venv/bin/python" -c 'import moto, boto3' 2>/dev/null; then
  exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "moto.sh: $python is not on PATH" >&2; exit 1; }
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "moto.sh: installing python3-venv" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
echo "moto.sh: installing moto[server] into $venv (about a minute)" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]==5.*' boto3
"$venv/bin/moto_server" --help >/dev/null
