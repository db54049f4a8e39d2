#!/usr/bin/env bash
# Preview of `ruff format` (issue 13 item 8) without touching the working tree: copies actuator_sysid/, tools/
# and pyproject.toml (ruff's settings: line length 110) to a temp dir, formats the copy and runs
# tools/check_structure.py on the copy, so a function that passes 100 lines only once formatted shows up now.
# Usage: tools/format_preview.sh [check_structure.py args, e.g. --baseline tools/structure_baseline.txt]
#   OVER=90 tools/format_preview.sh   also lists every function of the formatted copy over 90 lines
#   KEEP=1  tools/format_preview.sh   keeps the formatted copy (its path is printed) for inspection
# Exit status: check_structure.py's on the formatted copy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ruff="${RUFF:-$root/.venv/bin/ruff}"
python="${PYTHON:-$root/.venv/bin/python}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/format_preview.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then echo "formatted copy: $tmp" >&2; else trap 'rm -rf "$tmp"' EXIT; fi
rsync -a --delete --exclude '__pycache__' "$root/actuator_sysid/" "$tmp/actuator_sysid/"
rsync -a --delete --exclude '__pycache__' "$root/tools/" "$tmp/tools/"
cp "$root/pyproject.toml" "$tmp/pyproject.toml"
(cd "$tmp" && "$ruff" format --quiet actuator_sysid tools)
cd "$tmp"  # a relative --baseline path is read from the copy (the same file)
if [[ -n "${OVER:-}" ]]; then
  "$python" - "$OVER" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "tools")
import check_structure as cs
limit = int(sys.argv[1])
pkg = Path("actuator_sysid").resolve()
cs.MAX_LINES, cs.ALLOWED = limit, set()
longs = cs.long_functions(cs.package_files(pkg), pkg.parent)
print(f"formatted functions over {limit} lines: {len(longs)}")
for f in longs:
    print(f"  {f.where} ({f.lines} lines)")
PY
fi
# The copy's own check (its ROOT, so its default --package, is the temp dir), pointed at the copy explicitly.
exec "$python" tools/check_structure.py --package "$tmp/actuator_sysid" "$@"
