"""Worlds stepped on MuJoCo's C backend with our PD and clamps between the steps, all in native code.

One Warp CPU kernel thread holds one world. It runs every physics step of the world: the PD effort and its clamps
(the same formulas as models/articulated.py's `_pd_kernel`, consumer-semantics §A.3, §A.4, §C.2), the effort
written as `qfrc_applied`, then MuJoCo's own `mj_step` on that world's MjModel and MjData, called through its
address in libmujoco. Rigid-body dynamics stay MuJoCo's. Python only launches. Warp's CPU launch releases the
GIL, so one launch per core, each over its share of the worlds, uses every core. Values are float64, as
MuJoCo's data are.
"""

from __future__ import annotations

import ctypes
import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import warp as wp

# parameter rows per world, in this order: the PD, the clamps, the frictionloss at either end of the stroke
ROWS = ("kp", "kd", "limit", "bias", "saturation", "velocity_limit", "motor", "friction", "friction_upper")

# ADDRESSES: what the kernel's `addresses` points to, one uint64 each; SIZES: its `sizes`, one int64 each
ADDRESSES = (
    "mj_step", "worlds", "dofs", "coords", "params", "stroke", "target_q", "target_qd", "target_ff", "out_q",
    "out_qd", "clipped", "scratch",
)  # fmt: skip
SIZES = ("nw", "nj", "steps", "decimation", "along")

_SNIPPET = r"""
const unsigned long long* a = (const unsigned long long*)addresses;
const long long* n = (const long long*)sizes;
const int nw = (int)n[0], nj = (int)n[1], steps = (int)n[2], decimation = (int)n[3], along = (int)n[4];
const int w = first + tid;  // this thread's world
typedef void (*step_fn)(const void*, void*);
const step_fn mj_step = (step_fn)a[0];
const unsigned long long* p = (const unsigned long long*)a[1] + 6 * w;  // model, data, qpos, qvel, qfrc, floss
const void* m = (const void*)p[0];
void* d = (void*)p[1];
const double* qpos = (const double*)p[2];
const double* qvel = (const double*)p[3];
double* qfrc = (double*)p[4];
double* floss = (double*)p[5];
const int* dof = (const int*)a[2];
const int* crd = (const int*)a[3];
const double* par = (const double*)a[4] + (long long)w * 9 * nj;
const double* lo_span = (const double*)a[5];
const double* tq = (const double*)a[6];
const double* tqd = (const double*)a[7];
const double* tff = (const double*)a[8];
double* oq = (double*)a[9];
double* oqd = (double*)a[10];
double* cut = (double*)a[11] + (long long)w * nj;
double* qn = (double*)a[12] + (long long)w * 2 * nj;
double* vn = qn + nj;
for (int k = 0; k < nj; ++k) {
  qn[k] = qpos[crd[k]];
  vn[k] = qvel[dof[k]];
  oq[(long long)w * nj + k] = qn[k] + par[3 * nj + k];
  oqd[(long long)w * nj + k] = vn[k];
}
for (int s = 0; s < steps; ++s) {
  const long long at = ((long long)s * nw + w) * nj;
  for (int k = 0; k < nj; ++k) {
    const double kp = par[k], kd = par[nj + k], limit = par[2 * nj + k], bias = par[3 * nj + k];
    const double sat = par[4 * nj + k], vlim = par[5 * nj + k], motor = par[6 * nj + k];
    // explicit PD on the measured angle q + bias (§A.3)
    const double tau = tff[at + k] + kp * (tq[at + k] - (qn[k] + bias)) + kd * (tqd[at + k] - vn[k]);
    double f = tau < -motor ? -motor : (tau > motor ? motor : tau);
    if (sat < 1.0e30) {  // DC motor four-quadrant clip (§A.4, §C.2)
      const double corner = vlim * (1.0 + motor / sat);
      const double v = vn[k] < -corner ? -corner : (vn[k] > corner ? corner : vn[k]);
      double hi = sat * (1.0 - v / vlim), lo = sat * (-1.0 - v / vlim);
      hi = hi < motor ? hi : motor;
      lo = lo > -motor ? lo : -motor;
      f = tau > lo ? tau : lo;
      f = f < hi ? f : hi;
    }
    if (f != tau) cut[k] += 1.0;
    f = f < -limit ? -limit : (f > limit ? limit : f);  // the joint's effort limit (ClampingMaxEffort)
    qfrc[dof[k]] = f;
    if (along) {  // frictionloss linear along the stroke, at the true angle
      double x = (qn[k] - lo_span[k]) / lo_span[nj + k];
      x = x < 0.0 ? 0.0 : (x > 1.0 ? 1.0 : x);
      floss[dof[k]] = par[7 * nj + k] + (par[8 * nj + k] - par[7 * nj + k]) * x;
    }
  }
  mj_step(m, d);
  for (int k = 0; k < nj; ++k) {
    qn[k] = qpos[crd[k]];
    vn[k] = qvel[dof[k]];
  }
  if ((s + 1) % decimation == 0) {
    const long long r = ((long long)((s + 1) / decimation) * nw + w) * nj;
    for (int k = 0; k < nj; ++k) {
      oq[r + k] = qn[k] + par[3 * nj + k];
      oqd[r + k] = vn[k];
    }
  }
}
"""


