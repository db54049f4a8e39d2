"""Input files as the readers see them: a name for messages plus bytes or a path, and reader options.

A `Source` is one file, given as bytes (an upload) or as a path (the CLI, a folder, an unpacked zip), so a
reader can stream a large file from disk and still read an upload from memory. `ReadOptions` are the
facts a file may not carry itself (joint names, which topic or dataset is which, the step rate); they
come from the CLI flags, the upload form, or the sidecar's ``"reader"`` object.
"""

from __future__ import annotations

import io
import math
import os
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import IO

from .names import clip_text, quote_name
from .recording import DatasetError


@dataclass
class Source:
    """One input file: `name` for messages, and its bytes or its path."""

    name: str
    path: Path | None = None
    data: bytes | None = None

    def read_bytes(self) -> bytes:
        if self.data is None:
            assert self.path is not None
            try:
                self.data = self.path.read_bytes()
            except OSError as e:
                raise DatasetError(f"{self.name}: cannot read the file ({e.strerror})") from None
        return self.data

    def head(self, n: int = 4096) -> bytes:
        """The first `n` bytes (without reading a large file whole)."""
        if self.data is not None:
            return self.data[:n]
        assert self.path is not None
        with open(self.path, "rb") as f:
            return f.read(n)

    @property
    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None
        return self.path.stat().st_size

    def open(self) -> IO[bytes]:
        """A seekable binary stream over the file."""
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.path is not None
        return open(self.path, "rb")

    @contextmanager
    def local_path(self, suffix: str) -> Iterator[Path]:
        """A path on disk with the given suffix (libraries that only open paths); a temp copy for bytes."""
        if self.path is not None and self.path.suffix == suffix:
            yield self.path
            return
        with tempfile.TemporaryDirectory(prefix="actuator-sysid-") as tmp:
            p = Path(tmp) / f"input{suffix}"
            if self.data is not None:
                p.write_bytes(self.data)
            else:
                assert self.path is not None
                os.symlink(self.path.resolve(), p)
            yield p

    @property
    def stem(self) -> str:
        base = self.name.replace(":", "/").rsplit("/", 1)[-1]
        return base.rsplit(".", 1)[0] if "." in base else base


@dataclass
class ReadOptions:
    """What a file may not say itself; unset fields fall back to the sidecar's "reader" object."""

    fmt: str | None = None  # a FORMATS name, or None to detect from the content
    joint_names: list[str] | None = None  # PACE, Float64MultiArray commands, LeRobot/HDF5 without names
    state_topic: str | None = None  # ROS: the measured JointState topic
    command_topic: str | None = None  # ROS: JointState / JointTrajectory / Float64MultiArray commands
    positions: str | None = None  # HDF5: dataset of measured joint positions, e.g. "obs/joint_pos"
    targets: str | None = None  # HDF5: dataset of position targets, e.g. "actions"
    velocities: str | None = None  # HDF5: dataset of joint velocities (optional)
    rate_hz: float | None = None  # HDF5 (required), actuator-net CSV without time (default 50)

    def with_sidecar(self, side: dict, label: str = "sidecar") -> ReadOptions:
        """These options, with unset fields taken from `side["reader"]` (validated)."""
        extra = side.get("reader", {})
        if not isinstance(extra, dict):
            raise DatasetError(
                f'{label}: "reader" must be an object of reader options, got {clip_text(repr(extra), 200)}'
            )
        known = {f.name for f in fields(self)}
        unknown = sorted(set(extra) - known - {"format"})
        if unknown:
            raise DatasetError(
                f"{label}: unknown reader option(s) {clip_text(unknown, 200)}; known: {sorted(known)}"
            )
        given = {("fmt" if k == "format" else k): v for k, v in extra.items()}
        out = replace(self, **{k: v for k, v in given.items() if getattr(self, k) is None})
        out.validate(label)
        return out

    def validate(self, label: str = "options") -> None:
        if self.joint_names is not None:
            if isinstance(self.joint_names, str):
                self.joint_names = parse_names(self.joint_names)
            if not isinstance(self.joint_names, list) or not all(
                isinstance(n, str) and n.strip() for n in self.joint_names
            ):
                raise DatasetError(
                    f"{label}: joint_names must be a list of non-empty names, got {clip_text(repr(self.joint_names), 200)}"
                )
            self.joint_names = [n.strip() for n in self.joint_names]
            dup = sorted({n for n in self.joint_names if self.joint_names.count(n) > 1})
            if dup:
                raise DatasetError(
                    f"{label}: joint_names repeats {clip_text(dup, 200)}; each joint needs its own name"
                )
        for k in ("state_topic", "command_topic", "positions", "targets", "velocities", "fmt"):
            v = getattr(self, k)
            if v is not None and not isinstance(v, str):
                raise DatasetError(f"{label}: {k} must be a string, got {quote_name(v)}")
        if self.rate_hz is not None:
            r = self.rate_hz
            if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r) or r <= 0:
                raise DatasetError(
                    f"{label}: rate_hz must be a positive number of samples per second, got {quote_name(r)}"
                )
            self.rate_hz = float(r)


