"""One entry point for every log format: detect by content, read, and merge several files into one Recording.

`read_paths` (the CLI: files, folders, zips) and `read_upload` (the service: one uploaded file, which may
be a zip) both end in `read_sources`. The format of each file is detected from its content
(`detect_format`) unless the user names it (`ReadOptions.fmt`, one of FORMATS). Files of one format that
belong together are read together (BAM runs; a LeRobot dataset's Parquet files); other files are read one
by one and merged: their joints must match, and segment names get the file's stem as a prefix when two
files use the same name. A folder or zip holding a ROS 2 bag (``metadata.yaml``) or a LeRobot dataset
(``meta/info.json``) is read as that. A canonical table's sidecar may sit beside it as ``<stem>.json``.
"""

from __future__ import annotations

import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

# every reader module registers its format on import (datasets/registry.py); this line is what loads them
from . import bam, canonical, isaaclab_hdf5, lerobot, pace, registry, ros, walk_these_ways  # noqa: F401
from .assemble import resampling_meta
from .jsontext import loads_bounded
from .names import clip_text, quote_name, safe_name
from .recording import DatasetError, Recording
from .sources import ReadOptions, Source, is_zip, open_zip, unpack_member

FORMATS = registry.formats()
"""Names accepted by --format and the upload's format field (from the registry, in rank order; the functions
below ask the registry itself, so a reader registered later is read too)."""
MAX_UNPACKED_BYTES = 2**30
"""A zip may unpack to at most this much (to a temporary folder, never into memory), guarding against zip bombs;
checked from its table of contents before unpacking and again while unpacking."""
JUNK = ("__MACOSX/", ".DS_Store", "Thumbs.db")


def normalize_format(fmt: str | None) -> str | None:
    """A user's format name -> a FORMATS name (None: detect); unknown names are an error listing the known."""
    if fmt is None or not str(fmt).strip():
        return None
    f = str(fmt).strip().lower()
    names = registry.formats()
    if f in names:
        return f
    aliases: dict[str, str | None] = {"canonical": None, **registry.aliases()}
    if f in aliases:
        return aliases[f]
    raise DatasetError(
        f"unknown format {quote_name(fmt)}; use one of {', '.join(names)}, or leave it empty to detect "
        "it from the content"
    )


def detect_format(src: Source) -> str:
    """The format of one file from its first bytes (and, for Parquet and zips, their table of contents):
    the registered binary sniffers, then "zip" for any other zip, then the text sniffers, else the fallback."""
    head = src.head(4096)
    binary = registry.sniff(src, head, binary=True)
    if binary is not None:
        return binary
    if is_zip(head):
        return "zip"
    return registry.sniff(src, head, binary=False) or registry.fallback()


def read_table(
    data: bytes | Path,
    filename: str,
    metadata: dict | str | bytes | Path | None = None,
    fmt: str | None = None,
    *,
    any_format: bool = False,
    **reader_options: Any,
) -> Recording:
    """Parse a table or log (bytes or a path) plus sidecar metadata into a Recording.

    Canonical CSV/Parquet go to `canonical.read_table` (`fmt` "csv", "parquet" or None). With
    `any_format=True`, or `fmt` naming another format (FORMATS), every log format is read (detected from
    the content when `fmt` is None; a zip may hold several files), and `reader_options` are `ReadOptions`
    fields such as ``joint_names=["a", "b"]`` or ``state_topic="/joint_states"``.
    """
    if (
        any_format
        or reader_options
        or (fmt is not None and str(fmt).strip().lower() not in ("csv", "parquet"))
    ):
        opts = ReadOptions(fmt=fmt, **{k: v for k, v in reader_options.items() if v is not None})
        opts.validate()
        src = Source(filename, path=data) if isinstance(data, Path) else Source(filename, data=bytes(data))
        if src.size == 0:
            raise DatasetError(f"{filename}: the file is empty; upload a joint log")
        return read_sources([src], canonical.load_sidecar(metadata), opts, label=filename)
    return canonical.read_table(data, filename, metadata, fmt)


def read_log(path: Path, sidecar: Path | None = None, fmt: str | None = None) -> Recording:
    """Read a table from disk with its sidecar (default: `<path>.json`, else `<stem>.json`)."""
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


# --------------------------------------------------------------------------------------------- entry points


