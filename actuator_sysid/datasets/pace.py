"""PACE logs (docs/log-formats.md §3): ``torch.save`` of a dict with ``time`` [T], ``dof_pos`` [T, J], ``des_dof_pos``.

Loaded with ``torch.load(weights_only=True)`` (never arbitrary pickles). The file has no joint names: the
user gives them in the articulation's order. Positions only: velocity is differentiated, there is no effort.
"""

from __future__ import annotations

import io

import numpy as np

from .assemble import TABLE_CHANNELS, RawSegment, assemble, check_increasing, finite
from .recording import DatasetError, Recording
from .registry import register_reader
from .sources import ReadOptions, Source, is_zip, need_names, zip_names
from .walk_these_ways import TORCH_LEGACY

KEYS = ("time", "dof_pos", "des_dof_pos")


def _array(obj: object, filename: str, key: str) -> np.ndarray:
    """A tensor, array or list as float64, with a clear error for anything else."""
    try:
        if hasattr(obj, "detach"):
            obj = obj.detach().cpu().double().numpy()  # type: ignore[union-attr]
        arr = np.asarray(obj, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise DatasetError(f"{filename}: {key!r} is not numeric ({type(obj).__name__}: {e})") from None
    return arr


def read_pace(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Read a PACE .pt file into a Recording with one segment (split at time gaps)."""
    import pickle

    import torch

    fn = src.name
    try:
        obj = torch.load(io.BytesIO(src.read_bytes()), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, AttributeError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DatasetError(
            f"{fn}: cannot load as a PACE log with torch.load(weights_only=True): {first}; "
            "save a dict of tensors with torch.save"
        ) from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{fn}: a PACE log is a dict with keys {list(KEYS)}, got {type(obj).__name__}")
    missing = [k for k in KEYS if k not in obj]
    if missing:
        raise DatasetError(
            f"{fn}: missing key(s) {missing}; a PACE log has {list(KEYS)} (found: {sorted(map(str, obj))})"
        )
    t = _array(obj["time"], fn, "time")
    if t.ndim == 2 and 1 in t.shape:
        t = t.reshape(-1)
    if t.ndim != 1:
        raise DatasetError(f"{fn}: 'time' must have shape [T], got {list(t.shape)}")
    pos = _array(obj["dof_pos"], fn, "dof_pos")
    des = _array(obj["des_dof_pos"], fn, "des_dof_pos")
    for key, a in (("dof_pos", pos), ("des_dof_pos", des)):
        if a.ndim == 1:
            a.shape = (a.size, 1)
        if a.ndim != 2 or a.shape[0] != t.size:
            raise DatasetError(
                f"{fn}: {key!r} must have shape [T, J] with T = {t.size} (the length of 'time'), "
                f"got {list(a.shape)}"
            )
    pos, des = pos.reshape(t.size, -1), des.reshape(t.size, -1)
    if pos.shape != des.shape:
        raise DatasetError(
            f"{fn}: 'dof_pos' has shape {list(pos.shape)} but 'des_dof_pos' {list(des.shape)}; "
            "they must match"
        )
    for key, a in (("time", t), ("dof_pos", pos), ("des_dof_pos", des)):
        finite(a, fn, key, unit="index", base=0)
    names = need_names(opts, pos.shape[1], fn, "the PACE log")
    rows = np.arange(t.size)
    check_increasing(t, rows, f"{fn}, time", unit="index")
    present = {ch: [ch in ("q", "q_des")] * len(names) for ch in TABLE_CHANNELS}
    raw = RawSegment("", t, rows, {"q": pos, "q_des": des}, present, split_by_gap=True, unit="index")
    rec = assemble(names, [raw], side, fn, [], drop_short=True)
    rec.source_format = "pace"
    return rec


def looks_like_pace(src: Source, head: bytes) -> bool:
    """torch.save's zip format (a data.pkl inside) or its legacy pickle format."""
    return head.startswith(TORCH_LEGACY) or (
        is_zip(head) and any(n.endswith("data.pkl") for n in zip_names(src))
    )


register_reader(
    "pace",
    read_pace,
    sniff=looks_like_pace,
    binary=True,
    rank=40,
    label="PACE .pt",
    accepts=("actuator-net-pickle",),
)
