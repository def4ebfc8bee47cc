#!/usr/bin/env bash
# The main job on the bundled samples: a backfill of Samples/ into .build/samples-store (STORE=… for another).
# Samples/bad/ holds files that must be refused; their failures are expected.
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh
swift build -c release --static-swift-stdlib --product snapthumb
swift build -c release --static-swift-stdlib --product SnapThumbFaces   # face detection, opened on first use
bin="$(swift build -c release --static-swift-stdlib --show-bin-path)/snapthumb"
store="${STORE:-.build/samples-store}"   # not ./store, which the README's examples build
report="$store.report.json"

status=0
"$bin" backfill Samples --store "$store" --report "$report" "$@" || status=$?
if [ "$status" -eq 1 ]; then
  # Exit 1 means some file failed: fine if, and only if, every failure is in Samples/bad/.
  python3 - "$report" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
unexpected = [f for f in report["failures"] if not f["key"].startswith("bad/")]
for f in unexpected:
    print(f"UNEXPECTED: {f['key']}: {f['code']}: {f['message']}", file=sys.stderr)
print(f"run-samples: {report['failed']} refusals, all in Samples/bad/ as intended" if not unexpected else "run-samples: unexpected failures", file=sys.stderr)
sys.exit(1 if unexpected else 0)
PY
elif [ "$status" -ne 0 ]; then
  exit "$status"
fi
"$bin" verify "$store"
echo "manifests: $store/manifests/   (e.g. $store/manifests/snaps/phone-portrait.jpg.json)"
