"""Reader and writer for the canonical joint-log table (docs/log-formats.md §1): CSV or Parquet, long or wide.

Long form has one row per joint per sample, with the columns
``t, joint, q, [qd], [tau], q_des, [qd_des], [tau_ff], [enable], [segment]``. Wide form has one row per
sample, with the columns ``t``, ``<joint>/q``, ``<joint>/qd``, ``<joint>/tau``, ``<joint>/q_des``,
``<joint>/qd_des``, ``<joint>/tau_ff``, ``<joint>/enable`` and an optional ``segment``. A ``joint`` column
marks the long form. ``enable`` is the per-sample torque enable (1 driven, 0 torque off: the joint swings
freely, `Segment.enable`); a joint without it is driven throughout.
Messages name a CSV's own line (the header, blank lines and every line of a quoted field counted, as an editor
numbers them) and a Parquet table's data row, counted from 1 with the 0-based index beside it.

Segments: rows are grouped by the ``segment`` column in order of first appearance (names are the values
as text); without it a new segment starts at each time gap longer than 5 median sample periods, named
"0", "1", ... Missing ``qd`` is differentiated from ``q``; missing ``qd_des`` / ``tau_ff`` are zero;
missing ``tau`` leaves ``Segment.tau = None``. A segment with jittered time stamps (any step more than
2 % away from the median step) or skipped samples (a step of about 2, 3, ... periods) is resampled linearly onto
a uniform grid at the median rate. A sample logged twice (its stamp and every value repeat the row before) is
dropped and counted; a repeated stamp with other values is an error.

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
      "zero_angle": {"<joint>": rad},   # the angle of the logged q = 0 from hanging straight down (the
                                        # bench plant's q = 0); q and q_des are shifted by it on reading
      <any other key>: kept in Recording.metadata
    }

Per-joint fields fill ``JointInfo``; each segment's dict becomes ``Segment.metadata`` as given (gains are
taken as SI, N·m/rad and N·m·s/rad, whatever ``angle_unit`` says: it applies to the table only).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .assemble import (
    ANGLE_CHANNELS,
    DEGREES_RANGE,
    GAP_PERIODS,
    JITTER_TOL,
    JOINT_TYPES,
    LOAD_FIELDS,
    MIN_SAMPLES,
    OPTIONAL,
    REQUIRED,
    TABLE_CHANNELS,
    VELOCITY_METHOD,
    RawSegment,
    assemble,
    check_increasing,
    repeated_records,
    where,
)
from .errors import DATA_ROW, cite
from .jsontext import check_depth
from .names import clip_text, quote_name
from .recording import CHANNELS, DatasetError, JointInfo, Recording, Segment
from .registry import register_reader
from .sources import ReadOptions, Source
from .tablestream import LineMap

PARQUET_MAGIC = b"PAR1"
ENABLE = "enable"  # the per-sample torque enable column: 1 driven, 0 torque off
READ_CHANNELS = (*TABLE_CHANNELS, ENABLE)
FORMAT_HINT = (
    "expected a canonical CSV or Parquet table (columns t, q, q_des ... with a joint column in long form, "
    "or t, <joint>/q, <joint>/q_des ... in wide form; see docs/log-formats.md §1)"
)


def read_table(
    data: bytes | Path,
    filename: str,
    metadata: dict | str | bytes | Path | None = None,
    fmt: str | None = None,
) -> Recording:
    """Parse a canonical CSV/Parquet table (bytes or a path) plus sidecar metadata into a Recording.

    `metadata` is the sidecar as a dict, JSON text/bytes, or a path to a JSON file; `fmt` is "csv",
    "parquet" or None to detect from the content. Every problem raises DatasetError naming where it is.
    Every other log format (and `any_format`) goes through `datasets.read_table` (datasets/readers.py).
    """
    if fmt is not None and str(fmt).strip().lower() not in ("csv", "parquet"):
        raise DatasetError(
            f"{filename}: {fmt!r} is not a canonical table format; datasets.read_table reads it"
        )
    side = load_sidecar(metadata)
    rec = _read_streamed(data, filename, side, fmt)
    if rec is not None:
        return rec
    _check_text_lines(data, filename)
    if isinstance(data, Path):
        data = data.read_bytes()
    frame, fmt = _read_frame(bytes(data), filename, fmt)
    frame.columns = [str(c).strip() for c in frame.columns]
    warnings: list[str] = []
    lines = _line_map(data, fmt)
    long_form = "joint" in frame.columns
    if long_form:
        joints, raws = _parse_long(frame, filename, warnings, lines)
    else:
        joints, raws = _parse_wide(frame, filename, warnings, lines)
    _check_enable(raws, filename)
    rec = assemble(joints, raws, side, filename, warnings, noun="table")
    rec.source_format = f"canonical-{fmt}-{'long' if long_form else 'wide'}"
    return at_zero_angle(rec, side, filename)


def _read_streamed(data: bytes | Path, filename: str, side: dict, fmt: str | None) -> Recording | None:
    """A clean table decoded block by block (datasets/tablestream.py); None sends the file to the whole-file
    parser, which names what is wrong with it."""
    from .tablestream import Unclean, check_lines, decode

    try:
        size = data.stat().st_size if isinstance(data, Path) else len(data)
        head = _head(data)
    except OSError:
        return None
    is_parquet = head[:4] == PARQUET_MAGIC
    declared_other = fmt is not None and (fmt == "parquet") != is_parquet
    if not head.strip() or declared_other or (b"\x00" in head and not is_parquet):
        return None
    kind = "parquet" if is_parquet else "csv"
    warnings: list[str] = []
    colmap: dict[str, dict[str, str]] = {}

    def layout(names: list[str]) -> dict[str, tuple[str, int, int]]:
        """Wide tables: each <joint>/<channel> column straight into its channel's (rows, joints) matrix."""
        if not (
            {"t", "joint", "q", "q_des"} & set(names) or any(c.endswith(("/q", "/q_des")) for c in names)
        ):
            raise Unclean("no canonical columns")  # the text parser says so, with what it found
        if "joint" in names:
            return {}
        colmap.update(_wide_columns(names, filename, warnings))
        joints = list(colmap)
        return {c: (ch, joints.index(j), len(joints)) for j, m in colmap.items() for ch, c in m.items()}

    try:
        if kind == "csv":  # a header too long is refused here, before anything holds it
            check_lines(data if isinstance(data, Path) else bytes(data), filename, lines=1)
        cols = decode(data if isinstance(data, Path) else bytes(data), kind, size, layout)
    except Unclean:
        return None
    names = cols.names
    if any("" in v[1] for v in cols.labels.values()):
        return None  # an empty joint or segment label: the text parser names its row
    groups: list[tuple[str | None, np.ndarray | slice]] = [(None, slice(0, cols.rows))]
    if "segment" in cols.labels:
        codes, seg_names = cols.labels["segment"]
        groups = []
        for k, name in enumerate(seg_names):
            idx = np.flatnonzero(codes == k)
            groups.append(
                (name, slice(int(idx[0]), int(idx[-1]) + 1) if idx[-1] - idx[0] + 1 == idx.size else idx)
            )
    long_form = "joint" in names
    lines = LineMap(data) if kind == "csv" else None  # scanned only if a message names a line
    unit = "line" if lines is not None else DATA_ROW
    if long_form:
        _long_columns(names, filename, warnings)
        codes, joints = cols.labels["joint"]
        t = cols.floats.pop("t")
        chans = {ch: cols.floats.pop(ch) for ch in READ_CHANNELS if ch in cols.floats}
        del cols
        raws = _long_raws(filename, joints, codes, t, chans, groups, lines)
    else:  # the channel matrices are already built: a segment is a slice of them (a view)
        joints = list(colmap)
        t = cols.floats["t"]
        present = {ch: [ch in colmap[j] for j in joints] for ch in TABLE_CHANNELS}
        raws = []
        matrices = [cols.floats[ch] for ch in (*TABLE_CHANNELS, ENABLE) if ch in cols.floats]
        groups, repeats = _drop_repeats(t, matrices, groups)
        for (seg, sel), rep in zip(groups, repeats, strict=True):
            rows = np.arange(sel.start, sel.stop) if isinstance(sel, slice) else sel
            check_increasing(t[sel], rows + 1, where(filename, seg), unit, lines)
            seg_data = {ch: cols.floats[ch][sel] for ch in TABLE_CHANNELS if any(present[ch])}
            if ENABLE in cols.floats:  # a joint without an enable column is driven throughout
                lacking = [j for j, name in enumerate(joints) if ENABLE not in colmap[name]]
                seg_data[ENABLE] = cols.floats[ENABLE][sel].copy()
                seg_data[ENABLE][:, lacking] = 1.0
            raws.append(
                RawSegment(
                    seg or "",
                    t[sel],
                    rows + 1,
                    seg_data,
                    present,
                    split_by_gap=seg is None,
                    unit=unit,
                    repeated=rep,
                    lines=lines,
                )
            )
        del cols
    _check_enable(raws, filename)
    rec = assemble(joints, raws, side, filename, warnings, noun="table")
    rec.source_format = f"canonical-{kind}-{'long' if long_form else 'wide'}"
    return at_zero_angle(rec, side, filename)


