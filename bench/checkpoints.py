"""Actuator-network checkpoints: export time per format and Newton 1.8's neural-drive step rate, ONNX vs pt2.

1. Export seconds of torchscript.pt (Isaac Lab), newton.onnx and newton.pt2 (Newton) for the default MLP
   (history [0, 1, 2], 32x32 softsign) and LSTM (16 units, one layer), trained for one epoch.
2. Newton steps of one Actuator holding N neural-drive DOFs (N one-link pendulums, DC-motor clamp, CPU):
   efforts per second with the checkpoint as ONNX (Warp-NN) and as pt2 (Torch, deprecated by Newton 1.8).

Usage: python bench/checkpoints.py [--actuators N] [--steps K] [--threads T]. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from net_logs import nonlinear_recording  # noqa: E402

from actuator_sysid.export.checkpoints import onnx_bytes, pt2_bytes, torchscript_bytes  # noqa: E402
from actuator_sysid.fitting.training import NetOptions, net_fit  # noqa: E402


def _newton_rate(kind: str, path: str, n: int, steps: int) -> float:
    """Efforts per second of one neural Actuator over n DOFs, stepped `steps` times on CPU (after a warm-up)."""
    import newton
    import warp as wp
    from newton.actuators import ClampingDCMotor, DriveNeuralLSTM, DriveNeuralMLP

    wp.config.quiet = True
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    for i in range(n):
        link = builder.add_link(
            com=wp.vec3(float(i), 0.0, -0.2), mass=0.5, inertia=wp.mat33(np.eye(3) * 1e-3)
        )
        j = builder.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Y)
        builder.add_articulation([j])
        builder.add_actuator(
            DriveNeuralMLP if kind == "mlp" else DriveNeuralLSTM,
            index=builder.joint_qd_start[j],
            clamping=[
                (ClampingDCMotor, {"saturation_effort": 3.0, "velocity_limit": 8.0, "max_motor_effort": 2.0})
            ],
            model_path=path,
        )
    model = builder.finalize(device="cpu")
    (act,) = model.actuators
    state, control = model.state(), model.control()
    rng = np.random.default_rng(0)
    state.joint_q.assign(rng.uniform(-1, 1, model.joint_coord_count).astype(np.float32))
    state.joint_qd.assign(rng.uniform(-5, 5, model.joint_dof_count).astype(np.float32))
    control.joint_target_q.assign(rng.uniform(-1, 1, model.joint_dof_count).astype(np.float32))
    a, b = act.state(), act.state()
    for _ in range(3):  # warm-up: kernel compilation, Warp-NN allocation
        act.step(state, control, a, b, dt=0.005)
        a, b = b, a
    wp.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        control.joint_f.zero_()
        act.step(state, control, a, b, dt=0.005)
        a, b = b, a
    wp.synchronize()
    return n * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actuators", type=int, default=1024, help="neural-drive DOFs in the Newton model")
    ap.add_argument("--steps", type=int, default=200, help="timed actuator steps")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out: dict = {
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "torch_threads": args.threads,
            "load_average": os.getloadavg(),
        },
        "actuators": args.actuators,
        "steps": args.steps,
    }
    rec = nonlinear_recording(n_segments=3, seconds=1.0, seed=1)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Newton's deprecation of the pt2 path, measured all the same
        for kind in ("mlp", "lstm"):
            entry = net_fit(rec, "j", kind, [0, 1], [2], NetOptions(epochs=1)).to_json()
            row: dict = {"export_s": {}, "size_bytes": {}, "newton_efforts_per_s": {}}
            for fmt, fn in (
                ("torchscript.pt", torchscript_bytes),
                ("newton.onnx", onnx_bytes),
                ("newton.pt2", pt2_bytes),
            ):
                t0 = time.perf_counter()
                data = fn(entry)
                row["export_s"][fmt] = round(time.perf_counter() - t0, 3)
                row["size_bytes"][fmt] = len(data)
                path = Path(tmp) / f"{kind}.{fmt.split('.')[-1]}"
                path.write_bytes(data)
                if fmt != "torchscript.pt":
                    row["newton_efforts_per_s"][fmt] = round(
                        _newton_rate(kind, str(path), args.actuators, args.steps)
                    )
            out[kind] = row
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
