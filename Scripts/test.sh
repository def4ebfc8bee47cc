#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every temporary file of the run (the tests', the servers', the compilers') goes in one
# directory of its own, removed at the end whatever happened: a run leaves nothing in /tmp,
# even when a test is killed before its own clean-up.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/snapthumb-test.XXXXXX")
trap 'rm -rf "$run_tmp"' EXIT
export TMPDIR="$run_tmp"
Scripts/setup.sh
# moto's S3 server (a Python virtual environment, .venv-moto/) for the bucket
# store's tests; with SNAPTHUMB_REQUIRE_MOTO=1 a missing moto fails them instead of skipping.
Scripts/moto.sh
export SNAPTHUMB_REQUIRE_MOTO=1
# A real S3 server, Ceph's RADOS Gateway from Debian's packages, for the same tests
# (Scripts/rgw.sh; the tests start and stop it). Measured on the 2-core VM: the install
# 70 s on a machine without Ceph, the start 15-30 s once per test run. With
# SNAPTHUMB_REQUIRE_RGW=1 a missing radosgw fails those tests instead of skipping them.
Scripts/rgw.sh install
export SNAPTHUMB_REQUIRE_RGW=1
# kubernetes-validate and the AWS CLI (PyPI, .venv-tools/): the deploy files against Kubernetes'
# schemas, docs/fleet.md's AWS commands against moto. With SNAPTHUMB_REQUIRE_TOOLS=1 a missing one fails.
Scripts/tools.sh
export SNAPTHUMB_REQUIRE_TOOLS=1
# The stage benchmarks are a separate package (Benchmarks/): CI builds them so that
# they keep compiling; running them is `swift package --package-path Benchmarks benchmark`.
swift build --package-path Benchmarks
# The shape of the code (issue 25): modules one way, imports declared, counts (Scripts/check-shape.py).
python3 Scripts/check-shape.py
swift build --build-tests
# Scripts/install.sh (run by SystemdUnitTests) makes the man page with it; swift test cannot build it meanwhile.
swift build --product generate-manual

# The suite takes 6-13 min on the 2-core VM. Once (CI run 49) CI stopped making progress
# until its 90 min ran out, and the log did not say where. So each `swift test` runs
# watched: past TEST_MINUTES (default 25) the processes it started are shown with each
# thread's stack (gdb, where installed), then killed, and it is run once more. A failing
# test fails the run at once; only a run that never ends is run again, and the log says so.
minutes="${TEST_MINUTES:-25}"
# What a watched run starts has its own TMPDIR, inherited by everything below it (servers,
# daemons, their Ceph daemons), even once reparented: that is how its processes are found.
tests_tmp="$run_tmp/tests"
mkdir -p "$tests_tmp"
run_processes() {
  local p
  for p in /proc/[0-9]*; do
    grep -qzxF "TMPDIR=$tests_tmp" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
  done
  return 0
}
show_stuck() {
  local procs pid
  # Frozen first (twice, for what was being started), so that nothing moves while it is shown.
  kill -STOP $(run_processes) 2>/dev/null || true
  procs=$(run_processes)
  kill -STOP $procs 2>/dev/null || true
  echo "test.sh: '$*' has run for over $minutes min; its processes:" >&2
  ps -o pid,ppid,etime,stat,wchan:24,args --forest -p "$(echo $procs | tr ' ' ,)" >&2 || true
  if command -v gdb >/dev/null; then
    for pid in $procs; do
      # At most a few thousand lines a process: the test process has a few hundred threads.
      local lines=0
      case "$(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)" in
        *PackageTests*) lines=4000 ;;
        *snapthumb*) lines=400 ;;
      esac
      if [ "$lines" -gt 0 ]; then
        echo "test.sh: threads of $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-120)):" >&2
        timeout 120 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 16' 2>&1 \
          | grep -E '^(Thread|#)' | cut -c1-200 | head -n "$lines" >&2 || true
      fi
    done
  fi
}
end_run() {
  local procs tests="" p
  procs=$(run_processes)
  for p in $procs; do
    case "$(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)" in *PackageTests*|*swift-test*) tests="$tests $p" ;; esac
  done
  # The test process first: its end closes the servers' standard input, and they stop what
  # they started (rgw.sh its Ceph daemons). Then, after a minute, whatever is left.
  kill -KILL $tests 2>/dev/null || true
  kill -CONT $procs 2>/dev/null || true
  reap_leftovers
}
# After a run: what it started should be gone once the servers have stopped themselves.
reap_leftovers() {
  local procs i
  for i in $(seq 30); do
    [ -z "$(run_processes)" ] && return 0
    sleep 2
  done
  procs=$(run_processes)
  echo "test.sh: still running a minute after the test process ended, stopped:" >&2
  ps -o pid,args -p "$(echo $procs | tr ' ' ,)" >&2 || true
  kill -TERM $procs 2>/dev/null || true
  sleep 5
  kill -KILL $(run_processes) 2>/dev/null || true
}
run_watched() {
  TMPDIR="$tests_tmp" "$@" &
  local pid=$! waited=0 status=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    waited=$((waited + 2))
    if [ "$waited" -ge $((minutes * 60)) ]; then
      show_stuck "$@"
      end_run
      wait "$pid" 2>/dev/null || true
      return 124
    fi
  done
  wait "$pid" || status=$?
  reap_leftovers
  return "$status"
}
# run_suite CMD...: CMD watched; once more if it never ended; exits with its status if it failed.
run_suite() {
  local status=0
  run_watched "$@" || status=$?
  if [ "$status" = 124 ]; then
    echo "test.sh: '$*' did not end within $minutes min (stacks above); running it once more" >&2
    status=0
    run_watched "$@" || status=$?
  fi
  [ "$status" = 0 ] || exit "$status"
}
run_suite swift test

# Sanitizer job: the directory-listing and hardening tests, then a short fuzz run of
# `snapthumb process`, under AddressSanitizer (its own build directory, .build-asan); the
# Huffman decoder's tests too (its C reads damaged files); then the differential libFuzzer
# target of the JPEG decoding (ASan + UBSan, ours against libjpeg-turbo alone) for a bounded time.
# Measured on the shared 2-core VM: the ASan build 3–8 min (dependencies included), its tests
# ~20 s, the fuzz run (39 corpus files + 60 mutations) ~80 s, the decoder fuzzer's build ~25 s
# and its run FUZZ_DECODER_SECONDS (60). SKIP_SANITIZERS=1 skips it.
if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
  swift build --build-tests --sanitize address --scratch-path .build-asan
  ASAN_OPTIONS=detect_leaks=0 run_suite swift test --skip-build --sanitize address --scratch-path .build-asan \
    --filter 'DirectoryEntry|HardeningTests|HuffmanDecoderTests'
  Scripts/fuzz.sh --binary .build-asan/debug/snapthumb --count "${FUZZ_COUNT:-60}"
  Scripts/fuzz-decoder.sh "${FUZZ_DECODER_SECONDS:-60}"
fi
