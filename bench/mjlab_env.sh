#!/usr/bin/env bash
# Make bench/.venv-mjlab, mjlab's own environment for bench/mjlab_replay.py: mjlab is never a dependency of our package.
# mjlab 1.6 pins mujoco and mujoco-warp ~= 3.11; torch is the CPU build. Its training stack (wandb, rsl-rl, viser,
# tensorboard) is left out: the replay needs only the actuator, entity and simulation modules.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-mjlab"
py="${PYTHON:-python3.11}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import mjlab.actuator, mjlab.entity, mjlab.sim, mujoco" 2>/dev/null; then
  exit 0
fi
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
echo "*" > "$venv/.gitignore"
cpu_torch="$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)"
"$venv/bin/python" -m pip install -q "${cpu_torch:-torch==2.13.0}"
"$venv/bin/python" -m pip install -q --no-deps mjlab==1.6.0
"$venv/bin/python" -m pip install -q "mujoco~=3.11.0" "mujoco-warp~=3.11.0" "warp-lang>=1.14.0" numpy scipy trimesh \
  tyro prettytable tqdm typing_extensions packaging pyyaml tensordict imageio-ffmpeg mediapy
"$venv/bin/python" -c "import mjlab.actuator, mjlab.entity, mjlab.sim"
