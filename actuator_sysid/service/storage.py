"""Files under the data folder: one folder per dataset and per fit, every file written atomically.

    data_dir/datasets/<id>/  recording.json, arrays.npz (Recording.save), original.bin (the upload's bytes)
    data_dir/fits/<id>/      fit.json, report_data.json, isaaclab.py, isaaclab.json

Ids are uuid hex made by the service; user-supplied names never become paths.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from ..datasets.recording import Recording
from .db import NotFoundError

_ID = re.compile(r"[0-9a-f]{32}")


def new_id() -> str:
    return uuid.uuid4().hex


def json_safe(obj: Any) -> Any:
    """Replace NaN/±inf by None (recursively) so the object is strict JSON that browsers can parse."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return json_safe(obj.tolist())
    return obj


def dumps(obj: Any) -> str:
    """Strict JSON text of a plain object (non-finite numbers become null)."""
    return json.dumps(json_safe(obj), indent=1, allow_nan=False)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so readers see the old content or the new, never half: temp file + fsync + os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_files(folder: Path, files: dict[str, str | bytes]) -> None:
    """Write several named files into one folder, each atomically."""
    for name, data in files.items():
        write_atomic(folder / name, data)


class Storage:
    """The data folder: datasets and fit artifacts."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir)
        self.datasets = self.root / "datasets"
        self.fits = self.root / "fits"
        self.datasets.mkdir(parents=True, exist_ok=True)
        self.fits.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _check(kind: str, item_id: str) -> str:
        if not _ID.fullmatch(item_id):
            raise NotFoundError(f"{kind} {item_id!r} not found: ids are 32 lowercase hex digits")
        return item_id

    def dataset_dir(self, dataset_id: str) -> Path:
        return self.datasets / self._check("dataset", dataset_id)

    def fit_dir(self, fit_id: str) -> Path:
        return self.fits / self._check("fit", fit_id)

    def save_dataset(self, dataset_id: str, rec: Recording, original: bytes) -> str:
        """Store an already-parsed recording and its upload bytes; the folder appears whole or not at all.

        Returns the folder relative to the data dir (what the database keeps).
        """
        final = self.dataset_dir(dataset_id)
        tmp = self.datasets / f".tmp-{dataset_id}"
        try:
            rec.save(tmp)
            write_atomic(tmp / "original.bin", original)
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final.relative_to(self.root).as_posix()

    def remove_dataset(self, dataset_id: str) -> None:
        """Undo `save_dataset` (used when the database insert after it fails)."""
        shutil.rmtree(self.dataset_dir(dataset_id), ignore_errors=True)

    def load_recording(self, dataset_id: str) -> Recording:
        folder = self.dataset_dir(dataset_id)
        if not (folder / "recording.json").is_file():
            raise NotFoundError(f"the files of dataset {dataset_id!r} are missing from {self.datasets}")
        return Recording.load(folder)

    def save_fit(self, fit_id: str, files: dict[str, str | bytes]) -> None:
        write_files(self.fit_dir(fit_id), files)

    def read_fit_file(self, fit_id: str, name: str) -> str:
        path = self.fit_dir(fit_id) / name
        if not path.is_file():
            raise NotFoundError(f"fit {fit_id!r} has no stored {name}")
        return path.read_text()
