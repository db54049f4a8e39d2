"""Robot model uploads unpacked and imported with Newton in a spawned loader process (never in the API process),
as uploads are parsed (parsing.py): the zip checks, the model pick inside a zip, and the loader pool."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from ..datasets.names import clip_text
from ..datasets.sources import Source, open_zip, unpack_member
from ..files import json_safe
from ..models.robot import MJCF_SUFFIXES, URDF_SUFFIXES, USD_SUFFIXES, RobotError
from .parsing import ParserPool

MODEL_SUFFIXES = MJCF_SUFFIXES + URDF_SUFFIXES + USD_SUFFIXES
MAX_ZIP_RATIO = 20  # a zip may unpack to at most this many times the upload limit (a compression bomb stops)


def _safe_name(name: str) -> str:
    """A file name made of safe characters that keeps the model's suffix (the importer dispatches on it)."""
    base = re.sub(r"[^\w.-]", "_", name.rsplit("/", 1)[-1]).lstrip(".")
    return base[-120:] or "model"


def _zip_members(z: zipfile.ZipFile, name: str, limit: int) -> list[zipfile.ZipInfo]:
    """The zip's files, refused when they unpack too large or step outside the folder (open_zip bounds how
    many it lists)."""
    infos = [i for i in z.infolist() if not i.is_dir()]
    total = sum(i.file_size for i in infos)
    if total > limit:
        raise RobotError(f"{name}: the zip unpacks to {total} bytes; the limit is {limit} bytes")
    for i in infos:
        parts = i.filename.replace("\\", "/").split("/")
        if i.filename.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            raise RobotError(f"{name}: the zip member {i.filename[:200]!r} points outside the zip's folder")
        if (i.external_attr >> 16) & 0o170000 == 0o120000:
            raise RobotError(
                f"{name}: the zip member {i.filename[:200]!r} is a symbolic link; links are refused"
            )
    return infos


def _pick_model(names: list[str], zip_name: str, entry: str | None) -> str:
    """The model file in a zip: the one named by `entry`, else the only (or the only top-most) model file."""
    if entry:
        if entry not in names:
            raise RobotError(
                f"{zip_name}: model {entry!r} is not in the zip; its model files: "
                f"{', '.join(n for n in names if n.lower().endswith(MODEL_SUFFIXES))[:1000]}"
            )
        return entry
    found = [n for n in names if n.lower().endswith(MODEL_SUFFIXES)]
    if not found:
        raise RobotError(
            f"{zip_name}: the zip holds no robot model (MJCF .xml, URDF .urdf or USD "
            f"{', '.join(USD_SUFFIXES)})"
        )
    depth = min(n.count("/") for n in found)
    top = [n for n in found if n.count("/") == depth]
    if len(top) > 1:
        raise RobotError(
            f"{zip_name}: the zip holds several robot models ({', '.join(top[:20])}); name the one "
            "to load in the `model` form field"
        )
    return top[0]


def unpack(src: Path, name: str, dest: Path, entry: str | None, limit: int) -> tuple[Path, str | None]:
    """Put an uploaded model (one file, or a zip with its meshes) under `dest`: the model file, and its path
    inside the zip (None for a single file).

    A `.usdz` is a model itself; any other zip is unpacked (bounded, no links, nothing outside `dest`)."""
    is_zip = not name.lower().endswith(".usdz") and zipfile.is_zipfile(src)
    if not is_zip:
        if entry:
            raise RobotError(
                f"{name}: the `model` field names a file inside a zip, but the upload is not a zip"
            )
        target = dest / _safe_name(name)
        shutil.copyfile(src, target)
        return target, None
    with open_zip(Source(name, path=src)) as z:  # its table of contents bounded before it is read
        infos = _zip_members(z, name, limit)
        model = _pick_model([i.filename for i in infos], name, entry)
        left = limit
        for i in infos:  # block by block under the limit: the table of contents may understate the sizes
            target = dest / i.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            left -= unpack_member(z, i, target, left, name)
    return dest / model, model


def load_summary(
    path: str, name: str, entry: str | None, fixed_base: str | None, limit: int
) -> dict[str, Any]:
    """Loader-process entry: unpack the upload, import it with Newton, return its summary and load options."""
    from ..models.robot import load_robot

    work = Path(tempfile.mkdtemp(prefix="robot-"))
    try:
        model, inside = unpack(Path(path), name, work, entry, limit)
        robot = load_robot(model, fixed_base=fixed_base, root=work)  # reads nothing outside the upload
        summary = robot.summary()
        summary["path"] = name if inside is None else f"{name}/{inside}"  # not the loader's temp folder
        return {"summary": json_safe(summary), "options": {"model": inside, "fixed_base": fixed_base}}
    except RobotError as e:  # named by the upload's own paths, never the loader's temp folder
        raise RobotError(str(e).replace(f"{work}{os.sep}", "").replace(str(work), name)) from None
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        raise RobotError(f"{name}: cannot unpack this robot model ({type(e).__name__}: {e})") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


class RobotLoader(ParserPool):
    """Robot models imported in a spawned process (Newton's importers run there, never in the API process)."""

    async def load(
        self, path: Path, name: str, entry: str | None, fixed_base: str | None, limit: int
    ) -> dict[str, Any]:
        """Import the model in a loader process: RobotError as the importer says, 503 when the loader is stuck."""
        died = RobotError(
            f"{clip_text(name, 200)}: the model loader process stopped while importing this model (out of "
            "memory or a damaged file)"
        )
        args = (str(path), name, entry, fixed_base, limit)
        return await self.call(load_summary, *args, name=name, died=died)