def _line_map(data: bytes, fmt: str) -> LineMap | None:
    """A CSV's data rows → its own lines (scanned only if a message names one); None for Parquet."""
    return LineMap(data) if fmt == "csv" else None


def at_row(lines: LineMap | None, row: int) -> str:
    """Data row `row` (1-based) of a table as messages name it: its line in a CSV file (`lines`), its data row
    in a table without lines."""
    return cite("line", int(lines(row))) if lines is not None else cite(DATA_ROW, row)


def _head(data: bytes | Path) -> bytes:
    """The first 4 KiB of a table, in memory or on disk: enough to tell Parquet, text and binary apart."""
    if isinstance(data, Path):
        with open(data, "rb") as f:
            return f.read(4096)
    return bytes(data[:4096])


def _check_text_lines(data: bytes | Path, filename: str) -> None:
    """Before the whole-file parser holds a text table: no line of it may be longer than MAX_LINE_BYTES
    (checked by streaming through the file). Parquet and binary files are left to the parser's own errors."""
    from .tablestream import check_lines

    try:
        head = _head(data)
    except OSError:
        return
    if head[:4] != PARQUET_MAGIC and b"\x00" not in head:
        check_lines(data if isinstance(data, Path) else bytes(data), filename)


def at_zero_angle(rec: Recording, side: dict, filename: str) -> Recording:
    """The recording in the bench plant's frame (q = 0 hanging down): each joint the sidecar's `zero_angle`
    names has θ [rad, whatever angle_unit says] added to q and q_des, θ being the angle of the logged q = 0
    from hanging straight down (π/2 for a bench logged from the horizontal, in the direction q grows)."""
    zero = side.get("zero_angle")
    if zero is None:
        return rec
    if not isinstance(zero, dict):
        raise DatasetError(
            f'sidecar for {filename}: "zero_angle" must be an object {{"<joint>": angle in rad}} (the angle of '
            f"the logged q = 0 from hanging straight down), got {zero!r}"
        )
    for joint, theta in zero.items():
        if joint not in rec.joint_names:
            raise DatasetError(
                f'sidecar for {filename}: "zero_angle" names joint {joint!r}, which is not in the table; its '
                f"joints are {rec.joint_names}"
            )
        if isinstance(theta, bool) or not isinstance(theta, int | float) or not np.isfinite(theta):
            raise DatasetError(
                f'sidecar for {filename}: "zero_angle".{joint} must be a finite angle in rad, got {theta!r}'
            )
        j = rec.joint_index(joint)
        for seg in rec.segments:
            seg.q[:, j] += theta
            seg.q_des[:, j] += theta
        rec.warnings.append(
            f"joint '{joint}': positions shifted by {float(theta):+.4g} rad (sidecar zero_angle) so that q = 0 "
            "hangs down, the frame of the bench plant, the reports and every export"
        )
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
        check_depth(src, label)  # before json.loads, which recurses once per level
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
        shown = clip_text(
            ", ".join(clip_text(c, 60) for c in sorted(cols)[:8]) + (" ..." if len(cols) > 8 else "")
        )
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
        raise DatasetError(
            f"{filename}: cannot read the Parquet file ({clip_text(e)}); re-export it"
        ) from None


