"""Reader and writer for the canonical joint-log table (log-formats §1): CSV or Parquet, long or wide.

Long form has one row per joint per sample, with the columns
``t, joint, q, [qd], [tau], q_des, [qd_des], [tau_ff], [segment]``. Wide form has one row per sample,
with the columns ``t``, ``<joint>/q``, ``<joint>/qd``, ``<joint>/tau``, ``<joint>/q_des``,
``<joint>/qd_des``, ``<joint>/tau_ff`` and an optional ``segment``. A ``joint`` column marks the long form.
Row numbers in messages count data rows from 1 (the header is not a row).

Segments: rows are grouped by the ``segment`` column in order of first appearance (names are the values
as text); without it a new segment starts at each time gap longer than 5 median sample periods, named
"0", "1", ... Missing ``qd`` is differentiated from ``q``; missing ``qd_des`` / ``tau_ff`` are zero;
missing ``tau`` leaves ``Segment.tau = None``. A segment with jittered time stamps (any step more than
2 % away from the median step) is resampled linearly onto a uniform grid at the median rate.

Sidecar (a JSON object beside the table, or the ``metadata`` argument; every key is optional)::

    {
      "angle_unit": "rad" | "deg",        # unit of q, qd, q_des, qd_des of revolute joints (default rad)
      "velocity_source": "<sentence>",    # how the table's qd columns were made (default "measured")
      "joints": {
        "<joint>": {"type": "revolute" | "prismatic",   # default revolute
                    "inertia": kg·m², "mass": kg, "com_distance": m, "gravity": m/s²}
      },
      "segments": {
        "<segment name>": {"kp": ..., "kd": ..., <any other metadata>,
                           "joints": {"<joint>": {"inertia": .., "mass": .., ...}}}   # load overrides
      },
      <any other key>: kept in Recording.metadata
    }

Per-joint fields fill ``JointInfo``; each segment's dict becomes ``Segment.metadata`` as given (gains are
taken as SI, N·m/rad and N·m·s/rad, whatever ``angle_unit`` says: it applies to the table only).
"""

from __future__ import annotations

import copy
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .recording import CHANNELS, DatasetError, JointInfo, Recording, Segment

MIN_SAMPLES = 10
"""A segment shorter than this cannot support a fit."""
GAP_PERIODS = 5.0
"""Without a segment column, a time step longer than this many median periods starts a new segment."""
JITTER_TOL = 0.02
"""A segment whose steps stray more than this fraction from the median step is resampled."""
DEGREES_RANGE = 2 * math.pi * 4
"""A revolute position range wider than this in "rad" almost certainly means the log is in degrees."""

VELOCITY_METHOD = "differentiated from q: second-order central differences (numpy.gradient)"
"""What Recording.velocity_source says when qd was computed here."""

REQUIRED = ("q", "q_des")
OPTIONAL = ("qd", "tau", "qd_des", "tau_ff")
TABLE_CHANNELS = ("q", "qd", "tau", "q_des", "qd_des", "tau_ff")  # column order when writing
ANGLE_CHANNELS = ("q", "qd", "q_des", "qd_des")
JOINT_TYPES = ("revolute", "prismatic")
LOAD_FIELDS = {"inertia": "kg·m²", "mass": "kg", "com_distance": "m", "gravity": "m/s²"}
PARQUET_MAGIC = b"PAR1"
FORMAT_HINT = (
    "expected a canonical CSV or Parquet table (columns t, q, q_des ... with a joint column in long form, "
    "or t, <joint>/q, <joint>/q_des ... in wide form; see log-formats §1)"
)


@dataclass
class _RawSegment:
    """One segment as read from the table, before units, resampling and derived channels."""

    name: str
    t: np.ndarray
    rows: np.ndarray  # 1-based data-row number of each sample (first joint's row in long form)
    data: dict[str, np.ndarray]  # channel -> (n, J); columns of absent joints are zeros
    present: dict[str, list[bool]]  # channel -> per joint: was the column in the table
    split_by_gap: bool = False