def read_paths(
    paths: Sequence[Path], sidecar: Path | None = None, options: ReadOptions | None = None
) -> Recording:
    """Read files, folders or zips from disk (the CLI) into one Recording.

    The sidecar defaults to ``<file>.json`` or ``<stem>.json`` beside a single canonical table.
    """
    opts = options or ReadOptions()
    paths = [Path(p) for p in paths]
    if not paths:
        raise DatasetError("no input files given")
    for p in paths:
        if not p.exists():
            raise DatasetError(f"{p}: file not found; check the path")
    if sidecar is not None and not Path(sidecar).is_file():
        raise DatasetError(f"{sidecar}: sidecar file not found; check the path or leave it out")
    if sidecar is None and len(paths) == 1 and paths[0].is_file():
        sidecar = _sidecar_beside(paths[0])
    side = canonical.load_sidecar(Path(sidecar)) if sidecar is not None else None
    sources: list[Source] = []
    for p in paths:
        if p.is_dir():
            sources.extend(_dir_sources(p))
        else:
            sources.append(Source(p.name if len(paths) == 1 else str(p), path=p))
    return read_sources(sources, side, opts, label=", ".join(str(p) for p in paths))


def _sidecar_beside(path: Path) -> Path | None:
    """`<file>.json` or `<stem>.json` next to a log, unless that file is itself a log (a BAM run)."""
    for cand in (path.with_name(path.name + ".json"), path.with_suffix(".json")):
        if cand != path and cand.is_file():
            try:
                obj = loads_bounded(cand.read_bytes(), cand.name)
            except (DatasetError, OSError):
                return cand  # load_sidecar reports the problem
            if not (isinstance(obj, dict) and "entries" in obj):
                return cand
    return None


def read_upload(
    data: bytes, filename: str, metadata: dict | str | bytes | None = None, options: ReadOptions | None = None
) -> Recording:
    """Read one uploaded file (possibly a zip of several) into one Recording (the service)."""
    if not data:
        raise DatasetError(f"{filename}: the uploaded file is empty; choose a file with a header and rows")
    side = canonical.load_sidecar(metadata)
    return read_sources([Source(filename, data=data)], side, options or ReadOptions(), label=filename)


def _dir_sources(folder: Path) -> list[Source]:
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and not _junk(p.relative_to(folder).as_posix())
    )
    if not files:
        raise DatasetError(f"{folder}: the folder holds no files")
    return [Source(p.relative_to(folder).as_posix(), path=p) for p in files]


def _base(name: str) -> str:
    """The file name without folders (or the zip's name before ':')."""
    return name.replace(":", "/").rsplit("/", 1)[-1]


def _junk(name: str) -> bool:
    base = PurePosixPath(name).name
    return name.startswith(JUNK[0]) or f"/{JUNK[0]}" in name or base in JUNK[1:] or base.startswith("._")


