#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
# moto's S3 server (a Python virtual environment, .venv-moto/) for the bucket
# store's tests; with SNAPTHUMB_REQUIRE_MOTO=1 a missing moto fails them instead of skipping.
Scripts/moto.sh
export SNAPTHUMB_REQUIRE_MOTO=1
# The stage benchmarks are a separate package (Benchmarks/): CI builds them so that
# they keep compiling; running them is `swift package --package-path Benchmarks benchmark`.
swift build --package-path Benchmarks
swift build --build-tests
swift test