# --------------------------------------------------------------------------------------------- reading


def read_log(path: Path, sidecar: Path | None = None, fmt: str | None = None) -> Recording:
    """Read a canonical table from disk with its sidecar (default: `<path>.json`, else `<stem>.json`)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: file not found; check the path")
    if sidecar is None:
        for cand in (path.with_name(path.name + ".json"), path.with_suffix(".json")):
            if cand != path and cand.is_file():
                sidecar = cand
                break
    elif not Path(sidecar).is_file():
        raise DatasetError(f"{sidecar}: sidecar file not found; check the path or leave it out")
    return read_table(path.read_bytes(), path.name, metadata=sidecar, fmt=fmt)


def read_table(
    data: bytes | Path,
    filename: str,
    metadata: dict | str | bytes | Path | None = None,
    fmt: str | None = None,
) -> Recording:
    """Parse a canonical CSV/Parquet table (bytes or a path) plus sidecar metadata into a Recording.

    `metadata` is the sidecar as a dict, JSON text/bytes, or a path to a JSON file; `fmt` is "csv",
    "parquet" or None to detect from the content. Every problem raises DatasetError naming where it is.
    """
    if isinstance(data, Path):
        data = data.read_bytes()
    side = load_sidecar(metadata)
    frame, fmt = _read_frame(bytes(data), filename, fmt)
    frame.columns = [str(c).strip() for c in frame.columns]
    warnings: list[str] = []
    long_form = "joint" in frame.columns
    if long_form:
        joints, raws = _parse_long(frame, filename, warnings)
    else:
        joints, raws = _parse_wide(frame, filename, warnings)
    rec = _assemble(joints, raws, side, filename, warnings)
    rec.source_format = f"canonical-{fmt}-{'long' if long_form else 'wide'}"
    return rec


def load_sidecar(src: dict | str | bytes | Path | None) -> dict:
    """Load and shape-check a sidecar given as a dict, JSON text/bytes or a JSON file path."""
    if src is None:
        return {}
    label = "sidecar"
    if isinstance(src, Path):
        label = src.name
        try:
            src = src.read_bytes()
        except OSError as e:
            raise DatasetError(f"{label}: cannot read the sidecar file ({e.strerror})") from None
    if isinstance(src, bytes | str):
        if isinstance(src, bytes):
            try:
                src = src.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise DatasetError(f"{label}: not UTF-8 text; save the sidecar as UTF-8 JSON") from None
        if not src.strip():
            return {}
        try:
            src = json.loads(src)
        except json.JSONDecodeError as e:
            raise DatasetError(
                f"{label}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}; "
                "the sidecar must be one JSON object"
            ) from None
    if not isinstance(src, dict):
        raise DatasetError(
            f"{label}: the sidecar must be a JSON object such as "
            f'{{"angle_unit": "rad", "joints": {{...}}, "segments": {{...}}}}, got {type(src).__name__}'
        )
    side = copy.deepcopy(src)
    unit = side.get("angle_unit", "rad")
    if unit not in ("rad", "deg"):
        raise DatasetError(f'{label}: invalid angle_unit {unit!r}; use "rad" or "deg"')
    for key in ("joints", "segments"):
        if not isinstance(side.get(key, {}), dict):
            raise DatasetError(
                f'{label}: "{key}" must be an object keyed by {key[:-1]} name, got {type(side[key]).__name__}'
            )
        for name, val in side.get(key, {}).items():
            if not isinstance(val, dict):
                raise DatasetError(
                    f'{label}: "{key}"."{name}" must be an object, got {type(val).__name__} ({val!r})'
                )
    vs = side.get("velocity_source")
    if vs is not None and not isinstance(vs, str):
        raise DatasetError(f'{label}: "velocity_source" must be a sentence (string), got {vs!r}')
    return side


def _read_frame(data: bytes, filename: str, fmt: str | None) -> tuple[pd.DataFrame, str]:
    """Decode bytes into a DataFrame of raw columns; returns the frame and the format used."""
    if fmt not in (None, "csv", "parquet"):
        raise DatasetError(f'{filename}: unknown format {fmt!r} requested; use "csv", "parquet" or none')
    if not data.strip():
        raise DatasetError(f"{filename}: the file is empty; upload a canonical table with a header and rows")
    is_parquet = data[:4] == PARQUET_MAGIC
    if fmt == "parquet" or (fmt is None and is_parquet):
        if not is_parquet:
            raise DatasetError(
                f"{filename}: not a Parquet file (it does not start with PAR1); "
                "upload the .parquet file itself, or declare the format as csv"
            )
        frame = _read_parquet(data, filename)
        fmt = "parquet"
    else:
        if is_parquet:
            raise DatasetError(f"{filename}: this is a Parquet file, not CSV; declare the format as parquet")
        frame = _read_csv(data, filename)
        fmt = "csv"
    if len(frame.columns) == 0:
        raise DatasetError(f"{filename}: unknown format: no columns found; {FORMAT_HINT}")
    cols = {str(c).strip() for c in frame.columns}
    canonical = {"t", "joint", "q", "q_des"} & cols or {c for c in cols if c.endswith(("/q", "/q_des"))}
    if not canonical:
        shown = ", ".join(sorted(cols)[:8]) + (" ..." if len(cols) > 8 else "")
        raise DatasetError(
            f"{filename}: unknown format: no canonical columns (found: {shown}); {FORMAT_HINT}"
        )
    if len(frame) == 0:
        raise DatasetError(
            f"{filename}: the table has a header but no data rows; add samples below the header"
        )
    return frame, fmt


def _read_parquet(data: bytes, filename: str) -> pd.DataFrame:
    """Parquet bytes -> DataFrame, with a readable error for a damaged file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(data)).to_pandas()
    except (pa.ArrowException, OSError, ValueError) as e:
        raise DatasetError(f"{filename}: cannot read the Parquet file ({e}); re-export it") from None


