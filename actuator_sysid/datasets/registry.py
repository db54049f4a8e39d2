"""The log-reader registry: a reader is one module that calls `register_reader` once (issue 13).

A registration says everything the rest of the package needs about a format: its name (what `--format` and
the upload's `format` field accept) and aliases, how its content is recognised (`sniff`, from the file's
first bytes), the function that reads one file into a Recording, whether it is binary (a declared binary
format must match the content), and how the CLI's help names it. `datasets/readers.py` imports every reader
module (so each registers) and asks it, at call time, for the formats, their aliases and the sniffers.

This module imports no reader, so a reader importing it makes no cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .recording import DatasetError, Recording
from .sources import ReadOptions, Source

ReadFn = Callable[[Source, dict, ReadOptions], Recording]
"""Read one file of this format: (source, sidecar dict, options) -> Recording; errors are DatasetError."""
SniffFn = Callable[[Source, bytes], bool]
"""Whether a file is of this format, from the source and its first 4096 bytes."""


@dataclass(frozen=True)
class LogReader:
    """One registered log format."""

    name: str
    read: ReadFn
    sniff: SniffFn | None  # None: the fallback when nothing else is recognised (the canonical CSV)
    binary: bool  # recognised by its first bytes: a declared binary format must match the content
    rank: int  # the place in FORMATS (and the help text); binary sniffers run before text ones
    aliases: tuple[str, ...] = ()
    label: str = ""  # how the CLI's help names the file kind, e.g. "BAM JSON"; equal labels are said once
    refines: str | None = None  # a format this one is a special case of (LeRobot of Parquet): it wins the tie
    accepts: tuple[str, ...] = ()  # content kinds a file declared as this format may also show


_READERS: dict[str, LogReader] = {}


def register_reader(
    name: str,
    read: ReadFn,
    *,
    sniff: SniffFn | None,
    binary: bool,
    rank: int,
    aliases: tuple[str, ...] = (),
    label: str = "",
    refines: str | None = None,
    accepts: tuple[str, ...] = (),
) -> LogReader:
    """Register a log format (called once at the bottom of its reader module); a name or alias used twice is
    an error, so two modules cannot silently claim one format."""
    taken = {n for r in _READERS.values() for n in (r.name, *r.aliases)}
    clash = sorted({name, *aliases} & taken)
    if clash:
        raise ValueError(f"log format name(s) {clash} registered twice")
    reader = LogReader(name, read, sniff, binary, rank, tuple(aliases), label, refines, tuple(accepts))
    _READERS[name] = reader
    return reader


def unregister_reader(name: str) -> None:
    """Remove a registration (a test's temporary reader)."""
    _READERS.pop(name, None)


def readers() -> list[LogReader]:
    """Every registered reader, in rank order."""
    return sorted(_READERS.values(), key=lambda r: r.rank)


def reader(name: str) -> LogReader:
    """The reader of a registered format name."""
    try:
        return _READERS[name]
    except KeyError:
        raise DatasetError(f"cannot read format {name!r}") from None


def formats() -> tuple[str, ...]:
    """Registered format names in rank order."""
    return tuple(r.name for r in readers())


def aliases() -> dict[str, str]:
    """alias -> format name."""
    return {a: r.name for r in readers() for a in r.aliases}


def sniff(src: Source, head: bytes, binary: bool) -> str | None:
    """The first binary (or text) format in rank order whose sniffer recognises the file, a format that
    refines it winning when it also recognises it; None when none does."""
    for r in readers():
        if r.binary == binary and r.sniff is not None and r.sniff(src, head):
            special = [
                s for s in readers() if s.refines == r.name and s.sniff is not None and s.sniff(src, head)
            ]
            return special[0].name if special else r.name
    return None


def fallback() -> str:
    """The format of a file no sniffer recognises (the reader registered without one)."""
    return next(r.name for r in readers() if r.sniff is None)


def format_list() -> str:
    """The names as help text says them: "a, b, ... or z"."""
    names = formats()
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


def labels() -> str:
    """The file kinds as help text says them: "canonical CSV/Parquet, BAM JSON, ..."."""
    return ", ".join(dict.fromkeys(r.label for r in readers() if r.label))
