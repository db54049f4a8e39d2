"""Golden test: one small seeded fit's `fit.json` and the HTTP shapes of datasets, fits and exports, pinned
against files in tests/golden/ so a refactor that must leave behaviour unchanged (issue 13) shows any change.

What is pinned: the structure at every level (dict keys, list lengths, the JSON type of every leaf) and every
leaf's value, except the values of VOLATILE keys (timings, ids, timestamps, hashes and sizes of files that
carry a fit id or a time), which are pinned by type only. Floats compare within FLOAT_RTOL / FLOAT_ATOL (the
fit is seeded and deterministic on CPU; the tolerance only absorbs a reordered float sum), everything else
exactly.

Regenerate after an intended change of behaviour (and say why in the commit), with OpenBLAS's kernel set
pinned as `make test` pins it (its rounding differs by CPU, and a seeded fit follows it):

    OPENBLAS_CORETYPE=Haswell ACTUATOR_SYSID_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_golden.py

The fit.json part runs the real CLI (`actuator-sysid fit`, in process) and is a unit test; the HTTP part runs
the real server (`service` marker in tests/conftest.py MARKERS).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import requests
from conftest import Server, make_recording

from actuator_sysid.cli import main as cli_main
from actuator_sysid.datasets.canonical import sidecar_for, write_table

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("ACTUATOR_SYSID_UPDATE_GOLDEN", "") not in ("", "0")
FLOAT_RTOL, FLOAT_ATOL = 1e-5, 1e-9
# keys whose values change from run to run (wall-clock seconds, ids, times, hashes/sizes of files that
# embed a fit id or a time, the worker's name, the dataset id a service fit names as its origin): their
# type is pinned, their value is not
VOLATILE = frozenset(
    {
        "seconds",
        "elapsed_s",
        "id",
        "dataset_id",
        "fit_id",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "sha256",
        "size",
        "worker",
        "dataset",
    }
)
FIT_ARGS = ["--families", "dcmotor,ideal_pd", "--generations", "3", "--population", "8", "--seed", "0"]
FIT_BODY: dict[str, Any] = {
    "families": ["dcmotor", "ideal_pd"],
    "budget": {"generations": 3, "population": 8},
    "seed": 0,
}


def _type(v: Any) -> str:
    return {
        type(None): "null",
        bool: "bool",
        int: "int",
        float: "float",
        str: "str",
        list: "list",
        dict: "dict",
    }[type(v)]


def differences(got: Any, want: Any, where: str = "$", key: str = "") -> list[str]:
    """Every place where `got` departs from `want`: a key added or missing, a list length, a leaf's type,
    or (outside VOLATILE keys) a leaf's value; floats within the stated tolerance."""
    if _type(got) != _type(want):
        return [f"{where}: type {_type(got)} != golden {_type(want)} ({got!r:.80} vs {want!r:.80})"]
    if isinstance(want, dict):
        out = (
            [f"{where}: keys added {sorted(set(got) - set(want))}, missing {sorted(set(want) - set(got))}"]
            if set(got) != set(want)
            else []
        )
        for k in sorted(set(got) & set(want)):
            out += differences(got[k], want[k], f"{where}.{k}", k)
        return out
    if isinstance(want, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items != golden {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in differences(g, w, f"{where}[{i}]", key)
        ]
    if key in VOLATILE:
        return []
    if isinstance(want, float):
        ok = math.isclose(got, want, rel_tol=FLOAT_RTOL, abs_tol=FLOAT_ATOL)
    else:
        ok = got == want
    return [] if ok else [f"{where}: {got!r:.120} != golden {want!r:.120}"]


def check_golden(name: str, got: Any) -> None:
    """Compare `got` with tests/golden/<name>, or rewrite that file when ACTUATOR_SYSID_UPDATE_GOLDEN is set."""
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True, allow_nan=False) + "\n")
        return
    assert path.is_file(), f"{path} missing: run with ACTUATOR_SYSID_UPDATE_GOLDEN=1 to create it"
    diffs = differences(got, json.loads(path.read_text()))
    assert not diffs, f"{len(diffs)} differences from {path.name}:\n" + "\n".join(diffs[:40])


