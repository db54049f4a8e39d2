"""Actuator-net training logs (docs/log-formats.md §5): rl_sar / walk-these-ways CSV at the policy rate, and the
walk-these-ways deployment log pickle (``log.pkl``: agent name → [cfg, list of per-step dicts]).

Columns per joint i: ``joint_pos_i``, ``joint_pos_target_i``, ``joint_vel_i``, ``tau_est_i`` and optional
``tau_cal_i``. ``tau_est`` (the drive's own estimate) is the measured effort; ``tau_cal`` (the controller's
computed torque) is not used. rl_sar writes no time column and a trailing comma: time is the row number over
the policy rate (50 Hz unless ``rate_hz`` says otherwise), or a ``t``/``time``/``timestamp`` column when
there is one. Joints are named ``joint_<i>`` unless the user gives names.
"""

from __future__ import annotations

import math
import re

import numpy as np

from .assemble import TABLE_CHANNELS, RawSegment, assemble, check_increasing, finite
from .canonical import _numeric, _read_csv
from .recording import DatasetError, Recording
from .registry import register_reader
from .sources import ReadOptions, Source, head_text
from .tablestream import LineMap

DEFAULT_RATE_HZ = 50.0
COLUMN = re.compile(r"^(tau_est|tau_cal|joint_pos_target|joint_pos|joint_vel)_(\d+)$")
CHANNEL = {"joint_pos": "q", "joint_pos_target": "q_des", "joint_vel": "qd", "tau_est": "tau"}
TIME_COLUMNS = ("t", "time", "timestamp")


def looks_like_actuator_net(header: str) -> bool:
    return bool(re.search(r"(^|,)\s*(tau_est|joint_pos_target)_\d+\s*(,|$)", header))


def read_actuator_net(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Read an actuator-net CSV into a Recording (one segment, split at time gaps when there is a time column)."""
    fn = src.name
    body = src.read_bytes()
    frame = _read_csv(body, fn)
    lines = LineMap(body)  # messages name the file's own lines
    frame.columns = [str(c).strip() for c in frame.columns]
    cols: dict[str, dict[int, str]] = {}
    ignored = []
    for c in frame.columns:
        m = COLUMN.match(c)
        if m:
            cols.setdefault(m.group(1), {})[int(m.group(2))] = c
        elif c and not c.startswith("Unnamed:") and c not in TIME_COLUMNS:
            ignored.append(c)
    if "joint_pos" not in cols:
        raise DatasetError(
            f"{fn}: no joint_pos_<i> columns; an actuator-net log has joint_pos_i, "
            "joint_pos_target_i, joint_vel_i and tau_est_i per joint i"
        )
    idx = sorted(cols["joint_pos"])
    if idx != list(range(len(idx))):
        raise DatasetError(f"{fn}: joint_pos columns are numbered {idx}; expected 0..{len(idx) - 1}")
    for kind in ("joint_pos_target", "joint_vel", "tau_est", "tau_cal"):
        have = sorted(cols.get(kind, {}))
        if kind == "joint_pos_target" and not have:
            raise DatasetError(
                f"{fn}: no joint_pos_target_<i> columns (the position targets); they are required"
            )
        if have and have != idx:
            missing = sorted(set(idx) - set(have))
            raise DatasetError(
                f"{fn}: {kind} columns are numbered {have} but joint_pos columns {idx}"
                + (f"; add {', '.join(f'{kind}_{i}' for i in missing)}" if missing else "")
            )
    J = len(idx)
    if opts.joint_names is not None and len(opts.joint_names) != J:
        raise DatasetError(
            f"{fn}: the log has {J} joints but {len(opts.joint_names)} joint name(s) were given "
            f"({', '.join(opts.joint_names)}); give exactly {J}"
        )
    names = list(opts.joint_names) if opts.joint_names else [f"joint_{i}" for i in idx]
    warnings: list[str] = []
    if ignored:
        warnings.append(f"columns {ignored} are not actuator-net columns and were ignored")
    n = len(frame)
    if n == 0:
        raise DatasetError(f"{fn}: the table has a header but no data rows")
    rows = np.arange(1, n + 1)
    tcol = next((c for c in TIME_COLUMNS if c in frame.columns), None)
    if tcol is not None:
        t = _numeric(frame[tcol], fn, tcol, lines=lines)
        check_increasing(t, rows, fn, "line", lines)
    else:
        rate = opts.rate_hz or DEFAULT_RATE_HZ
        t = np.arange(n, dtype=np.float64) / rate
        warnings.append(
            f"{fn}: no time column; rows are taken as {rate:g} Hz samples"
            + ("" if opts.rate_hz else " (the policy rate; set rate_hz if yours differs)")
        )
    data = {}
    for kind, ch in CHANNEL.items():
        if kind in cols:
            data[ch] = np.stack(
                [_numeric(frame[cols[kind][i]], fn, cols[kind][i], lines=lines) for i in idx], axis=1
            )
    present = {ch: [ch in data] * J for ch in TABLE_CHANNELS}
    raw = RawSegment("", t, rows, data, present, split_by_gap=True, unit="line", lines=lines)
    rec = assemble(
        names,
        [raw],
        {**side, "velocity_source": side.get("velocity_source", "measured (joint_vel)")},
        fn,
        warnings,
        drop_short=True,
    )
    rec.source_format = "actuator-net"
    return rec


# --------------------------------------------------------------------------------------------- walk-these-ways pickle

WTW_AGENT = "hardware_closed_loop"
WTW_FIELDS = {"joint_pos": "q", "joint_pos_target": "q_des", "joint_vel": "qd", "tau_est": "tau"}
"""Per-step keys of a walk-these-ways deployment log and the channel each becomes (tau_est is the label)."""
TORCH_LEGACY = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
"""The start of a legacy (non-zip) torch.save file: protocol 2 and torch's magic number."""
_NUMPY_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("collections", "OrderedDict"),
}


