#!/usr/bin/env bash
# Runs every ```sh block of README.md against a built snapthumb, so that the README cannot go stale.
#
#   Scripts/check-readme.sh [BIN_DIR]     # BIN_DIR holds snapthumb (default: .build/debug)
#
# Each block runs in a fresh bash (set -euo pipefail) in a temporary directory that has the
# repository's Samples/, Scripts/ and dist/ linked in, with BIN_DIR first on PATH. A block
# whose preceding line is `<!-- not run: <reason> -->` is skipped and the reason printed; the
# reason must name what runs it instead (a test, CI) or why it cannot run here (root, systemd).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "${1:-$repo/.build/debug}" && pwd)"
[ -x "$bin/snapthumb" ] || { echo "check-readme: no snapthumb in $bin (swift build first)" >&2; exit 1; }
work="$(mktemp -d /tmp/snapthumb-readme-XXXXXX)"
trap 'rm -rf "$work"' EXIT

# Split the README into blocks: block-N.sh, and block-N.skip holding the reason when marked.
python3 - "$repo/README.md" "$work" <<'PY'
import sys, re
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
    if line.strip():
        previous = line
    i += 1

PY

failed=0
for block in "$work"/block-*.sh; do
  name="$(basename "$block" .sh)"
  if [ -e "$work/$name.skip" ]; then
    echo "check-readme: $name skipped: $(cat "$work/$name.skip")"
    continue
  fi
  dir="$work/$name.d"
  mkdir -p "$dir"
  ln -s "$repo/Samples" "$dir/Samples"
  ln -s "$repo/Scripts" "$dir/Scripts"
  ln -s "$repo/dist" "$dir/dist"
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
exit $failed