def read_sources(sources: list[Source], side: dict | None, opts: ReadOptions, label: str) -> Recording:
    """Read a set of input files (already named) into one Recording."""
    side = dict(side or {})
    opts = opts.with_sidecar(side)
    opts.fmt = normalize_format(opts.fmt)
    side.pop("reader", None)
    # a single zip: unpack and read what is inside
    if len(sources) == 1 and opts.fmt not in ("pace",) and detect_format(sources[0]) == "zip":
        return _read_zip(sources[0], side, opts)
    names = {s.name for s in sources}
    # a ROS 2 bag folder or a LeRobot dataset folder
    if any(_base(s.name) == "metadata.yaml" for s in sources) and opts.fmt in (None, "rosbag", "mcap"):
        bag = [s for s in sources if s.name.endswith((".db3", ".mcap"))]
        if len(bag) != 1:
            raise DatasetError(
                f"{label}: a ROS 2 bag folder with {len(bag)} storage files; upload one bag with "
                "one .db3 or .mcap file"
            )
        return _read_one(bag[0], side, opts, "mcap" if bag[0].name.endswith(".mcap") else "rosbag")
    info_src = next((s for s in sources if s.name.endswith("meta/info.json")), None)
    if info_src is not None and opts.fmt in (None, "lerobot"):
        info = loads_bounded(info_src.read_bytes(), info_src.name)
        parquets = [s for s in sources if s.name.endswith(".parquet")]
        if not parquets:
            raise DatasetError(
                f"{label}: a LeRobot dataset (meta/info.json) without Parquet files under data/"
            )
        from .lerobot import read_lerobot

        return read_lerobot(parquets, info if isinstance(info, dict) else None, side, opts, label)
    # group files by format; a canonical table's <stem>.json beside it is its sidecar
    kinds: dict[str, str] = {}
    for s in sources:
        kinds[s.name] = opts.fmt or detect_format(s)
    sidecars: dict[str, Source] = {}
    if len(sources) > 1:
        for s in sources:
            if kinds[s.name] != "bam":
                for cand in (s.name + ".json", s.name.rsplit(".", 1)[0] + ".json"):
                    if cand in names and cand != s.name:
                        sidecars[s.name] = next(x for x in sources if x.name == cand)
        for sc in sidecars.values():
            kinds.pop(sc.name, None)
    if "zip" in kinds.values():
        bad = next(n for n, k in kinds.items() if k == "zip")
        raise DatasetError(f"{bad}: a zip inside several inputs; unpack it or upload it alone")
    groups: dict[str, list[Source]] = {}
    for s in sources:
        if s.name in kinds:
            groups.setdefault(kinds[s.name], []).append(s)
    parts: list[tuple[str, Recording]] = []
    multi = len(kinds) > 1
    seg_side = side.get("segments") if multi else None
    file_side = {k: v for k, v in side.items() if k != "segments"} if multi else side
    for kind, group in groups.items():
        if kind == "bam":
            from .bam import read_bam

            parts.append((group[0].name if len(group) == 1 else "BAM", read_bam(group, file_side, opts)))
            continue
        if kind == "lerobot" and len(group) > 1:
            from .lerobot import read_lerobot

            parts.append(("LeRobot", read_lerobot(group, None, file_side, opts, label)))
            continue
        for s in group:
            own = file_side
            if s.name in sidecars:
                own = {**file_side, **canonical.load_sidecar(sidecars[s.name].read_bytes())}
            parts.append((safe_name(s.stem), _read_one(s, own, opts, kind)))  # a file name: made a name
    if not parts:
        raise DatasetError(f"{label}: no joint log among the inputs")
    rec = parts[0][1] if len(parts) == 1 else merge(parts)
    if seg_side:
        _apply_segment_side(rec, seg_side, label)
    return rec.check_names(label)  # merged segment names too


def _read_one(src: Source, side: dict, opts: ReadOptions, kind: str) -> Recording:
    """Read one file of a known format with its registered reader."""
    if kind not in registry.formats():
        raise DatasetError(f"{src.name}: cannot read format {kind!r}")
    spec = registry.reader(kind)
    if opts.fmt is not None and spec.binary:
        seen = detect_format(src)
        if seen != kind and seen not in spec.accepts:
            raise DatasetError(
                f"{src.name}: declared format {kind}, but the content is not {kind} (it looks like "
                f"{seen}); leave the format empty to detect it"
            )
    return spec.read(src, side, opts)