class _Opaque:
    """Stands in for any pickled object other than numpy arrays and plain containers: built, never run."""

    def __init__(self, module: str, name: str) -> None:
        self.what = f"{module}.{name}"

    def __call__(self, *args: object, **kwargs: object) -> _Opaque:
        return self

    def __setstate__(self, state: object) -> None:
        pass

    def __repr__(self) -> str:
        return f"<{self.what} object>"


def _safe_unpickle(data: bytes, fn: str) -> object:
    """Unpickle numpy arrays, scalars and plain containers only; any other class becomes an inert _Opaque."""
    import io
    import pickle

    import numpy

    class Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str):  # type: ignore[override]
            if (module, name) in _NUMPY_GLOBALS:
                mod = numpy if module == "numpy" else __import__(module, fromlist=[name])
                return getattr(mod, name)
            return _Opaque(module, name)

        def persistent_load(self, pid: object) -> object:
            return _Opaque("persistent", str(pid)[:40])

    try:
        return Restricted(io.BytesIO(data)).load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        ImportError,
        MemoryError,
    ) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatasetError(
            f"{fn}: cannot read as a walk-these-ways log pickle: {first}; it should be the "
            "log.pkl a deployment runner saves (a dict of agent name → [cfg, list of per-step "
            "dicts])"
        ) from None


def looks_like_wtw_pickle(head: bytes) -> bool:
    """A pickle (any protocol ≥ 2) that is not a legacy torch.save file."""
    return head[:1] == b"\x80" and not head.startswith(TORCH_LEGACY)


def _wtw_steps(obj: object, fn: str) -> tuple[str, dict, list]:
    """(agent name, cfg, per-step dicts) of a walk-these-ways log dict, with errors naming what is wrong."""
    if not isinstance(obj, dict) or not obj:
        raise DatasetError(
            f"{fn}: a walk-these-ways log is a dict of agent name → [cfg, steps], got "
            f"{type(obj).__name__ if not isinstance(obj, dict) else 'an empty dict'}"
        )
    if WTW_AGENT in obj:
        agent = WTW_AGENT
    elif len(obj) == 1:
        agent = str(next(iter(obj)))
    else:
        raise DatasetError(
            f"{fn}: no {WTW_AGENT!r} agent and several others {sorted(map(str, obj))}; keep one agent's log"
        )
    entry = obj[agent]
    if not isinstance(entry, list | tuple) or len(entry) != 2 or not isinstance(entry[1], list | tuple):
        raise DatasetError(
            f"{fn}: agent {agent!r} must hold [cfg, list of per-step dicts], got "
            f"{type(entry).__name__}"
            + (f" of length {len(entry)}" if isinstance(entry, list | tuple) else "")
        )
    cfg = entry[0] if isinstance(entry[0], dict) else {}
    return agent, cfg, list(entry[1])


def _wtw_dt(cfg: dict, opts: ReadOptions) -> tuple[float, str]:
    """The policy period: the user's rate, else cfg control.decimation × sim.dt, else 50 Hz."""
    if opts.rate_hz:
        return 1.0 / opts.rate_hz, f"{opts.rate_hz:g} Hz (given)"
    try:
        dt = float(cfg["control"]["decimation"]) * float(cfg["sim"]["dt"])
        if math.isfinite(dt) and dt > 0:
            return dt, f"{1 / dt:g} Hz (cfg control.decimation × sim.dt)"
    except (KeyError, TypeError, ValueError):
        pass
    return 1.0 / DEFAULT_RATE_HZ, f"{DEFAULT_RATE_HZ:g} Hz (the policy rate; set rate_hz if yours differs)"