def _read_csv(data: bytes, filename: str) -> pd.DataFrame:
    """CSV bytes -> DataFrame of text columns (numbers are parsed later, so errors can name the row)."""
    if b"\x00" in data[:4096]:
        raise DatasetError(f"{filename}: unknown format: binary content that is not Parquet; {FORMAT_HINT}")
    header = data[:65536].decode("utf-8-sig", errors="replace").lstrip().split("\n", 1)[0]
    sep = ","
    if "," not in header:
        sep = ";" if ";" in header else "\t" if "\t" in header else ","
    fast = _read_csv_fast(data, sep)
    if fast is not None:
        return fast
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
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
            f"{filename}: cannot parse the CSV ({clip_text(str(e).strip())}); "
            "every row needs as many fields as the header"
        ) from None


def _read_csv_fast(data: bytes, sep: str) -> pd.DataFrame | None:
    """Typed parse with pyarrow (fast, about the table's size in memory) of a clean table: every cell a
    number, except the joint and segment labels. None for anything else (empty or odd cells, text where a
    number belongs, non-UTF-8): the text parser then finds the cell and names its row."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    buf = memoryview(data)[3:] if data.startswith(b"\xef\xbb\xbf") else memoryview(data)
    try:
        table = pcsv.read_csv(
            pa.py_buffer(buf),
            parse_options=pcsv.ParseOptions(delimiter=sep),
            convert_options=pcsv.ConvertOptions(column_types={"joint": pa.string(), "segment": pa.string()}),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError):
        return None
    names = table.column_names
    if len(set(names)) != len(names) or table.num_rows == 0:
        return None
    for name, col in zip(names, table.columns, strict=True):
        if col.null_count:
            return None
        label = name.strip() in ("joint", "segment")
        if not label and not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            return None
    return table.to_pandas()


def _numeric(
    col: pd.Series,
    filename: str,
    column: str,
    joints: np.ndarray | None = None,
    lines: LineMap | None = None,
) -> np.ndarray:
    """A column as float64; the first empty, non-numeric, NaN or inf value is an error naming its line (a CSV's,
    through `lines`) or data row."""
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
            problem = f"{quote_name(text.iloc[k], 80)} is not a number"
    who = f" (joint '{joints[k]}')" if joints is not None else ""
    more = f"; {bad.size - 1} more bad value(s) in this column" if bad.size > 1 else ""
    raise DatasetError(
        f"{filename}, {at_row(lines, k + 1)}{who}, column '{column}': {problem}{more}; "
        f"every value in '{column}' must be a finite number — fix or delete the row"
    )


def _labels(col: pd.Series) -> np.ndarray:
    """A label column (joint, segment) as stripped text, missing values as ""."""
    return np.array(["" if pd.isna(v) else str(v).strip() for v in col.tolist()], dtype=object)


def _groups(
    frame: pd.DataFrame, filename: str, lines: LineMap | None
) -> list[tuple[str | None, np.ndarray | slice]]:
    """(segment name, row indices) in first-appearance order; one unnamed group without a segment column."""
    if "segment" not in frame.columns:
        return [(None, slice(0, len(frame)))]
    return _label_groups(_labels(frame["segment"]), filename, lines)


def _label_groups(
    seg: np.ndarray, filename: str, lines: LineMap | None
) -> list[tuple[str | None, np.ndarray | slice]]:
    """Rows of each segment label in first-appearance order; a contiguous run is a slice (a view, no copy)."""
    empty = np.flatnonzero(seg == "")
    if empty.size:
        raise DatasetError(
            f"{filename}, {at_row(lines, int(empty[0]) + 1)}, column 'segment': the value is empty; "
            "give every row a segment id, or drop the segment column to split at time gaps"
        )
    out: list[tuple[str | None, np.ndarray | slice]] = []
    for n in pd.unique(seg):
        idx = np.flatnonzero(seg == n)
        out.append(
            (str(n), slice(int(idx[0]), int(idx[-1]) + 1) if idx[-1] - idx[0] + 1 == idx.size else idx)
        )
    return out


def _parse_long(
    frame: pd.DataFrame, filename: str, warnings: list[str], lines: LineMap | None
) -> tuple[list[str], list[RawSegment]]:
    """Long form: one row per joint per sample; every joint must share the time stamps of its segment."""
    cols = list(frame.columns)
    _long_columns(cols, filename, warnings)
    jl = _labels(frame["joint"])
    empty = np.flatnonzero(jl == "")
    if empty.size:
        raise DatasetError(
            f"{filename}, {at_row(lines, int(empty[0]) + 1)}, column 'joint': the joint name is empty; name "
            "the joint"
        )
    codes, uniques = pd.factorize(jl)
    joints = [str(j) for j in uniques]
    t = _numeric(frame["t"], filename, "t", jl, lines)
    chans = {ch: _numeric(frame[ch], filename, ch, jl, lines) for ch in READ_CHANNELS if ch in cols}
    groups = _groups(frame, filename, lines)
    return joints, _long_raws(filename, joints, codes, t, chans, groups, lines)


def _long_columns(cols: list[str], filename: str, warnings: list[str]) -> None:
    """Required long-form columns are there; others are reported as ignored."""
    for req in ("t", *REQUIRED):
        if req not in cols:
            raise DatasetError(
                f"{filename}: missing required column '{req}'; long-form tables need t, joint, q, q_des "
                f"(found: {clip_text(', '.join(cols))})"
            )
    known = {"t", "joint", "segment", *READ_CHANNELS}
    ignored = [c for c in cols if c not in known]
    if ignored:
        warnings.append(
            f"columns {clip_text(ignored)} are not part of the canonical long-form table and were ignored"
        )


def _long_raws(
    filename: str,
    joints: list[str],
    jl: np.ndarray,
    t: np.ndarray,
    chans: dict[str, np.ndarray],
    groups: list[tuple[str | None, np.ndarray | slice]],
    lines: LineMap | None,
) -> list[RawSegment]:
    """Long-form rows (joint codes `jl` index `joints`) → one RawSegment per group, checked; `lines` maps a
    CSV's data rows to its lines for messages (None: a Parquet table's data rows).

    Channels are stacked one at a time and each flat column is dropped from `chans` once stacked, so the
    table is held about once (a streamed file's columns are the only copy).
    """
    plan = []
    repeats = []
    unit = "line" if lines is not None else DATA_ROW
    for seg, idx in groups:
        idx = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
        per_joint = []
        for j, name in enumerate(joints):
            jdx = idx[jl[idx] == j]
            if jdx.size == 0:
                raise DatasetError(
                    f"{where(filename, seg)}: joint '{name}' has no rows; every joint needs a row at "
                    "every time stamp of every segment"
                )
            rep = repeated_records(t[jdx], (c[jdx] for c in chans.values()))
            if j == 0:
                repeats.append(jdx[rep] + 1)
            jdx = jdx[~rep]
            check_increasing(t[jdx], jdx + 1, where(filename, seg, name), unit, lines)
            per_joint.append(jdx)
        ref = per_joint[0]
        for name, jdx in zip(joints[1:], per_joint[1:], strict=True):
            if jdx.size != ref.size:
                raise DatasetError(
                    f"{where(filename, seg, name)}: {jdx.size} samples but joint '{joints[0]}' has {ref.size}; "
                    "every joint needs a row at the same time stamps in a segment"
                )
            off = np.flatnonzero(~np.isclose(t[jdx], t[ref], rtol=1e-12, atol=1e-9))
            if off.size:
                k = int(off[0])
                raise DatasetError(
                    f"{where(filename, seg, name)}: t = {float(t[jdx[k]])!r} at {at_row(lines, int(jdx[k]) + 1)} "
                    f"where joint '{joints[0]}' has t = {float(t[ref[k]])!r} ({at_row(lines, int(ref[k]) + 1)}); "
                    "every joint needs rows at the same time stamps in a segment"
                )
        plan.append((seg, per_joint))
    present = {ch: [ch in chans] * len(joints) for ch in TABLE_CHANNELS}
    data: list[dict[str, np.ndarray]] = [{} for _ in plan]
    for ch in [c for c in READ_CHANNELS if c in chans]:
        flat = chans.pop(ch)
        for d, (_, per_joint) in zip(data, plan, strict=True):
            d[ch] = np.stack([flat[jdx] for jdx in per_joint], axis=1)
        del flat
    return [
        RawSegment(
            seg or "", t[pj[0]], pj[0] + 1, d, present, seg is None, unit=unit, repeated=rep, lines=lines
        )
        for (seg, pj), d, rep in zip(plan, data, repeats, strict=True)
    ]


def _check_enable(raws: list[RawSegment], filename: str) -> None:
    """An enable column holds 1 (driven) or 0 (torque off) at every sample; the error names the line (row)."""
    for raw in raws:
        e = raw.data.get(ENABLE)
        if e is None:
            continue
        bad = np.flatnonzero(~np.isin(e, (0.0, 1.0)).all(axis=1))
        if bad.size:
            k = int(bad[0])
            raise DatasetError(
                f"{where(filename, raw.name)}, {cite(raw.unit, raw.place(raw.rows[k]))}, column 'enable': "
                f"{e[k].tolist()} is not a torque enable; write 1 where the actuator is driven and 0 where its "
                "torque is off"
            )


def _wide_columns(cols: list[str], filename: str, warnings: list[str]) -> dict[str, dict[str, str]]:
    """Wide-form column map {joint: {channel: column}}, checked for t and each joint's required columns."""
    if "t" not in cols:
        raise DatasetError(
            f"{filename}: missing required column 't' (time in seconds); wide-form tables need t, "
            f"<joint>/q and <joint>/q_des (found: {clip_text(', '.join(cols))})"
        )
    colmap: dict[str, dict[str, str]] = {}
    ignored = []
    for c in cols:
        joint, _, ch = c.rpartition("/")
        if c in ("t", "segment"):
            continue
        if joint and ch in READ_CHANNELS:
            colmap.setdefault(joint, {})[ch] = c
        else:
            ignored.append(c)
    if ignored:
        warnings.append(
            f"columns {clip_text(ignored)} are not canonical wide-form columns (<joint>/q, <joint>/qd, ...) "
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
    for j in colmap:
        for req in REQUIRED:
            if req not in colmap[j]:
                raise DatasetError(
                    f"{filename}: joint '{j}' has no '{j}/{req}' column (required; found for '{j}': "
                    f"{', '.join(colmap[j].values())}); add it, or use the long form"
                )
    return colmap


def _parse_wide(
    frame: pd.DataFrame, filename: str, warnings: list[str], lines: LineMap | None
) -> tuple[list[str], list[RawSegment]]:
    """Wide form: one row per sample, `<joint>/<channel>` columns."""
    colmap = _wide_columns(list(frame.columns), filename, warnings)
    t = _numeric(frame["t"], filename, "t", lines=lines)
    columns = {c: _numeric(frame[c], filename, c, lines=lines) for m in colmap.values() for c in m.values()}
    return list(colmap), _wide_raws(filename, colmap, t, columns, _groups(frame, filename, lines), lines)


def _wide_raws(
    filename: str,
    colmap: dict[str, dict[str, str]],
    t: np.ndarray,
    columns: dict[str, np.ndarray],
    groups: list[tuple[str | None, np.ndarray | slice]],
    lines: LineMap | None,
) -> list[RawSegment]:
    """Wide-form columns → one RawSegment per group; each column is dropped from `columns` once copied."""
    joints = list(colmap)
    unit = "line" if lines is not None else DATA_ROW
    present = {ch: [ch in colmap[j] for j in joints] for ch in TABLE_CHANNELS}
    groups, repeats = _drop_repeats(t, [columns[c] for m in colmap.values() for c in m.values()], groups)
    for seg, idx in groups:
        rows = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
        check_increasing(t[idx], rows + 1, where(filename, seg), unit, lines)
    data: list[dict[str, np.ndarray]] = [{} for _ in groups]
    for ch in READ_CHANNELS:
        if not any(ch in colmap[j] for j in joints):
            continue
        for d, (_, idx) in zip(data, groups, strict=True):
            n = idx.stop - idx.start if isinstance(idx, slice) else idx.size
            out = (np.ones if ch == ENABLE else np.zeros)((n, len(joints)))  # no enable column: driven
            for j, name in enumerate(joints):
                if ch in colmap[name]:
                    out[:, j] = columns[colmap[name][ch]][idx]
            d[ch] = out
        for name in joints:
            columns.pop(colmap[name].get(ch, ""), None)
    raws = []
    for (seg, idx), d, rep in zip(groups, data, repeats, strict=True):
        rows = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
        raws.append(
            RawSegment(
                seg or "", t[idx], rows + 1, d, present, seg is None, unit=unit, repeated=rep, lines=lines
            )
        )
    return raws


def _drop_repeats(
    t: np.ndarray, columns: list[np.ndarray], groups: list[tuple[str | None, np.ndarray | slice]]
) -> tuple[list[tuple[str | None, np.ndarray | slice]], list[np.ndarray]]:
    """The groups without the samples that repeat the one before exactly (stamp and every value: one sample
    logged twice), and per group the 1-based rows of the repeats dropped."""
    out: list[tuple[str | None, np.ndarray | slice]] = []
    repeats = []
    for seg, idx in groups:
        rep = repeated_records(t[idx], (c[idx] for c in columns))
        if rep.any():
            rows = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
            out.append((seg, rows[~rep]))
            repeats.append(rows[rep] + 1)
        else:
            out.append((seg, idx))
            repeats.append(np.zeros(0, np.int64))
    return out, repeats


# --------------------------------------------------------------------------------------------- writing

_RESERVED_META = (
    "source_file",
    "angle_unit",
    "angle_unit_declared",
    "timing",
    "resampling",
    "zero_angle",
)  # zero_angle: applied


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
    if any(s.enable is not None for s in rec.segments):
        channels.append(ENABLE)
    parts = []
    for s in rec.segments:
        if form == "long":
            cols: dict[str, Any] = {
                "t": np.repeat(s.t, J),
                "joint": np.tile(np.array(names, dtype=object), s.n),
            }
            cols.update({ch: _channel(s, ch, J).reshape(-1) for ch in channels})
        else:
            cols = {"t": s.t}
            for j, name in enumerate(names):
                cols.update({f"{name}/{ch}": _channel(s, ch, J)[:, j] for ch in channels})
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


def _channel(s: Segment, ch: str, n_joints: int) -> np.ndarray:
    """One channel of a segment as written, (T, J) float: the enable as 1/0 (driven throughout when None)."""
    if ch == ENABLE:
        e = s.enable if s.enable is not None else np.ones((s.n, n_joints), bool)
        return np.asarray(e, dtype=np.float64).reshape(s.n, n_joints)
    return np.asarray(getattr(s, ch), dtype=np.float64)


def _jsonable(x: Any) -> Any:
    """Plain-JSON copy of metadata (numpy scalars and arrays become numbers and lists)."""
    return json.loads(json.dumps(x, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


# Re-exported for callers that import everything (and the shared constants) from here.
__all__ = [
    "ANGLE_CHANNELS",
    "CHANNELS",
    "DEGREES_RANGE",
    "GAP_PERIODS",
    "JITTER_TOL",
    "JOINT_TYPES",
    "LOAD_FIELDS",
    "MIN_SAMPLES",
    "OPTIONAL",
    "REQUIRED",
    "TABLE_CHANNELS",
    "VELOCITY_METHOD",
    "DatasetError",
    "JointInfo",
    "Recording",
    "Segment",
    "load_sidecar",
    "read_table",
    "sidecar_for",
    "write_table",
]


def _read_source(src: Source, side: dict, kind: str) -> Recording:
    """One canonical table of the readers: a file on disk streams, an upload is parsed from its bytes."""
    body = src.path if src.data is None and src.path is not None else src.read_bytes()
    return read_table(body, src.name, metadata=side, fmt=kind)


def _read_csv_source(src: Source, side: dict, _opts: ReadOptions) -> Recording:
    return _read_source(src, side, "csv")


def _read_parquet_source(src: Source, side: dict, _opts: ReadOptions) -> Recording:
    return _read_source(src, side, "parquet")


register_reader("csv", _read_csv_source, sniff=None, binary=False, rank=10, label="canonical CSV/Parquet")
register_reader(
    "parquet",
    _read_parquet_source,
    sniff=lambda _src, head: head.startswith(PARQUET_MAGIC),
    binary=True,
    rank=20,
    label="canonical CSV/Parquet",
    accepts=("lerobot",),
)
