"""Block-streamed decoding of canonical CSV and Parquet tables, so a large log is held about once in memory.

A CSV is parsed by pyarrow's streaming reader block by block, a Parquet file row group by row group
(`iter_batches`); each block's numbers go straight into one float64 buffer per column (labels — joint,
segment — into int32 codes), and the block is dropped. The long/wide parsers then build each segment's
arrays one channel at a time, releasing every column once copied. Peak memory is about the decoded table
plus one block, instead of the file, its text parse and several copies.

Only clean tables stream: every cell a finite number except the labels. Anything else (an empty or
non-numeric cell, NaN, a repeated column name) raises `Unclean`, and the caller reads the file with the
whole-file text parser, whose errors name the file, column and line (`LineMap`: a data row's own line).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

import numpy as np

from .recording import DatasetError

LABELS = ("joint", "segment")
CSV_BLOCK_BYTES = 1 << 20
PARQUET_BATCH_ROWS = 8_192
MAX_LINE_BYTES = CSV_BLOCK_BYTES
"""A CSV line (the header too) may be at most this long: a wide table of 256 joints needs under a tenth of it,
and a longer line is refused while streaming, before it is held whole."""


class Unclean(Exception):
    """The streamed decoder cannot take this table; the whole-file parser will say what is wrong."""


class _Floats:
    """A growable numeric column (float64, or int32 for label codes), or a (rows, width) matrix of columns."""

    def __init__(self, cap: int, dtype: type = np.float64, width: int | None = None) -> None:
        self.width = width
        self.buf: np.ndarray = np.zeros(
            (max(cap, 16),) + ((width,) if width else ()), dtype
        )  # untouched pages cost nothing
        self.n = 0

    def reserve(self, rows: int) -> None:
        """Room for `rows` more rows (grown by a quarter at least, so growth is rare)."""
        if self.n + rows > self.buf.shape[0]:
            grown = np.zeros(
                (max(int(self.buf.shape[0] * 1.25), self.n + rows),) + self.buf.shape[1:], self.buf.dtype
            )
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown

    def extend(self, a: np.ndarray) -> None:
        self.reserve(a.size)
        self.buf[self.n : self.n + a.size] = a
        self.n += a.size

    def array(self) -> np.ndarray:
        """The values: a view of the buffer (its unused tail was never written, so it is not resident)."""
        return self.buf[: self.n]


@dataclass
class _Labels:
    """A label column as int32 codes into `names`, in order of first appearance."""

    codes: _Floats
    names: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def extend(self, arr) -> None:  # noqa: ANN001 - a pyarrow array
        import pyarrow as pa
        import pyarrow.compute as pc

        if arr.null_count:
            raise Unclean("a missing label")
        enc = pc.utf8_trim_whitespace(arr.cast(pa.string())).dictionary_encode()
        local = []
        for v in enc.dictionary.to_pylist():
            if v not in self.index:
                self.index[v] = len(self.names)
                self.names.append(v)
            local.append(self.index[v])
        self.codes.extend(np.asarray(local, np.int32)[enc.indices.to_numpy(zero_copy_only=False)])


@dataclass
class Columns:
    """A decoded table: float64 columns and label columns (codes, names), under stripped column names."""

    names: list[str]
    floats: dict[str, np.ndarray]
    labels: dict[str, tuple[np.ndarray, list[str]]]
    rows: int


def long_line(
    source: Path | bytes, limit: int = MAX_LINE_BYTES, lines: int | None = None
) -> tuple[int, int] | None:
    """(line number from 1, its length so far) of the first line longer than `limit` bytes among the first
    `lines` (None: all), else None. The file is scanned in blocks, so a line of any length is found without
    holding it."""
    f = open(source, "rb") if isinstance(source, Path) else None
    view = memoryview(source) if isinstance(source, bytes) else None
    line, run, pos = 1, 0, 0  # run: bytes of the current line seen so far
    try:
        while True:
            block: bytes | memoryview
            if f is not None:
                block = f.read(CSV_BLOCK_BYTES)
            else:
                assert view is not None
                block = view[pos : pos + CSV_BLOCK_BYTES]
                pos += len(block)
            if not len(block):
                return None
            ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
            if ends.size == 0:
                run += len(block)
                if run > limit:
                    return line, run
                continue
            lengths = np.diff(ends, prepend=-1) - 1
            lengths[0] += run
            over = np.flatnonzero(lengths > limit)
            if over.size:
                return line + int(over[0]), int(lengths[over[0]])
            line += ends.size
            if lines is not None and line > lines:
                return None
            run = len(block) - int(ends[-1]) - 1
            if run > limit:
                return line, run
    finally:
        if f is not None:
            f.close()


def check_lines(
    source: Path | bytes, filename: str, limit: int = MAX_LINE_BYTES, lines: int | None = None
) -> None:
    """DatasetError when one of the first `lines` lines (None: any) of a CSV is longer than `limit` bytes."""
    found = long_line(source, limit, lines)
    if found is not None:
        line, length = found
        what = "the header (line 1)" if line == 1 else f"line {line}"
        raise DatasetError(
            f"{filename}: {what} is longer than {limit} bytes ({length} bytes or more); a canonical CSV has one "
            "sample per line and a header of column names; is this a CSV log?"
        )


class LineMap:
    """The file's own line number of each data row of a CSV table, as an editor shows it: the header, blank
    lines (whitespace only, which the text parser skips) and the extra lines of a quoted field that spans lines
    all count. Messages name lines, not data rows, so a user can go to the line.

    The file is scanned on first use only (a clean table never needs it), block by block, and held as the data
    rows where the count jumps (a blank line, a multi-line field): a clean file is one entry.
    """

    def __init__(self, source: Path | bytes) -> None:
        self.source = source
        self._rows: np.ndarray | None = None  # data rows (0: the header) where the line offset changes
        self._offsets = np.zeros(0, np.int64)  # line − data row from each of them on

    @overload
    def __call__(self, rows: int) -> int: ...
    @overload
    def __call__(self, rows: np.ndarray) -> np.ndarray: ...
    def __call__(self, rows: int | np.ndarray) -> int | np.ndarray:
        """1-based data row(s) → 1-based file line(s)."""
        if self._rows is None:
            self._rows, self._offsets = _scan_lines(self.source)
        r = np.asarray(rows, dtype=np.int64)
        k = np.maximum(np.searchsorted(self._rows, r, side="right") - 1, 0)
        out = r + (self._offsets[k] if self._offsets.size else 1)
        return int(out) if out.ndim == 0 else out


def _line_blocks(source: Path | bytes, end: bytes) -> Iterator[bytes]:
    """A file's bytes in blocks of whole lines ending in `end` (the last block may end without one)."""
    f = open(source, "rb") if isinstance(source, Path) else None
    try:
        pos, tail = 0, b""
        while True:
            if f is not None:
                block = f.read(CSV_BLOCK_BYTES)
            else:
                assert isinstance(source, bytes)
                block = source[pos : pos + CSV_BLOCK_BYTES]
                pos += len(block)
            if not block:
                if tail:
                    yield tail
                return
            block = tail + block
            cut = block.rfind(end) + 1
            block, tail = block[:cut], block[cut:]
            if block:
                yield block
    finally:
        if f is not None:
            f.close()


