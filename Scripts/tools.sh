#!/usr/bin/env bash
# Installs the operator tools the deploy and fleet tests run, from PyPI, into a virtual
# environment, .venv-tools/ at the top of the checkout, when they are missing:
#   kubernetes-validate  validates every file in deploy/kubernetes against Kubernetes' own
#                        schemas (bundled in the package: no network at test time);
#   awscli               runs docs/fleet.md's AWS wiring, command by command, against moto.
# The tests skip, with a message, when it is absent; with SNAPTHUMB_REQUIRE_TOOLS=1 they fail.
# Safe to run again and again; run by test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-tools
if [ -x "$venv/bin/kubernetes-validate" ] && [ -x "$venv/bin/aws" ]; then
  exit 0
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 || { echo "tools.sh: $python is not on PATH" >&2; exit 1; }
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "tools.sh: installing python3-venv" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
echo "tools.sh: installing kubernetes-validate and awscli into $venv (about a minute)" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check 'kubernetes-validate==1.*' 'awscli==1.*'
"$venv/bin/kubernetes-validate" --version >/dev/null
"$venv/bin/aws" --version >/dev/null