def parse_names(text: str | None) -> list[str] | None:
    """ "a, b,c" -> ["a", "b", "c"]; empty -> None."""
    if text is None:
        return None
    names = [s.strip() for s in str(text).split(",") if s.strip()]
    return names or None


def need_names(opts: ReadOptions, count: int, filename: str, what: str) -> list[str]:
    """The user's joint names for a file that has none; a clear error if missing or the wrong count."""
    if opts.joint_names is None:
        raise DatasetError(
            f"{filename}: {what} has {count} joint column(s) but no joint names; give them in the "
            f"articulation's order with --joint-names a,b,c (CLI) or the joint_names form field (upload)"
        )
    if len(opts.joint_names) != count:
        raise DatasetError(
            f"{filename}: {what} has {count} joint column(s) but {len(opts.joint_names)} joint name(s) were "
            f"given ({clip_text(', '.join(opts.joint_names), 200)}); give exactly {count}"
        )
    return list(opts.joint_names)


ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
"""The first bytes of a zip file (a local file header, or the end record of an empty zip)."""


def is_zip(head: bytes) -> bool:
    """Whether a file's first bytes are a zip's."""
    return head.startswith(ZIP_MAGICS)


MAX_ZIP_MEMBERS = 4096
"""Files (and folders) one zip may list."""
MAX_ZIP_DIRECTORY_BYTES = 4 << 20
"""Bytes a zip's table of contents may take (it is read whole when the zip is opened)."""


def _zip_directory(f: IO[bytes]) -> tuple[int, int] | None:
    """(entries, table-of-contents bytes) from a zip's end record (zip64 too), or None when it has none."""
    f.seek(0, 2)
    size = f.tell()
    n = min(size, 22 + 65535)
    f.seek(size - n)
    tail = f.read(n)
    i = tail.rfind(b"PK\x05\x06")
    if i < 0 or len(tail) - i < 22:
        return None
    entries, cd_bytes = struct.unpack("<HI", tail[i + 10 : i + 16])
    if (entries == 0xFFFF or cd_bytes == 0xFFFFFFFF) and i >= 20 and tail[i - 20 : i - 16] == b"PK\x06\x07":
        (offset,) = struct.unpack("<Q", tail[i - 12 : i - 4])
        f.seek(offset)
        rec = f.read(56)
        if rec[:4] == b"PK\x06\x06":
            entries, cd_bytes = struct.unpack("<QQ", rec[32:48])
    return entries, cd_bytes


@contextmanager
def open_zip(src: Source) -> Iterator[zipfile.ZipFile]:
    """The zip file, opened once its table of contents is known to be small: at most MAX_ZIP_MEMBERS entries
    in MAX_ZIP_DIRECTORY_BYTES (read from its end record before anything else); a damaged zip says so."""
    with src.open() as f:
        try:
            found = _zip_directory(f)
            f.seek(0)
            if found is None or (found[0] <= MAX_ZIP_MEMBERS and found[1] <= MAX_ZIP_DIRECTORY_BYTES):
                z = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, struct.error):
            raise DatasetError(
                f"{src.name}: looks like a zip file but cannot be opened; is it complete?"
            ) from None
        if found is not None and found[0] > MAX_ZIP_MEMBERS:
            raise DatasetError(
                f"{src.name}: the zip lists {found[0]} files; the limit is {MAX_ZIP_MEMBERS}; "
                "upload fewer files at once"
            )
        if found is not None and found[1] > MAX_ZIP_DIRECTORY_BYTES:
            raise DatasetError(
                f"{src.name}: the zip's table of contents takes {found[1]} bytes; the limit is "
                f"{MAX_ZIP_DIRECTORY_BYTES}"
            )
        with z:
            yield z


def unpack_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, budget: int, label: str) -> int:
    """Copy one member of `z` to `dest` block by block; DatasetError as soon as more than `budget` bytes come
    out (a zip's table of contents may understate them). Returns the bytes written."""
    n = 0
    with z.open(info) as r, open(dest, "wb") as w:
        while block := r.read(1 << 20):
            n += len(block)
            if n > budget:
                raise DatasetError(
                    f"{label}: unpacks to more than its limit of {budget} bytes at "
                    f"{clip_text(info.filename, 200)}; zip fewer or smaller files"
                )
            w.write(block)
    return n


def zip_names(src: Source) -> list[str]:
    """The member names of a zip file; a damaged or oversized zip is an error that says so."""
    with open_zip(src) as z:
        return z.namelist()


def head_text(head: bytes) -> str:
    """A text file's first bytes as text (BOM dropped, leading space stripped), for sniffing text formats."""
    return head.decode("utf-8-sig", errors="replace").lstrip()
