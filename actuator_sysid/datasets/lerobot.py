"""LeRobot datasets (docs/log-formats.md §6): Parquet frames with ``observation.state`` and ``action`` float lists.

Each ``episode_index`` becomes a segment ``episode_<k>``; time is the ``timestamp`` column (or
``frame_index / fps``). Given as a folder or zip, ``meta/info.json`` supplies ``fps`` and the joint names
(``features["observation.state"]["names"]``, a list or a one-key dict of lists); otherwise the user names
the joints. When ``action`` has its own names it is matched to the state by name. Optional
``observation.velocity`` / ``observation.effort`` of the same width become qd / tau. Units are per robot:
declare ``"angle_unit": "deg"`` in the sidecar for robots that log degrees.
"""

from __future__ import annotations

import io

import numpy as np

from .assemble import TABLE_CHANNELS, RawSegment, assemble, check_increasing, finite
from .canonical import PARQUET_MAGIC
from .errors import DATA_ROW, cite
from .recording import DatasetError, Recording
from .registry import register_reader
from .sources import ReadOptions, Source, need_names

STATE, ACTION = "observation.state", "action"
EXTRA = {"observation.velocity": "qd", "observation.effort": "tau"}


def is_lerobot_schema(names: list[str]) -> bool:
    return STATE in names and (ACTION in names or "episode_index" in names)


def _feature_names(info: dict | None, key: str) -> list[str] | None:
    """Names of a feature from info.json: a list, or a dict holding one list (e.g. {"motors": [...]})."""
    feat = ((info or {}).get("features") or {}).get(key) or {}
    names = feat.get("names") if isinstance(feat, dict) else None
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
        return list(names)
    return None


def _matrix(table, column: str, filename: str) -> np.ndarray:
    """A list<float> column as (n, D) float64; every row must have the same length."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(column).combine_chunks()
    if pa.types.is_fixed_size_list(col.type):
        width = col.type.list_size
    elif pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        lengths = pc.list_value_length(col).to_numpy(zero_copy_only=False)
        if lengths.size and (lengths != lengths[0]).any():
            k = int(np.flatnonzero(lengths != lengths[0])[0])
            raise DatasetError(
                f"{filename}, {cite(DATA_ROW, k + 1)}, column {column!r}: {int(lengths[k])} values where "
                f"{cite(DATA_ROW, 1)} has {int(lengths[0])}; every frame needs the same number"
            )
        width = int(lengths[0]) if lengths.size else 0
    else:
        raise DatasetError(
            f"{filename}: column {column!r} must hold a list of floats per frame, got {col.type}"
        )
    flat = pc.list_flatten(col).to_numpy(zero_copy_only=False).astype(np.float64)
    out = flat.reshape(len(col), width)
    finite(out, filename, f"column {column!r}", unit=DATA_ROW, base=1)
    return out


def _info_fps(info: dict | None, opts: ReadOptions, label: str) -> float | None:
    """Frame rate from meta/info.json's 'fps' (validated), else the user's rate_hz (None when neither is given)."""
    fps = None
    if info is not None:
        fps = info.get("fps")
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, int | float) or fps <= 0):
            raise DatasetError(f"{label}: meta/info.json 'fps' must be a positive number, got {fps!r}")
    return float(fps) if fps else opts.rate_hz


def _read_table(src: Source):
    """One Parquet file as a pyarrow Table holding at least observation.state and action."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fn = src.name
    try:
        table = pq.read_table(io.BytesIO(src.read_bytes()))
    except (pa.ArrowException, OSError, ValueError) as e:
        raise DatasetError(f"{fn}: cannot read the Parquet file ({e}); re-export it") from None
    cols = table.column_names
    for need in (STATE, ACTION):
        if need not in cols:
            raise DatasetError(
                f"{fn}: missing column {need!r}; a LeRobot dataset has observation.state, "
                f"action, timestamp, frame_index, episode_index (found: {', '.join(cols)})"
            )
    return table