def read_wtw_pickle(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Read a walk-these-ways deployment log (log.pkl) into a Recording.

    Each step dict holds ``joint_pos``, ``joint_pos_target``, ``joint_vel`` and ``tau_est`` as (1, J) or (J,)
    arrays; time is the step's ``time`` when every step has one, else the step index over the policy rate.
    Only numpy arrays and plain containers are unpickled: any other object stays an inert placeholder.
    """
    fn = src.name
    agent, cfg, steps = _wtw_steps(_safe_unpickle(src.read_bytes(), fn), fn)
    if not steps:
        raise DatasetError(f"{fn}: agent {agent!r} has no steps (an empty log); record for longer")
    first = steps[0]
    if not isinstance(first, dict):
        raise DatasetError(f"{fn}: {agent} step 0 is a {type(first).__name__}, not a dict of arrays")
    missing = [k for k in ("joint_pos", "joint_pos_target") if k not in first]
    if missing:
        raise DatasetError(
            f"{fn}: {agent} step 0 has no {', '.join(missing)}; a walk-these-ways log step has "
            f"{', '.join(WTW_FIELDS)} (found: {sorted(map(str, first))})"
        )
    keys = [k for k in WTW_FIELDS if k in first]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    times: list[float] = []
    J = None
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise DatasetError(f"{fn}: {agent} step {i} is a {type(step).__name__}, not a dict of arrays")
        for k in keys:
            if k not in step:
                raise DatasetError(f"{fn}: {agent} step {i} has no {k!r} (step 0 has it)")
            v = step[k]
            if isinstance(v, _Opaque):
                raise DatasetError(
                    f"{fn}: {agent} step {i}, {k}: a {v.what} object, not a numeric array; save "
                    "numpy arrays (the deployment logger converts tensors with .numpy())"
                )
            try:
                a = np.asarray(v, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                raise DatasetError(f"{fn}: {agent} step {i}, {k}: not numeric ({type(v).__name__})") from None
            if J is None:
                J = a.size
            if a.size != J or J == 0:
                raise DatasetError(
                    f"{fn}: {agent} step {i}, {k}: {a.size} values but {J} joints "
                    "(from step 0's joint_pos); every array must have one value per joint"
                )
            cols[k].append(a)
        if "time" in step:
            try:
                times.append(float(np.asarray(step["time"], dtype=np.float64).reshape(-1)[0]))
            except (TypeError, ValueError, IndexError):
                raise DatasetError(f"{fn}: {agent} step {i}, time: not a number ({step['time']!r})") from None
    assert J is not None
    names = list(opts.joint_names) if opts.joint_names else [f"joint_{i}" for i in range(J)]
    if len(names) != J:
        raise DatasetError(
            f"{fn}: the log has {J} joints but {len(names)} joint name(s) were given "
            f"({', '.join(names)}); give exactly {J}"
        )
    warnings: list[str] = []
    rows = np.arange(len(steps))
    if len(times) == len(steps):
        t = np.asarray(times)
        finite(t, fn, "time", unit="step", base=0)
        check_increasing(t, rows, f"{fn}, {agent} time", unit="step")
    else:
        dt, how = _wtw_dt(cfg, opts)
        t = rows * dt
        warnings.append(f"{fn}: steps carry no time; taken as {how}")
    data = {}
    for k in keys:
        arr = np.stack(cols[k])
        finite(arr, fn, k, unit="step", base=0)
        data[WTW_FIELDS[k]] = arr
    present = {ch: [ch in data] * J for ch in TABLE_CHANNELS}
    raw = RawSegment("", t, rows, data, present, split_by_gap=True, unit="step")
    rec = assemble(
        names,
        [raw],
        {**side, "velocity_source": side.get("velocity_source", "measured (joint_vel)")},
        fn,
        warnings,
        drop_short=True,
    )
    rec.source_format = "actuator-net-pickle"
    return rec


register_reader(
    "actuator-net",
    read_actuator_net,
    binary=False,
    rank=70,
    sniff=lambda _src, head: looks_like_actuator_net(head_text(head).split("\n", 1)[0]),
    aliases=("rl_sar", "actuator_net"),
    label="actuator-net CSV",
)
register_reader(
    "actuator-net-pickle",
    read_wtw_pickle,
    sniff=lambda _src, head: looks_like_wtw_pickle(head),
    binary=True,
    rank=80,
    aliases=("walk-these-ways", "wtw", "pkl"),
    label="walk-these-ways log.pkl",
    accepts=("pace",),
)
