"""Isaac Lab recorder files (docs/log-formats.md §7): HDF5 in the robomimic layout, ``/data/demo_N/``.

Each demo becomes a segment ``demo_N``. The recorder stores no time stamps, so the environment step rate
(``rate_hz``, e.g. 50 for sim dt 0.005 s with decimation 4) is required. Which datasets hold joint
positions, targets and velocities depends on the task; the user names them (``positions``, ``targets``,
``velocities``: paths inside a demo group) or the first present default is used and named in a warning:

- positions: ``obs/joint_pos``, then ``states/articulation/<the one articulation>/joint_position``
- targets: ``processed_actions`` (absolute targets for JointPositionAction), then ``actions``
- velocities: ``obs/joint_vel``, then ``states/articulation/<...>/joint_velocity`` (else differentiated)

Joint names are not stored: the user gives them in the articulation's order.
"""

from __future__ import annotations

import re

import numpy as np

from .assemble import TABLE_CHANNELS, RawSegment, assemble, finite
from .recording import DatasetError, Recording
from .registry import register_reader
from .sources import ReadOptions, Source, need_names

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
DEFAULTS = {
    "positions": ("obs/joint_pos", "states/articulation/*/joint_position"),
    "targets": ("processed_actions", "actions"),
    "velocities": ("obs/joint_vel", "states/articulation/*/joint_velocity"),
}


def _datasets(group) -> list[str]:
    """Every dataset path under a group (for error messages)."""
    import h5py

    out: list[str] = []
    group.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
    return out


def _resolve(demo, pattern: str) -> str | None:
    """A dataset path in the demo; "*" matches the one articulation (None when absent or ambiguous)."""
    import h5py

    if "*" not in pattern:
        return pattern if isinstance(demo.get(pattern), h5py.Dataset) else None
    head, _, tail = pattern.partition("*")
    parent = demo.get(head.rstrip("/"))
    if not isinstance(parent, h5py.Group):
        return None
    hits = [f"{head}{k}{tail}" for k in parent if isinstance(demo.get(f"{head}{k}{tail}"), h5py.Dataset)]
    return hits[0] if len(hits) == 1 else None


def _pick(demo, role: str, given: str | None, fn: str, dname: str, required: bool) -> str | None:
    if given is not None:
        if _resolve(demo, given) is None:
            raise DatasetError(
                f"{fn}, /data/{dname}: no dataset {given!r} (the {role}); it has {_datasets(demo)}"
            )
        return given
    for cand in DEFAULTS[role]:
        path = _resolve(demo, cand)
        if path is not None:
            return path
    if required:
        raise DatasetError(
            f"{fn}, /data/{dname}: none of the default {role} datasets {list(DEFAULTS[role])} "
            f"exist; name the one to use with --{role} (CLI) or reader.{role} in the metadata "
            f"(it has {_datasets(demo)})"
        )
    return None


