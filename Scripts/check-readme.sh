#!/usr/bin/env bash
# Runs every ```sh block of README.md against a built snapthumb, so that the README cannot go stale.
#
#   Scripts/check-readme.sh [BIN_DIR]     # BIN_DIR holds snapthumb (default: .build/debug)
#
# The blocks run in order, as a reader follows them, each in a fresh bash (set -euo pipefail), all
# in one temporary directory that has the repository's Samples/, Scripts/ and dist/ linked in,
# with BIN_DIR first on PATH. A block whose preceding line is `<!-- not run: <reason> -->` is
# skipped and the reason printed; the reason must name what runs it instead (a test, CI) or why it
# cannot run here (root, systemd). Every ```json block that is a config file (only the sections
# pipeline, store, watch, backfill, log) must pass `snapthumb config --config`. At the end the
# store the examples built must verify, with one key per upload (no source under two keys).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "${1:-$repo/.build/debug}" && pwd)"
[ -x "$bin/snapthumb" ] || { echo "check-readme: no snapthumb in $bin (swift build first)" >&2; exit 1; }
work="$(mktemp -d /tmp/snapthumb-readme-XXXXXX)"
trap 'rm -rf "$work"' EXIT

# Split the README into blocks: block-N.sh, and block-N.skip holding the reason when marked.
python3 - "$repo/README.md" "$work" <<'PY'
import sys, re, json
readme, out = sys.argv[1], sys.argv[2]
lines = open(readme, encoding="utf-8").read().split("\n")
n, i, previous = 0, 0, ""
while i < len(lines):
    line = lines[i]
    if line.strip() == "```sh":
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i]); i += 1
        n += 1
        open(f"{out}/block-{n:02d}.sh", "w").write("\n".join(body) + "\n")
        m = re.match(r"\s*<!-- not run: (.+?) -->\s*$", previous)
        if m:
            open(f"{out}/block-{n:02d}.skip", "w").write(m.group(1))
    elif line.strip() == "```json":
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i]); i += 1
        try:
            document = json.loads("\n".join(body))
        except ValueError:
            document = None  # an abridged example (…), not a file
        if isinstance(document, dict) and document and set(document) <= {"pipeline", "store", "watch", "backfill", "log"}:
            n += 1
            open(f"{out}/block-{n:02d}.json", "w").write("\n".join(body) + "\n")
            open(f"{out}/block-{n:02d}.sh", "w").write(f"snapthumb config --config {out}/block-{n:02d}.json >/dev/null\n")
    if line.strip():
        previous = line
    i += 1

PY

failed=0
dir="$work/reader"
mkdir -p "$dir"
ln -s "$repo/Samples" "$dir/Samples"
ln -s "$repo/Scripts" "$dir/Scripts"
ln -s "$repo/dist" "$dir/dist"
for block in "$work"/block-*.sh; do
  name="$(basename "$block" .sh)"
  if [ -e "$work/$name.skip" ]; then
    echo "check-readme: $name skipped: $(cat "$work/$name.skip")"
    continue
  fi
  if (cd "$dir" && PATH="$bin:$PATH" HOME="$dir" bash -euo pipefail "$block") > "$work/$name.log" 2>&1; then
    echo "check-readme: $name ok"
  else
    echo "check-readme: $name FAILED:" >&2
    sed 's/^/    /' "$block" >&2
    echo "  output:" >&2
    tail -20 "$work/$name.log" | sed 's/^/    /' >&2
    failed=1
  fi
done

# Following the README in order leaves a store that verifies, each upload under one key.
if [ -d "$dir/store" ]; then
  if ! "$bin/snapthumb" verify "$dir/store" > "$work/verify.log" 2>&1; then
    echo "check-readme: the examples' store does not verify:" >&2; sed 's/^/    /' "$work/verify.log" >&2; failed=1
  fi
  if ! python3 - "$dir/store/manifests" <<'PY'
import json, os, sys
keys = {}
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        if name.endswith(".json") and not name.startswith("."):
            manifest = json.load(open(os.path.join(root, name)))
            keys.setdefault(manifest["source"]["digest"], []).append(manifest["key"])
twice = {digest: sorted(k) for digest, k in keys.items() if len(k) > 1}
for digest, k in twice.items():
    print(f"check-readme: one upload under several keys: {', '.join(k)} ({digest})", file=sys.stderr)
sys.exit(1 if twice else 0)
PY
  then failed=1; fi
  echo "check-readme: the examples' store verifies, one key per upload"
fi
exit $failed
