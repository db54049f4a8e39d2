"""Splits on Rhoban's BAM XL330 bench logs (12 files, firmware kp 100, 200 and 800; four trajectories each, one of
them a lift-and-drop whose torque goes off): whole files by default, `holdout kp=800` from the CLI and through the
HTTP API with a zip upload, leave-one-kp-out folds, and the fit form's split fields (issue 14)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests
from conftest import ROOT, Server
from test_service import upload, wait_for_fit

from actuator_sysid.cli import main as cli_main
from actuator_sysid.datasets.readers import read_paths
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.fitting.fit import FitRequest, FitRequestError, plan_split, recordings

DATA = Path(
    os.environ.get("ACTUATOR_SYSID_BAM_DATA", ROOT.parent / "shared" / "data" / "bam-xl330" / "processed")
)
FILES = sorted(DATA.glob("*.json"))
pytestmark = pytest.mark.skipif(len(FILES) != 12, reason=f"the 12 BAM XL330 logs are not in {DATA}")
SMALL_BUDGET = {"generations": 5, "population": 8}


@pytest.fixture(scope="module")
def rec() -> Recording:
    return read_paths(FILES)


def _names(rec: Recording, ids: list[int]) -> list[str]:
    return [rec.segments[i].name for i in ids]


def _by_kp(rec: Recording, kp: float) -> list[str]:
    """The files recorded at firmware kp, read from each file's own fields."""
    return sorted({s.name.split(".")[0] for s in rec.segments if s.metadata["bam"]["kp"] == kp})


def _lift_and_drop(rec: Recording) -> set[str]:
    return {s.name for s in rec.segments if s.metadata["bam"]["trajectory"] == "lift_and_drop"}


def _assert_whole(rec: Recording, train: list[int], validation: list[int]) -> None:
    for group in recordings(rec):
        assert set(group) <= set(train) or set(group) <= set(validation), _names(rec, group)


def _old_reader(rec: Recording) -> Recording:
    """The same logs as the BAM reader gave them before a file was one segment: each torque-on or torque-off
    stretch its own segment "<file>.<k>" (free_swing where off), the firmware kp only under metadata["bam"]."""
    segs = []
    for s in rec.segments:
        on = s.driven(0)
        cuts = [0, *(np.flatnonzero(np.diff(on.astype(np.int8))) + 1).tolist(), s.n]
        for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
            meta = {key: v for key, v in s.metadata.items() if key in ("bam", "joints")}
            if not on[a]:
                meta["free_swing"] = True
            name = s.name if len(cuts) == 2 else f"{s.name}.{k}"
            arrays = {
                ch: None if getattr(s, ch) is None else getattr(s, ch)[a:b]
                for ch in ("t", "q", "qd", "q_des", "qd_des", "tau_ff", "tau")
            }
            segs.append(dataclasses.replace(s, name=name, metadata=meta, enable=None, **arrays))
    return dataclasses.replace(rec, segments=segs)


def test_default_split_keeps_files_whole_and_lift_and_drop_trains(rec: Recording) -> None:
    lift = _lift_and_drop(rec)
    assert len(rec.segments) == 12 and len(lift) == 3
    for shape in (rec, _old_reader(rec)):
        split = plan_split(shape, FitRequest())
        _assert_whole(shape, split.train, split.validation)
        val = _names(shape, split.validation)
        assert len(recordings(shape)) == 12 and len(val) == 2  # about 20 % of the files
        assert not {n.split(".")[0] for n in val} & lift, val  # the free-swing files train
    old = _old_reader(rec)
    assert len(old.segments) > 12 and any(s.metadata.get("free_swing") for s in old.segments)


def test_holdout_and_leave_one_kp_out_on_both_reader_shapes(rec: Recording) -> None:
    for shape in (rec, _old_reader(rec)):
        for holdout in ("kp=800", "bam.kp=800"):
            split = plan_split(shape, FitRequest(holdout=holdout))
            assert sorted({n.split(".")[0] for n in _names(shape, split.validation)}) == _by_kp(rec, 800.0)
            _assert_whole(shape, split.train, split.validation)
        split = plan_split(shape, FitRequest(folds_by="kp"))
        assert [n.split("=")[1] for n in split.fold_names] == ["100", "200", "800"]
        for fold, kp in zip(split.folds, (100.0, 200.0, 800.0), strict=True):
            assert sorted({n.split(".")[0] for n in _names(shape, fold)}) == _by_kp(rec, kp)
    with pytest.raises(FitRequestError, match="every segment has vin = 7.4"):
        plan_split(rec, FitRequest(folds_by="vin"))  # every log of the set is at 7.4 V


def test_cli_refuses_folds_by_a_key_with_one_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI holdout fit itself is tests/test_real_bam.py's (one fit of the 12 files serves both). In process:
    a traceback would be an exception out of main here, a failed test."""
    code = cli_main(["fit", *map(str, FILES), "--folds-by", "vin", "--out", str(tmp_path / "no")])
    err = capsys.readouterr().err
    assert code == 2 and "vin = 7.4" in err and "Traceback" not in err


def test_http_zip_upload_holdout_kp_800_and_the_fit_form(server: Server) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:  # 0.5 MB, under the test server's 1 MB limit
        for p in FILES:
            z.write(p, f"bam-xl330/{p.name}")
    up = upload(server, buf.getvalue(), filename="bam-xl330.zip")
    assert up.status_code == 201, up.text
    ds = up.json()
    assert ds["segments"] == 12
    # the fit form carries the split fields and posts them under the API's names
    page = requests.get(f"{server.url}/datasets/{ds['id']}", timeout=10).text
    for field in ("holdout", "folds_by"):
        assert f'id="{field}" name="{field}"' in page
    assert "for(const k of ['holdout','folds_by'])" in page and "body[k]=v" in page
    fits = server.url + "/api/v1/fits"
    bad = requests.post(fits, json={"dataset_id": ds["id"], "folds_by": "vin"}, timeout=30)
    assert bad.status_code == 422 and "vin = 7.4" in bad.text
    bad = requests.post(
        fits, json={"dataset_id": ds["id"], "folds_by": "kp", "holdout": "kp=800"}, timeout=30
    )
    assert bad.status_code == 422 and "holdout and folds_by exclude each other" in bad.text
    r = requests.post(
        fits,
        json={"dataset_id": ds["id"], "models": ["ideal_pd"], "holdout": "kp=800", "budget": SMALL_BUDGET},
        timeout=30,
    )
    assert r.status_code == 202, r.text
    fit = wait_for_fit(server, r.json()["id"], timeout=120)
    assert fit["status"] == "succeeded", fit.get("error")
    assert fit["request"]["holdout"] == "kp=800" and fit["request"]["folds_by"] is None
    split = fit["result"]["split"]
    kp800 = sorted(p.stem for p in FILES if json.loads(p.read_text())["kp"] == 800)
    assert split["validation"] == kp800 and len(split["train"]) == 8