def _read_zip(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """Unpack a zip to a temporary folder and read its files as one set.

    Bounded before anything is unpacked (the table of contents: MAX_ZIP_MEMBERS files, MAX_UNPACKED_BYTES in
    all) and while unpacking (each file is copied block by block and stops at what is left of the limit)."""
    with open_zip(src) as z, tempfile.TemporaryDirectory(prefix="actuator-sysid-zip-") as tmp:
        infos = [i for i in z.infolist() if not i.is_dir() and not _junk(i.filename)]
        if not infos:
            raise DatasetError(f"{src.name}: the zip holds no files")
        total = sum(i.file_size for i in infos)
        if total > MAX_UNPACKED_BYTES:
            raise DatasetError(
                f"{src.name}: unpacks to {total} bytes, over the {MAX_UNPACKED_BYTES} byte limit; "
                "upload fewer or smaller files at once"
            )
        prefix = _common_folder([i.filename for i in infos])
        inner, left = [], MAX_UNPACKED_BYTES
        for k, i in enumerate(infos):
            suffix = PurePosixPath(i.filename).suffix
            path = Path(tmp) / f"{k}{suffix if suffix[1:].isalnum() and len(suffix) <= 16 else ''}"
            try:
                left -= unpack_member(z, i, path, left, src.name)
            except DatasetError:
                raise
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as e:
                raise DatasetError(
                    f"{src.name}: cannot unpack {clip_text(i.filename, 200)} ({clip_text(e, 200)})"
                ) from None
            inner.append(Source(f"{src.name}:{i.filename[len(prefix) :]}", path=path))
        if len(inner) == 1 and detect_format(inner[0]) == "zip":
            raise DatasetError(f"{inner[0].name}: a zip inside a zip; upload the inner zip itself")
        return read_sources(inner, side, opts, label=src.name)


def _common_folder(names: list[str]) -> str:
    """The folder every name is in ("a/" for a/x, a/y), so a zipped folder reads like its content."""
    parts = [n.split("/") for n in names]
    if all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        return parts[0][0] + "/"
    return ""


# --------------------------------------------------------------------------------------------- merging


def merge(parts: list[tuple[str, Recording]]) -> Recording:
    """Several recordings of the same joints -> one; segment names get "<stem>/" when they would clash."""
    first_label, first = parts[0]
    names = first.joint_names
    for label, rec in parts[1:]:
        if sorted(rec.joint_names) != sorted(names):
            raise DatasetError(
                f"{label}: joints {clip_text(rec.joint_names, 200)} differ from {first_label}'s {clip_text(names, 200)}; every file "
                "of one dataset must log the same joints"
            )
    all_names = [s.name for _, r in parts for s in r.segments]
    clash = len(set(all_names)) != len(all_names)
    runs = [{str(s.metadata.get("recording", s.name)) for s in r.segments} for _, r in parts]
    shared_runs = {x for i, a in enumerate(runs) for b in runs[i + 1 :] for x in a & b}
    segments, timing = [], {}
    formats, velocity = [], []
    for label, rec in parts:
        order = [rec.joint_index(n) for n in names]
        for s in rec.segments:
            new = f"{label}/{s.name}" if clash else s.name
            if order != list(range(len(names))):
                for ch in ("q", "qd", "q_des", "qd_des", "tau_ff", "tau"):
                    a = getattr(s, ch)
                    if a is not None:
                        setattr(s, ch, a[:, order])
            meta = dict(s.metadata)
            if "recording" in meta and str(meta["recording"]) in shared_runs:  # two files' runs stay two
                meta["recording"] = f"{label}/{meta['recording']}"
            for info in rec.joints:  # a file's own loads travel with its segments
                own = {
                    "inertia": info.inertia,
                    "mass": info.mass,
                    "com_distance": info.com_distance,
                    "gravity": info.gravity,
                }
                base = first.joints[first.joint_index(info.name)]
                if (base.inertia, base.mass, base.com_distance, base.gravity) != tuple(own.values()):
                    meta.setdefault("joints", {}).setdefault(info.name, {})
                    meta["joints"][info.name] = {**own, **meta["joints"][info.name]}
            s.metadata = meta
            timing[new] = rec.metadata.get("timing", {}).get(s.name, {})
            s.name = new
            segments.append(s)
        formats.append(rec.source_format)
        velocity.append(rec.velocity_source)
    fmts = sorted(set(formats))
    vel = list(dict.fromkeys(velocity))
    meta = {k: v for k, v in first.metadata.items() if k not in ("timing", "resampling", "source_file")}
    meta["source_file"] = [label for label, _ in parts]
    meta["timing"] = timing
    resampling = resampling_meta(timing)  # one rate over every file's segments, not the first file's
    if resampling:
        meta["resampling"] = resampling
    return Recording(
        joints=first.joints,
        segments=segments,
        source_format=fmts[0] if len(fmts) == 1 else "mixed: " + ", ".join(fmts),
        velocity_source=vel[0] if len(vel) == 1 else "; ".join(vel),
        warnings=merge_warnings(parts),
        metadata=meta,
    )


def merge_warnings(parts: list[tuple[str, Recording]]) -> list[str]:
    """The files' warnings, each once: one that several files give in the same words but for the file's own
    name is given once, naming how many files and a few of them, so a log of many files reads as one dataset."""
    files: dict[str, list[str]] = {}  # the warning with its file's name as a hole -> the files that gave it
    for _, rec in parts:
        source = rec.metadata.get("source_file")
        src = source if isinstance(source, str) and source else None
        for w in rec.warnings:
            named = src is not None and src in w
            key = w.replace(src, "\0") if src is not None and named else w
            seen = files.setdefault(key, [])
            if src is not None and named and src not in seen:
                seen.append(src)
    out = []
    for key, names in files.items():
        if len(names) > 1:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            key = key.replace("\0", f"{len(names)} files ({shown})", 1)
        out.append(key.replace("\0", names[0] if len(names) == 1 else "each"))
    return out


def _apply_segment_side(rec: Recording, seg_side: dict, label: str) -> None:
    names = [s.name for s in rec.segments]
    for name, meta in seg_side.items():
        if name not in names:
            raise DatasetError(
                f"sidecar for {label}: segment {quote_name(name)} does not exist; the segments are {clip_text(names, 300)}"
            )
        seg = rec.segments[names.index(name)]
        seg.metadata = {**seg.metadata, **meta}