def _read_csv(data: bytes, filename: str) -> pd.DataFrame:
    """CSV bytes -> DataFrame of text columns (numbers are parsed later, so errors can name the row)."""
    if b"\x00" in data[:4096]:
        raise DatasetError(f"{filename}: unknown format: binary content that is not Parquet; {FORMAT_HINT}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    header = text.lstrip().split("\n", 1)[0]
    sep = ","
    if "," not in header:
        sep = ";" if ";" in header else "\t" if "\t" in header else ","
    try:
        return pd.read_csv(
            io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, skipinitialspace=True
        )
    except pd.errors.EmptyDataError:
        raise DatasetError(
            f"{filename}: the file is empty; upload a canonical table with a header and rows"
        ) from None
    except (pd.errors.ParserError, ValueError) as e:
        raise DatasetError(
            f"{filename}: cannot parse the CSV ({str(e).strip()}); "
            "every row needs as many fields as the header"
        ) from None


def _numeric(col: pd.Series, filename: str, column: str, joints: np.ndarray | None = None) -> np.ndarray:
    """A column as float64; the first empty, non-numeric, NaN or inf value is an error naming its row."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        arr = col.to_numpy(dtype=np.float64, na_value=np.nan)
        text = None
    else:
        text = col.astype("string").str.strip()
        arr = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size == 0:
        return arr
    k = int(bad[0])
    if text is None:
        problem = "the value is NaN (missing)" if np.isnan(arr[k]) else f"the value is {float(arr[k])!r}"
    elif pd.isna(text.iloc[k]) or text.iloc[k] == "":
        problem = "the value is empty"
    else:
        try:
            problem = f"the value is {float(text.iloc[k])!r}".replace("nan", "NaN")
        except ValueError:
            problem = f"{text.iloc[k]!r} is not a number"
    who = f" (joint '{joints[k]}')" if joints is not None else ""
    more = f"; {bad.size - 1} more bad value(s) in this column" if bad.size > 1 else ""
    raise DatasetError(
        f"{filename}, row {k + 1}{who}, column '{column}': {problem}{more}; "
        f"every value in '{column}' must be a finite number — fix or delete the row"
    )


def _labels(col: pd.Series) -> np.ndarray:
    """A label column (joint, segment) as stripped text, missing values as ""."""
    return np.array(["" if pd.isna(v) else str(v).strip() for v in col.tolist()], dtype=object)


def _groups(frame: pd.DataFrame, filename: str) -> list[tuple[str | None, np.ndarray]]:
    """(segment name, row indices) in first-appearance order; one unnamed group without a segment column."""
    if "segment" not in frame.columns:
        return [(None, np.arange(len(frame)))]
    seg = _labels(frame["segment"])
    empty = np.flatnonzero(seg == "")
    if empty.size:
        raise DatasetError(
            f"{filename}, row {empty[0] + 1}, column 'segment': the value is empty; "
            "give every row a segment id, or drop the segment column to split at time gaps"
        )
    names = pd.unique(seg)
    return [(str(n), np.flatnonzero(seg == n)) for n in names]


def _check_increasing(t: np.ndarray, rows: np.ndarray, where: str) -> None:
    """t must strictly increase; the error names the row and both times."""
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0)
    if bad.size == 0:
        return
    k = int(bad[0])
    if dt[k] == 0:
        raise DatasetError(
            f"{where}: duplicate t = {float(t[k])!r} at rows {rows[k]} and {rows[k + 1]}; "
            "each time stamp may appear once (per joint) in a segment — remove the repeated row"
        )
    raise DatasetError(
        f"{where}: t is not increasing at row {rows[k + 1]} (t = {float(t[k + 1])!r} after {float(t[k])!r}); "
        "sort the rows by t, or add a 'segment' column if the clock restarts there"
    )


def _where(filename: str, segment: str | None = None, joint: str | None = None) -> str:
    """The "file, segment, joint" prefix of a message."""
    out = filename if segment is None else f"{filename}, segment {segment}"
    return out if joint is None else f"{out}, joint '{joint}'"


def _parse_long(
    frame: pd.DataFrame, filename: str, warnings: list[str]
) -> tuple[list[str], list[_RawSegment]]:
    """Long form: one row per joint per sample; every joint must share the time stamps of its segment."""
    cols = list(frame.columns)
    for req in ("t", *REQUIRED):
        if req not in cols:
            raise DatasetError(
                f"{filename}: missing required column '{req}'; long-form tables need t, joint, q, q_des "
                f"(found: {', '.join(cols)})"
            )
    known = {"t", "joint", "segment", *TABLE_CHANNELS}
    ignored = [c for c in cols if c not in known]
    if ignored:
        warnings.append(f"columns {ignored} are not part of the canonical long-form table and were ignored")
    jl = _labels(frame["joint"])
    empty = np.flatnonzero(jl == "")
    if empty.size:
        raise DatasetError(
            f"{filename}, row {empty[0] + 1}, column 'joint': the joint name is empty; name the joint"
        )
    joints = [str(j) for j in pd.unique(jl)]
    t = _numeric(frame["t"], filename, "t", jl)
    chans = {ch: _numeric(frame[ch], filename, ch, jl) for ch in TABLE_CHANNELS if ch in cols}
    raws = []
    for seg, idx in _groups(frame, filename):
        per_joint = []
        for j in joints:
            jdx = idx[jl[idx] == j]
            if jdx.size == 0:
                raise DatasetError(
                    f"{_where(filename, seg)}: joint '{j}' has no rows; every joint needs a row at "
                    "every time stamp of every segment"
                )
            _check_increasing(t[jdx], jdx + 1, _where(filename, seg, j))
            per_joint.append(jdx)
        ref = per_joint[0]
        for j, jdx in zip(joints[1:], per_joint[1:], strict=True):
            if jdx.size != ref.size:
                raise DatasetError(
                    f"{_where(filename, seg, j)}: {jdx.size} samples but joint '{joints[0]}' has {ref.size}; "
                    "every joint needs a row at the same time stamps in a segment"
                )
            off = np.flatnonzero(~np.isclose(t[jdx], t[ref], rtol=1e-12, atol=1e-9))
            if off.size:
                k = int(off[0])
                raise DatasetError(
                    f"{_where(filename, seg, j)}: t = {float(t[jdx[k]])!r} at row {jdx[k] + 1} where joint "
                    f"'{joints[0]}' has t = {float(t[ref[k]])!r} (row {ref[k] + 1}); every joint needs rows "
                    "at the same time stamps in a segment"
                )
        data = {ch: np.stack([a[jdx] for jdx in per_joint], axis=1) for ch, a in chans.items()}
        present = {ch: [ch in chans] * len(joints) for ch in TABLE_CHANNELS}
        raws.append(_RawSegment(seg or "", t[ref], ref + 1, data, present, split_by_gap=seg is None))
    return joints, raws


def _parse_wide(
    frame: pd.DataFrame, filename: str, warnings: list[str]
) -> tuple[list[str], list[_RawSegment]]:
    """Wide form: one row per sample, `<joint>/<channel>` columns."""
    cols = list(frame.columns)
    if "t" not in cols:
        raise DatasetError(
            f"{filename}: missing required column 't' (time in seconds); wide-form tables need t, "
            f"<joint>/q and <joint>/q_des (found: {', '.join(cols)})"
        )
    colmap: dict[str, dict[str, str]] = {}
    ignored = []
    for c in cols:
        joint, _, ch = c.rpartition("/")
        if c in ("t", "segment"):
            continue
        if joint and ch in TABLE_CHANNELS:
            colmap.setdefault(joint, {})[ch] = c
        else:
            ignored.append(c)
    if ignored:
        warnings.append(
            f"columns {ignored} are not canonical wide-form columns (<joint>/q, <joint>/qd, ...) "
            "and were ignored"
        )
    if not colmap:
        hint = (
            "found q without a 'joint' column: add a 'joint' column (long form) or rename the columns to "
            "<joint>/q, <joint>/q_des (wide form)"
            if "q" in cols
            else "wide-form tables need t, <joint>/q and <joint>/q_des, "
            "or use the long form with a 'joint' column"
        )
        raise DatasetError(
            f"{filename}: missing required column '<joint>/q' — no joint columns found; {hint}"
        )
    joints = list(colmap)
    for j in joints:
        for req in REQUIRED:
            if req not in colmap[j]:
                raise DatasetError(
                    f"{filename}: joint '{j}' has no '{j}/{req}' column (required; found for '{j}': "
                    f"{', '.join(colmap[j].values())}); add it, or use the long form"
                )
    t = _numeric(frame["t"], filename, "t")
    arrays = {j: {ch: _numeric(frame[c], filename, c) for ch, c in m.items()} for j, m in colmap.items()}
    present = {ch: [ch in colmap[j] for j in joints] for ch in TABLE_CHANNELS}
    raws = []
    for seg, idx in _groups(frame, filename):
        _check_increasing(t[idx], idx + 1, _where(filename, seg))
        data = {}
        for ch in TABLE_CHANNELS:
            if any(present[ch]):
                zeros = np.zeros(idx.size)
                data[ch] = np.stack(
                    [arrays[j][ch][idx] if ch in arrays[j] else zeros for j in joints], axis=1
                )
        raws.append(_RawSegment(seg or "", t[idx], idx + 1, data, present, split_by_gap=seg is None))
    return joints, raws


def _split_gaps(raw: _RawSegment) -> list[_RawSegment]:
    """Split an unsegmented table at time steps longer than GAP_PERIODS median periods."""
    if raw.t.size < 2:
        return [_RawSegment("0", raw.t, raw.rows, raw.data, raw.present, True)]
    dt = np.diff(raw.t)
    cuts = np.flatnonzero(dt > GAP_PERIODS * np.median(dt)) + 1
    bounds = [0, *cuts.tolist(), raw.t.size]
    return [
        _RawSegment(
            str(i), raw.t[a:b], raw.rows[a:b], {ch: v[a:b] for ch, v in raw.data.items()}, raw.present, True
        )
        for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
    ]


def _resample(raw: _RawSegment, filename: str) -> tuple[np.ndarray, dict[str, np.ndarray], str | None]:
    """Uniform-grid copy of a jittered segment (linear interpolation at the median rate), with a warning."""
    t = raw.t
    dt = np.diff(t)
    med = float(np.median(dt))
    dev = float(np.max(np.abs(dt - med)))
    if dev <= JITTER_TOL * med:
        return t, raw.data, None
    n = int(math.floor((t[-1] - t[0]) / med + 1e-9)) + 1
    grid = t[0] + med * np.arange(n, dtype=np.float64)
    data = {
        ch: np.stack([np.interp(grid, t, v[:, j]) for j in range(v.shape[1])], axis=1)
        for ch, v in raw.data.items()
    }
    msg = (
        f"{_where(filename, raw.name)}: time stamps are not uniform (largest step deviation "
        f"{100 * dev / med:.0f} % of the median {1e3 * med:.4g} ms); resampled by linear interpolation "
        f"onto a uniform {1 / med:.6g} Hz grid ({raw.t.size} -> {n} samples)"
    )
    big = np.flatnonzero(dt > GAP_PERIODS * med)
    if not raw.split_by_gap and big.size:
        k = int(big[0])
        msg += (
            f"; this bridged a gap of {dt[k]:.4g} s at row {raw.rows[k + 1]} — give the rows after it "
            "another segment id if the data is not continuous there"
        )
    return grid, data, msg


def _check_load_fields(d: dict, where: str, warnings: list[str], allowed: dict[str, str]) -> dict:
    """Numeric load fields must be finite numbers ≥ 0 (gravity: any finite); unknown keys are reported."""
    out = {}
    for k, v in d.items():
        if k not in allowed:
            warnings.append(f"{where}: unknown key {k!r} ignored (known: {', '.join(allowed)})")
            continue
        if k == "type":
            if v not in JOINT_TYPES:
                raise DatasetError(f'{where}: invalid type {v!r}; use "revolute" or "prismatic"')
            out["joint_type"] = v
            continue
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or (k != "gravity" and v < 0):
            bound = "" if k == "gravity" else " ≥ 0"
            raise DatasetError(f"{where}: {k} must be a finite number{bound} in {allowed[k]}, got {v!r}")
        out[k] = float(v)
    return out


def _assemble(
    joints: list[str], raws: list[_RawSegment], side: dict, filename: str, warnings: list[str]
) -> Recording:
    """Apply the sidecar, split, check, convert units, resample and derive channels; build the Recording."""
    segs: list[_RawSegment] = []
    for raw in raws:
        segs.extend(_split_gaps(raw) if raw.split_by_gap else [raw])
    seg_names = [s.name for s in segs]

    # sidecar: joints
    joint_fields = {"type": "revolute or prismatic", **LOAD_FIELDS}
    infos = []
    side_joints = side.get("joints", {})
    for name in side_joints:
        if name not in joints:
            raise DatasetError(
                f"sidecar for {filename}: joint {name!r} is not in the table; the table's joints are "
                f"{joints} — fix the name or remove the entry"
            )
    for name in joints:
        d = dict(side_joints.get(name, {}))
        if "joint_type" in d:
            d["type"] = d.pop("joint_type")
        infos.append(
            JointInfo(name=name, **_check_load_fields(d, f"sidecar joints.{name}", warnings, joint_fields))
        )

    # sidecar: segments
    side_segs = side.get("segments", {})
    for name, meta in side_segs.items():
        if name not in seg_names:
            how = "split at time gaps" if segs and segs[0].split_by_gap else "from the 'segment' column"
            raise DatasetError(
                f"sidecar for {filename}: segment {name!r} does not exist; the table's segments ({how}) are "
                f"{seg_names} — fix the key or remove it"
            )
        over = meta.get("joints", {})
        if not isinstance(over, dict):
            raise DatasetError(f"sidecar segments.{name}.joints must be an object keyed by joint name")
        for jn, jd in over.items():
            if jn not in joints:
                raise DatasetError(
                    f"sidecar for {filename}: segments.{name}.joints names joint {jn!r}, which is not in the "
                    f"table; the table's joints are {joints}"
                )
            if not isinstance(jd, dict):
                raise DatasetError(f"sidecar segments.{name}.joints.{jn} must be an object of load fields")
            _check_load_fields(jd, f"sidecar segments.{name}.joints.{jn}", warnings, LOAD_FIELDS)

    for s in segs:
        if s.t.size < MIN_SAMPLES:
            why = " (segments are split at time gaps > 5 sample periods)" if s.split_by_gap else ""
            raise DatasetError(
                f"{_where(filename, s.name)} (rows {s.rows[0]}–{s.rows[-1]}): only {s.t.size} samples{why}; "
                f"a segment needs at least {MIN_SAMPLES} — drop these rows or join them to a neighbouring "
                "segment"
            )

    unit = side.get("angle_unit", "rad")
    revolute = np.array([j.joint_type == "revolute" for j in infos])
    scale = np.where(revolute, math.pi / 180.0, 1.0) if unit == "deg" else None

    present = segs[0].present
    J = len(joints)
    out: list[Segment] = []
    for s in segs:
        t, data, note = _resample(s, filename)
        if note:
            warnings.append(note)
        if scale is not None:
            data = {ch: v * scale if ch in ANGLE_CHANNELS else v for ch, v in data.items()}
        zeros = np.zeros((t.size, J))
        qd = data.get("qd", zeros).copy()
        missing_qd = [j for j in range(J) if not present["qd"][j]]
        if missing_qd:
            qd[:, missing_qd] = np.gradient(data["q"][:, missing_qd], t, axis=0, edge_order=2)
        tau = data["tau"] if all(present["tau"]) else None
        meta = copy.deepcopy(side_segs.get(s.name, {}))
        out.append(
            Segment(
                name=s.name,
                t=np.ascontiguousarray(t, dtype=np.float64),
                q=np.ascontiguousarray(data["q"], dtype=np.float64),
                qd=np.ascontiguousarray(qd, dtype=np.float64),
                q_des=np.ascontiguousarray(data["q_des"], dtype=np.float64),
                qd_des=np.ascontiguousarray(data.get("qd_des", zeros), dtype=np.float64),
                tau_ff=np.ascontiguousarray(data.get("tau_ff", zeros), dtype=np.float64),
                tau=None if tau is None else np.ascontiguousarray(tau, dtype=np.float64),
                metadata=meta,
            )
        )

    # velocity provenance
    measured = [joints[j] for j in range(J) if present["qd"][j]]
    derived = [joints[j] for j in range(J) if not present["qd"][j]]
    measured_src = side.get("velocity_source", "measured")
    if not derived:
        velocity_source = measured_src
    elif not measured:
        velocity_source = VELOCITY_METHOD
    else:
        velocity_source = f"{measured_src} for {measured}; {VELOCITY_METHOD} for {derived}"
    if derived:
        warnings.append(
            f"the table has no qd for {derived}; velocities were computed from q by second-order central "
            "differences (numpy.gradient) on each segment's uniform time grid — noise in q is amplified in qd"
        )
    if any(present["tau"]) and not all(present["tau"]):
        have = [joints[j] for j in range(J) if present["tau"][j]]
        lack = [joints[j] for j in range(J) if not present["tau"][j]]
        warnings.append(
            f"tau is given for {have} but not for {lack}; measured effort was dropped for all joints — add "
            "<joint>/tau columns for every joint to use it"
        )

    if unit == "rad":
        for j, info in enumerate(infos):
            if info.joint_type != "revolute":
                continue
            lo = min(float(s.q[:, j].min()) for s in out)
            hi = max(float(s.q[:, j].max()) for s in out)
            if hi - lo > DEGREES_RANGE:
                warnings.append(
                    f"joint '{info.name}': positions span {hi - lo:.4g} rad "
                    f"(over {DEGREES_RANGE / (2 * math.pi):.0f} turns); positions look like degrees; "
                    'declare "angle_unit": "deg" in the sidecar'
                )

    extras = {
        k: v for k, v in side.items() if k not in ("angle_unit", "velocity_source", "joints", "segments")
    }
    return Recording(
        joints=infos,
        segments=out,
        velocity_source=velocity_source,
        warnings=warnings,
        metadata={"source_file": filename, "angle_unit": unit, **extras},
    )


# --------------------------------------------------------------------------------------------- writing

_RESERVED_META = ("source_file", "angle_unit")


def sidecar_for(rec: Recording) -> dict:
    """The JSON sidecar that describes `rec` (SI units, joint loads, segment metadata) for `write_table`."""
    side: dict[str, Any] = {
        "angle_unit": "rad",
        "velocity_source": rec.velocity_source,
        "joints": {
            j.name: {
                "type": j.joint_type,
                "inertia": j.inertia,
                "mass": j.mass,
                "com_distance": j.com_distance,
                "gravity": j.gravity,
            }
            for j in rec.joints
        },
        "segments": {s.name: _jsonable(s.metadata) for s in rec.segments},
    }
    side.update({k: _jsonable(v) for k, v in rec.metadata.items() if k not in _RESERVED_META})
    return side


def write_table(
    rec: Recording, path: Path, form: Literal["long", "wide"] = "long", *, sidecar: bool = True
) -> None:
    """Write `rec` as a canonical table (.csv, or .parquet/.pq) and, unless told not to, `<stem>.json`.

    Every channel is written, qd included; tau only when every segment has it.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"{path}: write_table writes .csv or .parquet files, not {suffix or 'no suffix'!r}")
    if form not in ("long", "wide"):
        raise ValueError(f"form must be 'long' or 'wide', got {form!r}")
    names = rec.joint_names
    J = len(names)
    with_tau = bool(rec.segments) and all(s.tau is not None for s in rec.segments)
    channels = [ch for ch in TABLE_CHANNELS if ch != "tau" or with_tau]
    parts = []
    for s in rec.segments:
        if form == "long":
            cols: dict[str, Any] = {
                "t": np.repeat(s.t, J),
                "joint": np.tile(np.array(names, dtype=object), s.n),
            }
            cols.update({ch: np.asarray(getattr(s, ch), dtype=np.float64).reshape(-1) for ch in channels})
        else:
            cols = {"t": s.t}
            for j, name in enumerate(names):
                cols.update(
                    {f"{name}/{ch}": np.asarray(getattr(s, ch), dtype=np.float64)[:, j] for ch in channels}
                )
        cols["segment"] = [s.name] * len(cols["t"])
        parts.append(pd.DataFrame(cols))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["t", "segment"])
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    if sidecar:
        path.with_suffix(".json").write_text(json.dumps(sidecar_for(rec), indent=1))


def _jsonable(x: Any) -> Any:
    """Plain-JSON copy of metadata (numpy scalars and arrays become numbers and lists)."""
    return json.loads(json.dumps(x, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


# Re-exported for callers that import everything from here.
__all__ = [
    "CHANNELS",
    "DatasetError",
    "JointInfo",
    "Recording",
    "Segment",
    "load_sidecar",
    "read_log",
    "read_table",
    "sidecar_for",
    "write_table",
]