def _scan_lines(source: Path | bytes) -> tuple[np.ndarray, np.ndarray]:
    """(data rows, offsets) of `LineMap`: where line − data row changes, over the whole file."""
    if isinstance(source, Path):
        with open(source, "rb") as f:
            head = f.read(65536)
    else:
        head = source[:65536]
    end = b"\n" if b"\n" in head or b"\r" not in head else b"\r"  # an old Mac file ends lines with CR alone
    header = head.lstrip().split(end, 1)[0]
    sep = b"," if b"," in header else b";" if b";" in header else b"\t" if b"\t" in header else b","
    blank_chars = b" \t\r\n".replace(sep, b"")  # white space, less the separator: a line of them is skipped
    white = np.frombuffer(blank_chars, np.uint8)
    line, record, quotes, last = 0, 0, 0, -1  # lines and records so far, quote parity, the last offset
    rows: list[np.ndarray] = [np.zeros(0, np.int64)]
    offsets: list[np.ndarray] = [np.zeros(0, np.int64)]
    for k, block in enumerate(_line_blocks(source, end)):
        if k == 0 and block.startswith(b"\xef\xbb\xbf"):
            block = b"   " + block[3:]  # the byte order mark is not text
        buf = np.frombuffer(block, np.uint8)
        ends = np.flatnonzero(buf == end[0])
        if ends.size == 0 or ends[-1] != buf.size - 1:
            ends = np.append(ends, buf.size)  # the file's last line, without a line end
        starts = np.concatenate([[0], ends[:-1] + 1])
        q = np.flatnonzero(buf == ord('"'))
        inside = (np.searchsorted(q, starts) + quotes) % 2 == 1  # the line starts inside a quoted field
        quotes = (quotes + q.size) % 2
        first = np.where(starts < ends, buf[np.minimum(starts, buf.size - 1)], white[0])
        blank = np.zeros(starts.size, bool)
        maybe = np.flatnonzero(
            np.isin(first, white) & ~inside
        )  # few lines start with white space: check those
        for i in maybe.tolist():
            blank[i] = not block[starts[i] : ends[i]].strip(blank_chars)
        at = np.flatnonzero(~inside & ~blank)  # the lines where a record starts
        data_row = record + np.arange(at.size)  # record 1 (the header) is data row 0
        off = line + at + 1 - data_row
        change = np.flatnonzero(np.diff(off, prepend=last) != 0)
        rows.append(data_row[change])
        offsets.append(off[change])
        last = int(off[-1]) if off.size else last
        line += starts.size
        record += at.size
    return np.concatenate(rows), np.concatenate(offsets)