def _read(demo, path: str, fn: str, dname: str) -> np.ndarray:
    arr = np.asarray(demo[path][()], dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise DatasetError(f"{fn}, /data/{dname}/{path}: expected shape [T, J], got {list(arr.shape)}")
    finite(arr, f"{fn}, /data/{dname}", path, unit="step", base=0)
    return arr


def read_isaaclab_hdf5(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Read an Isaac Lab / robomimic HDF5 file into a Recording with one segment per demo."""
    import h5py

    fn = src.name
    try:
        f = h5py.File(src.open(), "r")
    except OSError as e:
        raise DatasetError(f"{fn}: cannot open as HDF5 ({e})") from None
    with f:
        data_group = f.get("data")
        if not isinstance(data_group, h5py.Group):
            raise DatasetError(
                f"{fn}: no /data group; an Isaac Lab recorder file has /data/demo_N/ groups "
                f"(top level has {sorted(f)})"
            )
        demos = sorted((k for k in data_group if re.fullmatch(r"demo_\d+", k)), key=lambda k: int(k[5:]))
        if not demos:
            raise DatasetError(f"{fn}: /data has no demo_N groups (found {sorted(data_group)})")
        if opts.rate_hz is None:
            raise DatasetError(
                f"{fn}: the recorder stores no time stamps; give the environment step rate with "
                "--rate HZ (CLI) or reader.rate_hz in the metadata, e.g. 50 for sim dt 0.005 s "
                "with decimation 4"
            )
        chosen: dict[str, str | None] = {}
        raws: list[RawSegment] = []
        names: list[str] | None = None
        for dname in demos:
            demo = data_group[dname]
            pos_path = _pick(demo, "positions", opts.positions, fn, dname, True)
            tgt_path = _pick(demo, "targets", opts.targets, fn, dname, True)
            vel_path = _pick(demo, "velocities", opts.velocities, fn, dname, False)
            assert pos_path is not None and tgt_path is not None
            now = {"positions": pos_path, "targets": tgt_path, "velocities": vel_path}
            if chosen and now != chosen:
                raise DatasetError(
                    f"{fn}, /data/{dname}: datasets {now} differ from the first demo's {chosen}; "
                    "name them with --positions/--targets/--velocities"
                )
            chosen = now
            q = _read(demo, pos_path, fn, dname)
            q_des = _read(demo, tgt_path, fn, dname)
            if names is None:
                names = need_names(opts, q.shape[1], fn, f"/data/{dname}/{pos_path}")
            if q.shape[1] != len(names):
                raise DatasetError(
                    f"{fn}, /data/{dname}/{pos_path}: {q.shape[1]} columns, but {len(names)} joints"
                )
            if q_des.shape[1] != q.shape[1] or q_des.shape[0] != q.shape[0]:
                raise DatasetError(
                    f"{fn}, /data/{dname}: targets {tgt_path!r} have shape {list(q_des.shape)} but "
                    f"positions {pos_path!r} {list(q.shape)}; choose matching datasets with "
                    "--targets / --positions"
                )
            data = {"q": q, "q_des": q_des}
            if vel_path is not None:
                qd = _read(demo, vel_path, fn, dname)
                if qd.shape == q.shape:
                    data["qd"] = qd
            n = q.shape[0]
            present = {ch: [ch in data] * q.shape[1] for ch in TABLE_CHANNELS}
            raws.append(
                RawSegment(
                    dname,
                    np.arange(n) / opts.rate_hz,
                    np.arange(n),
                    data,
                    present,
                    metadata={"success": bool(demo.attrs["success"])} if "success" in demo.attrs else {},
                    unit="step",
                )
            )
    assert names is not None
    common = set.intersection(*(set(r.data) for r in raws))
    for r in raws:
        r.data = {k: v for k, v in r.data.items() if k in common}
        r.present = {ch: [ch in common] * len(names) for ch in TABLE_CHANNELS}
    warnings = [
        f"{fn}: joint positions from {chosen['positions']!r}, targets from {chosen['targets']!r}"
        + (f", velocities from {chosen['velocities']!r}" if "qd" in common else "")
        + f", at {opts.rate_hz:g} Hz"
    ]
    if chosen["positions"] and chosen["positions"].startswith("obs/"):
        warnings.append(
            f"{fn}: {chosen['positions']!r} is a policy observation; Isaac Lab's joint_pos_rel "
            "observations are relative to the default joint positions — use "
            "states/articulation/<robot>/joint_position for absolute angles"
        )
    if chosen["targets"] == "actions":
        warnings.append(
            f"{fn}: 'actions' are the policy's raw actions; if the action term scales or offsets "
            "them (JointPositionActionCfg scale/offset), record processed_actions instead"
        )
    rec = assemble(names, raws, side, fn, warnings, drop_short=True)
    rec.source_format = "isaaclab-hdf5"
    return rec


register_reader(
    "isaaclab-hdf5",
    read_isaaclab_hdf5,
    sniff=lambda _src, head: head.startswith(HDF5_MAGIC),
    binary=True,
    rank=100,
    aliases=("isaaclab",),
    label="Isaac Lab HDF5",
)
