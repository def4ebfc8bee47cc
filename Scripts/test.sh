#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
swift build --build-tests
swift test