def _csv_header(head: bytes) -> tuple[list[str], str]:
    """Raw column names of a CSV's first line and its delimiter (as the whole-file parser guesses it)."""
    line = head.decode("utf-8-sig", errors="replace").lstrip().split("\n", 1)[0].rstrip("\r")
    sep = "," if "," in line else ";" if ";" in line else "\t" if "\t" in line else ","
    return next(csv.reader([line], delimiter=sep)), sep


def _batches(source: Path | bytes, fmt: str) -> tuple[list[str], int, Iterator, Callable[[], None]]:
    """(raw column names, row count or -1, record batches, close) of a CSV or Parquet file or bytes.

    Arrow reads through its own file objects (not Python ones), so an abandoned reader holds no Python state.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    native = pa.BufferReader(source) if isinstance(source, bytes) else pa.OSFile(str(source))
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(native, pre_buffer=False)  # pre-buffering would hold whole row groups
            return (
                list(pf.schema_arrow.names),
                pf.metadata.num_rows,
                pf.iter_batches(batch_size=PARQUET_BATCH_ROWS),
                native.close,
            )
        head = source[:65536] if isinstance(source, bytes) else native.read(65536)
        native.seek(0)
        raw, sep = _csv_header(head)
        types = {c: (pa.string() if c.strip() in LABELS else pa.float64()) for c in raw}
        reader = pcsv.open_csv(
            native,
            read_options=pcsv.ReadOptions(block_size=CSV_BLOCK_BYTES, use_threads=False),
            parse_options=pcsv.ParseOptions(delimiter=sep),
            convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=True),
        )
        return list(reader.schema.names), -1, iter(reader), native.close
    except (pa.ArrowException, OSError, UnicodeDecodeError, ValueError, StopIteration) as e:
        native.close()
        raise Unclean(str(e)) from None


Layout = Callable[[list[str]], dict[str, tuple[str, int, int]]]
"""Given the column names, where numeric columns go: {column: (matrix, column index, matrix width)}."""


def decode(source: Path | bytes, fmt: str, size: int, layout: Layout | None = None) -> Columns:
    """Decode a clean CSV or Parquet table block by block; raises Unclean for anything else.

    `layout` (called once, at the first block) sends numeric columns straight into (rows, width) matrices,
    so a wide table's channels are built without an intermediate copy; other columns stay 1-D.
    """

    raw, rows, batches, close = _batches(source, fmt)
    try:
        return _decode(raw, rows, batches, size, layout)
    finally:
        close()


def _decode(raw: list[str], rows: int, batches: Iterator, size: int, layout: Layout | None) -> Columns:
    import pyarrow as pa

    names = [c.strip() for c in raw]
    if len(set(names)) != len(names) or not names:
        raise Unclean("repeated or missing column names")
    place: dict[str, tuple[str, int, int]] = {}
    store: dict[str, _Floats] = {}
    labels: dict[str, _Labels] = {}
    n = 0
    try:
        for batch in batches:
            if not store and not labels:  # size the buffers from the first block
                est = (
                    rows if rows >= 0 else int(batch.num_rows * max(size / CSV_BLOCK_BYTES, 1.0) * 1.02) + 16
                )
                place = layout(names) if layout is not None else {}
                for name in names:
                    if name in LABELS:
                        labels[name] = _Labels(_Floats(est, np.int32))
                    elif name in place:
                        key, _, width = place[name]
                        store.setdefault(key, _Floats(est, width=width))
                    else:
                        store[name] = _Floats(est)
            k = batch.num_rows
            for buf in store.values():
                buf.reserve(k)
            for name, col in zip(names, batch.columns, strict=True):
                if name in labels:
                    labels[name].extend(col)
                    continue
                if col.null_count or not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
                    raise Unclean(f"column {name}: empty or non-numeric cells")
                a = col.to_numpy(zero_copy_only=False)
                if not np.isfinite(a).all():
                    raise Unclean(f"column {name}: NaN or inf")
                if name in place:
                    key, j, _ = place[name]
                    store[key].buf[n : n + k, j] = a
                else:
                    store[name].buf[n : n + k] = a
            n += k
            for buf in store.values():
                buf.n = n
    except (pa.ArrowException, UnicodeDecodeError, ValueError) as e:
        raise Unclean(str(e)) from None
    if n == 0:
        raise Unclean("no rows")
    out_l = {key: (v.codes.array(), v.names) for key, v in labels.items()}
    return Columns(names, {key: v.array() for key, v in store.items()}, out_l, n)
