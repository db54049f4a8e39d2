#!/usr/bin/env bash
# Make bench/.venv-bam, BAM's own environment for bench/real_bam.py: BAM is never a dependency of our package.
# BAM 1.0.2 declares Python 3.12 but runs on 3.11; its own deps are installed by name, not resolved from it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-bam"
py="${PYTHON:-python3.11}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import bam.simulate, bam.logs, optuna" 2>/dev/null; then
  exit 0
fi
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q --no-deps --ignore-requires-python better-actuator-models==1.0.2
"$venv/bin/python" -m pip install -q optuna cmaes colorama wandb matplotlib numpy