def _frame_times(
    table, n: int, fn: str, fps: float | None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(episode index, frame index or None, time in s) per row: the timestamp column, else frame_index / fps."""
    cols = table.column_names
    ep = (
        table.column("episode_index").to_numpy(zero_copy_only=False).astype(np.int64)
        if "episode_index" in cols
        else np.zeros(n, dtype=np.int64)
    )
    frame = (
        table.column("frame_index").to_numpy(zero_copy_only=False).astype(np.float64)
        if "frame_index" in cols
        else None
    )
    if "timestamp" in cols:
        t_all = table.column("timestamp").to_numpy(zero_copy_only=False).astype(np.float64)
        finite(t_all, fn, "column 'timestamp'", unit=DATA_ROW)
    elif frame is not None and fps:
        t_all = frame / fps
    else:
        raise DatasetError(
            f"{fn}: no 'timestamp' column and no fps (meta/info.json or rate_hz) to time "
            "the frames; upload the dataset folder as a zip with meta/info.json"
        )
    return ep, frame, t_all


def _state_names(names: list[str] | None, width: int, opts: ReadOptions, fn: str, label: str) -> list[str]:
    """Joint names for the first file's state width: the user's when given, else info.json's (which must fit)."""
    if names is None or opts.joint_names is not None:
        return need_names(opts, width, fn, "observation.state")
    if len(names) != width:
        raise DatasetError(
            f"{label}: meta/info.json names {len(names)} state dimensions but observation.state has {width}"
        )
    return names


def _align_action(
    action: np.ndarray, action_names: list[str] | None, names: list[str], fn: str
) -> np.ndarray:
    """The action columns in state order: matched by name when info.json names them, else taken as they are."""
    width = len(names)
    if action_names is not None and action.shape[1] == len(action_names) and set(names) <= set(action_names):
        return action[:, np.array([action_names.index(n) for n in names])]
    if action.shape[1] != width:
        raise DatasetError(
            f"{fn}: action has {action.shape[1]} values per frame but observation.state has "
            f"{width}, and meta/info.json does not name them so they can be matched; "
            "positions and targets must be the same joints"
        )
    return action


def _episode_segments(
    fn: str,
    ep: np.ndarray,
    order_key: np.ndarray,
    t_all: np.ndarray,
    channels: dict[str, np.ndarray],
    width: int,
    episodes: dict[int, str],
) -> list[RawSegment]:
    """One segment per episode of a file, rows in (episode, frame) order; `episodes` records which file had each."""
    raws = []
    order = np.lexsort((order_key, ep))
    sorted_ep = ep[order]
    for ep_id in np.unique(sorted_ep):
        if int(ep_id) in episodes:
            raise DatasetError(
                f"{fn}: episode {int(ep_id)} also appears in {episodes[int(ep_id)]}; each episode "
                "must be in one file"
            )
        episodes[int(ep_id)] = fn
        sel = order[sorted_ep == ep_id]
        rows = sel + 1
        t = t_all[sel]
        check_increasing(t, rows, f"{fn}, episode {int(ep_id)}, column 'timestamp'", DATA_ROW)
        data = {ch: v[sel] for ch, v in channels.items()}
        present = {ch: [ch in data] * width for ch in TABLE_CHANNELS}
        raws.append(RawSegment(f"episode_{int(ep_id)}", t, rows, data, present, True, unit=DATA_ROW))
    return raws


def _keep_common_channels(raws: list[RawSegment], width: int) -> None:
    """Keep only the channels every segment has (an optional column missing from one file is dropped everywhere)."""
    common = set.intersection(*(set(r.data) for r in raws))
    present = {ch: [ch in common] * width for ch in TABLE_CHANNELS}
    for r in raws:
        r.data = {ch: v for ch, v in r.data.items() if ch in common}
        r.present = present


def _fps_mismatch(raws: list[RawSegment], fps: float | None, label: str) -> list[str]:
    """A warning when the time stamps' median step disagrees with fps by over 5 % (the time stamps are used)."""
    steps = [np.diff(r.t) for r in raws if r.t.size > 1]
    if fps and steps:
        med = float(np.median(np.concatenate(steps)))
        if abs(med * fps - 1) > 0.05:
            return [
                f"{label}: time stamps step {1e3 * med:.4g} ms but fps is {fps:g}; the time stamps were used"
            ]
    return []


def read_lerobot(
    parquets: list[Source], info: dict | None, side: dict, opts: ReadOptions, label: str
) -> Recording:
    """Read LeRobot Parquet file(s) into a Recording with one segment per episode."""
    import pyarrow as pa

    fps = _info_fps(info, opts, label)
    names = _feature_names(info, STATE)
    action_names = _feature_names(info, ACTION)
    raws: list[RawSegment] = []
    width = None
    episodes: dict[int, str] = {}
    for src in parquets:
        fn = src.name
        table = _read_table(src)
        cols = table.column_names
        state = _matrix(table, STATE, fn)
        action = _matrix(table, ACTION, fn)
        ep, frame, t_all = _frame_times(table, state.shape[0], fn, fps)
        if width is None:
            width = state.shape[1]
            names = _state_names(names, width, opts, fn, label)
        elif state.shape[1] != width:
            raise DatasetError(
                f"{fn}: observation.state has {state.shape[1]} values per frame but earlier files "
                f"have {width}"
            )
        assert names is not None  # the first file sets width and names together
        action = _align_action(action, action_names, names, fn)
        extra = {
            ch: _matrix(table, c, fn)
            for c, ch in EXTRA.items()
            if c in cols and table.column(c).type != pa.null()
        }
        extra = {ch: v for ch, v in extra.items() if v.shape[1] == width}
        channels = {"q": state, "q_des": action, **extra}
        raws += _episode_segments(
            fn, ep, frame if frame is not None else t_all, t_all, channels, width, episodes
        )
    assert names is not None and width is not None
    _keep_common_channels(raws, width)
    rec = assemble(names, raws, side, label, _fps_mismatch(raws, fps, label), drop_short=True)
    rec.source_format = "lerobot"
    rec.metadata["fps"] = fps
    return rec


def looks_like_lerobot(src: Source, head: bytes) -> bool:
    """A Parquet file whose columns are a LeRobot dataset's (observation.state, action, ...)."""
    if not head.startswith(PARQUET_MAGIC):
        return False
    import pyarrow.parquet as pq

    try:
        with src.open() as f:
            names = pq.read_schema(f).names
    except Exception:  # noqa: BLE001 - a damaged file is reported by the canonical reader
        return False
    return is_lerobot_schema(names)


register_reader(
    "lerobot",
    lambda src, side, opts: read_lerobot([src], None, side, opts, src.name),
    sniff=looks_like_lerobot,
    binary=True,
    rank=90,
    label="LeRobot",
    refines="parquet",
    accepts=("parquet",),
)