@wp.func_native(_SNIPPET)
def _world(addresses: wp.uint64, sizes: wp.uint64, first: int, tid: int): ...


@wp.kernel
def _worlds_kernel(addresses: wp.uint64, sizes: wp.uint64, first: int):
    _world(addresses, sizes, first, wp.tid())  # this thread steps world first + tid through the whole run


@functools.cache
def _mj_step_address() -> int:
    """mj_step's address in the libmujoco the mujoco package loaded (the same library, so the same structs)."""
    import mujoco

    lib = sorted(Path(mujoco.__file__).parent.glob("libmujoco.so*"))
    if not lib:
        raise RuntimeError(f"no libmujoco.so beside {mujoco.__file__}")
    address = ctypes.cast(ctypes.CDLL(str(lib[0])).mj_step, ctypes.c_void_p).value
    assert address is not None
    return address


@dataclass
class SteppedWorlds:
    """A run's record: measured angles (q + bias) and velocities per log sample, (samples + 1, W, J), row 0 the
    start; and per (world, joint) the count of physics steps at which a motor clamp cut the PD effort."""

    q: np.ndarray
    qd: np.ndarray
    cut_steps: np.ndarray


def step_worlds(
    pairs: list[tuple[object, object]],
    dofs: np.ndarray,
    coords: np.ndarray,
    params: np.ndarray,
    stroke: np.ndarray | None,
    targets: tuple[np.ndarray, np.ndarray, np.ndarray],
    decimation: int,
    threads: int,
) -> SteppedWorlds:
    """Step each (MjModel, MjData) pair from the state its data holds under per-physics-step targets
    (target_q, target_qd, feed-forward effort), each (P, W, J).

    `dofs` / `coords` (J,) are our joints' MuJoCo DoF and qpos indices; `params` (W, 9, J) holds the ROWS;
    `stroke` (2, J) the lower limit and the span where the friction changes along it (each such world then needs
    its own MjModel, which this writes), None where it does not. `threads` launches share the worlds.
    """
    w, j = params.shape[0], params.shape[2]
    tq, tqd, tff = (np.ascontiguousarray(x, np.float64) for x in targets)
    steps = tq.shape[0]
    if tq.shape != (steps, w, j) or tqd.shape != tq.shape or tff.shape != tq.shape or len(pairs) != w:
        raise ValueError(
            f"targets {tq.shape}, {tqd.shape}, {tff.shape} for {len(pairs)} worlds of {j} joints"
        )
    arrays = []  # held until the launches return: the kernel reads them by address
    table = np.zeros((w, 6), np.uint64)
    for i, (m, d) in enumerate(pairs):
        views = (d.qpos, d.qvel, d.qfrc_applied, m.dof_frictionloss)  # type: ignore[attr-defined]
        arrays.append(views)
        table[i] = [m._address, d._address, *(v.ctypes.data for v in views)]  # type: ignore[attr-defined]
    out_q, out_qd = np.zeros((steps // decimation + 1, w, j)), np.zeros((steps // decimation + 1, w, j))
    cut, scratch = np.zeros((w, j)), np.zeros((w, 2, j))
    own: list[np.ndarray] = [
        table,
        np.ascontiguousarray(dofs, np.int32),
        np.ascontiguousarray(coords, np.int32),
        np.ascontiguousarray(params, np.float64),
        np.zeros((2, j)) if stroke is None else np.ascontiguousarray(stroke, np.float64),
        tq,
        tqd,
        tff,
        out_q,
        out_qd,
        cut,
        scratch,
    ]
    addresses = np.array([_mj_step_address(), *(x.ctypes.data for x in own)], np.uint64)
    sizes = np.array([w, j, steps, decimation, stroke is not None], np.int64)
    assert addresses.size == len(ADDRESSES) and sizes.size == len(SIZES)

    def launch(a: int, b: int) -> None:
        wp.launch(_worlds_kernel, b - a, [addresses.ctypes.data, sizes.ctypes.data, a], device="cpu")

    cuts = np.linspace(0, w, max(1, min(threads, w)) + 1).round().astype(int)
    if cuts.size > 2:
        with ThreadPoolExecutor(cuts.size - 1) as pool:
            list(pool.map(launch, cuts[:-1], cuts[1:]))
    else:
        launch(0, w)
    del arrays
    return SteppedWorlds(out_q, out_qd, cut)
