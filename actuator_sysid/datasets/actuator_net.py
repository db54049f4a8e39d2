"""Actuator-net training logs (log-formats §5): rl_sar / walk-these-ways CSV at the policy rate.

Columns per joint i: ``joint_pos_i``, ``joint_pos_target_i``, ``joint_vel_i``, ``tau_est_i`` and optional
``tau_cal_i``. ``tau_est`` (the drive's own estimate) is the measured effort; ``tau_cal`` (the controller's
computed torque) is not used. rl_sar writes no time column and a trailing comma: time is the row number over
the policy rate (50 Hz unless ``rate_hz`` says otherwise), or a ``t``/``time``/``timestamp`` column when
there is one. Joints are named ``joint_<i>`` unless the user gives names.
"""

from __future__ import annotations

import re

import numpy as np

from .canonical import _numeric, _read_csv
from .common import TABLE_CHANNELS, RawSegment, assemble, check_increasing
from .recording import DatasetError, Recording
from .sources import ReadOptions, Source

DEFAULT_RATE_HZ = 50.0
COLUMN = re.compile(r"^(tau_est|tau_cal|joint_pos_target|joint_pos|joint_vel)_(\d+)$")
CHANNEL = {"joint_pos": "q", "joint_pos_target": "q_des", "joint_vel": "qd", "tau_est": "tau"}
TIME_COLUMNS = ("t", "time", "timestamp")


def looks_like_actuator_net(header: str) -> bool:
    return bool(re.search(r"(^|,)\s*(tau_est|joint_pos_target)_\d+\s*(,|$)", header))


def read_actuator_net(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Read an actuator-net CSV into a Recording (one segment, split at time gaps when there is a time column)."""
    fn = src.name
    frame = _read_csv(src.read_bytes(), fn)
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
        raise DatasetError(f"{fn}: no joint_pos_<i> columns; an actuator-net log has joint_pos_i, "
                           "joint_pos_target_i, joint_vel_i and tau_est_i per joint i")
    idx = sorted(cols["joint_pos"])
    if idx != list(range(len(idx))):
        raise DatasetError(f"{fn}: joint_pos columns are numbered {idx}; expected 0..{len(idx) - 1}")
    for kind in ("joint_pos_target", "joint_vel", "tau_est", "tau_cal"):
        have = sorted(cols.get(kind, {}))
        if kind == "joint_pos_target" and not have:
            raise DatasetError(f"{fn}: no joint_pos_target_<i> columns (the position targets); they are required")
        if have and have != idx:
            missing = sorted(set(idx) - set(have))
            raise DatasetError(f"{fn}: {kind} columns are numbered {have} but joint_pos columns {idx}"
                               + (f"; add {', '.join(f'{kind}_{i}' for i in missing)}" if missing else ""))
    J = len(idx)
    if opts.joint_names is not None and len(opts.joint_names) != J:
        raise DatasetError(f"{fn}: the log has {J} joints but {len(opts.joint_names)} joint name(s) were given "
                           f"({', '.join(opts.joint_names)}); give exactly {J}")
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
        t = _numeric(frame[tcol], fn, tcol)
        check_increasing(t, rows, fn)
    else:
        rate = opts.rate_hz or DEFAULT_RATE_HZ
        t = np.arange(n, dtype=np.float64) / rate
        warnings.append(f"{fn}: no time column; rows are taken as {rate:g} Hz samples"
                        + ("" if opts.rate_hz else " (the policy rate; set rate_hz if yours differs)"))
    data = {}
    for kind, ch in CHANNEL.items():
        if kind in cols:
            data[ch] = np.stack([_numeric(frame[cols[kind][i]], fn, cols[kind][i]) for i in idx], axis=1)
    present = {ch: [ch in data] * J for ch in TABLE_CHANNELS}
    raw = RawSegment("", t, rows, data, present, split_by_gap=True)
    rec = assemble(names, [raw], {**side, "velocity_source": side.get("velocity_source", "measured (joint_vel)")},
                   fn, warnings, drop_short=True)
    rec.source_format = "actuator-net"
    return rec