def write_log(folder: Path) -> Path:
    """The golden log: 1 joint, 2 segments of 150 samples at 100 Hz, seed 0, with its sidecar beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    write_table(make_recording(segments=2, n=150, seed=0), folder / "log.csv")
    return folder / "log.csv"


def test_cli_fit_json_is_golden(tmp_path: Path) -> None:
    log = write_log(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["fit", str(log), *FIT_ARGS, "--out", str(out)]) == 0
    fit = json.loads((out / "fit.json").read_text())
    check_golden("fit.json", fit)
    # the same fit's other files exist; their bytes carry times, so only their names are pinned
    check_golden("cli_files.json", sorted(p.name for p in out.iterdir()))


def _wait(server: Server, fit_id: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fit = requests.get(f"{server.url}/api/v1/fits/{fit_id}", timeout=10).json()
        if fit["status"] in ("succeeded", "failed", "cancelled"):
            return fit
        time.sleep(0.2)
    raise AssertionError(f"fit {fit_id} not finished after {timeout} s")


def test_http_shapes_are_golden(server: Server, tmp_path: Path) -> None:
    log = write_log(tmp_path)
    rec = make_recording(segments=2, n=150, seed=0)
    with open(log, "rb") as f:
        up = requests.post(
            server.url + "/api/v1/datasets",
            files={"file": ("log.csv", f)},
            data={"metadata": json.dumps(sidecar_for(rec))},
            timeout=60,
        )
    assert up.status_code == 201, up.text
    ds = up.json()["id"]
    shapes: dict[str, Any] = {"POST /api/v1/datasets": up.json()}
    shapes["GET /api/v1/datasets/{id}"] = requests.get(
        f"{server.url}/api/v1/datasets/{ds}", timeout=10
    ).json()
    listed = [d for d in requests.get(server.url + "/api/v1/datasets", timeout=10).json() if d["id"] == ds]
    shapes["GET /api/v1/datasets (this one)"] = listed
    posted = requests.post(server.url + "/api/v1/fits", json={"dataset_id": ds, **FIT_BODY}, timeout=30)
    assert posted.status_code == 202, posted.text
    fit_id = posted.json()["id"]
    shapes["POST /api/v1/fits"] = posted.json()
    fit = _wait(server, fit_id)
    assert fit["status"] == "succeeded", fit.get("error")
    fit["artifacts"] = sorted(
        fit["artifacts"], key=lambda a: a["name"]
    )  # the exports list, in a stable order
    shapes["GET /api/v1/fits/{id}"] = fit
    shapes["GET /api/v1/fits (this one)"] = [
        f for f in requests.get(server.url + "/api/v1/fits", timeout=10).json() if f["id"] == fit_id
    ]
    stored = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/fit.json", timeout=10)
    assert stored.status_code == 200 and stored.json() == fit["result"]
    missing = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/nope.txt", timeout=10)
    shapes["GET /api/v1/fits/{id}/export/nope.txt"] = {"status": missing.status_code, **missing.json()}
    shapes["GET /api/v1/fits/{id}/validation"] = requests.get(
        f"{server.url}/api/v1/fits/{fit_id}/validation", timeout=10
    ).json()
    heads = {}
    for a in fit["artifacts"]:
        r = requests.get(f"{server.url}/api/v1/fits/{fit_id}/export/{a['name']}", timeout=30)
        heads[a["name"]] = {
            "status": r.status_code,
            "content-type": r.headers["content-type"],
            "bytes match the listed sha256": r.headers.get("X-Content-SHA256") == a["sha256"],
        }
    shapes["GET /api/v1/fits/{id}/export/{name} for each listed export"] = heads
    check_golden("http.json", shapes)


def test_the_comparison_sees_a_change() -> None:
    """The checker itself: a changed value, a new key, a changed type and a float beyond tolerance all show,
    a volatile value and a float within tolerance do not."""
    fn = differences
    want = {"a": 1.0, "b": [1, "x"], "seconds": 0.2, "c": {"d": None}}
    assert fn(want, want) == []
    assert fn({**want, "seconds": 9.9, "a": 1.0 + 1e-9}, want) == []
    assert fn({**want, "a": 1.1}, want) and fn({**want, "e": 1}, want) and fn({**want, "b": [1, 2]}, want)
    assert fn({**want, "c": {"d": 0.0}}, want) and fn({**want, "b": [1]}, want)
