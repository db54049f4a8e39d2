"""Plain JSON and file helpers shared by the CLI's local fit and the service: strict JSON, atomic writes.

No database here: the CLI's local pipeline (actuator_sysid/pipeline.py) imports these without SQLAlchemy.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path
from typing import Any


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
    """Write several named files into one folder, each atomically (the CLI's output folder)."""
    for name, data in files.items():
        write_atomic(folder / name, data)
