"""One word for a model family (issue 13): `families` in the request, the API and the CLI; the old `models`
spelling still works as a deprecated alias everywhere a user could have written it, and stored requests
written with it still load."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from actuator_sysid.cli import build_parser
from actuator_sysid.datasets.excitation import ExcitationSpec
from actuator_sysid.fitting.request import FitRequest


def test_request_field_and_deprecated_alias() -> None:
    assert FitRequest().families == ["dcmotor"]
    with pytest.warns(DeprecationWarning, match="families="):
        old = FitRequest(models=["ideal_pd", "dcmotor"])
    assert old.families == ["ideal_pd", "dcmotor"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FitRequest(families=["pid"]).families == ["pid"]


def test_stored_requests_with_the_old_key_load() -> None:
    assert FitRequest.from_dict({"models": ["delayed_pd"], "seed": 3, "gone_field": 1}).families == [
        "delayed_pd"
    ]
    assert FitRequest.from_dict({"families": ["pid"], "models": ["dcmotor"]}).families == ["pid"]


def test_cli_flags_both_spellings() -> None:
    parser = build_parser()
    for flag in ("--families", "--models"):
        args = parser.parse_args(["fit", "log.csv", flag, "dcmotor,pid", "--out", "x"])
        assert args.families == "dcmotor,pid"
        args = parser.parse_args(["excite", flag, "dcmotor", "--out", "x"])
        assert args.families == "dcmotor"


def test_excitation_spec_alias() -> None:
    with pytest.warns(DeprecationWarning):
        assert ExcitationSpec(models=["pid"]).families == ["pid"]


def test_http_families_and_alias(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from actuator_sysid.service.app import create_app
    from actuator_sysid.service.settings import Settings

    client = TestClient(create_app(Settings(data_dir=tmp_path / "data")))
    both = client.post("/api/v1/fits", json={"dataset_id": "x", "families": ["dcmotor"], "models": ["pid"]})
    assert both.status_code == 422 and "not both" in both.text
    unknown = client.post("/api/v1/fits", json={"dataset_id": "nope", "models": ["dcmotor"]})
    assert unknown.status_code == 404, (
        unknown.text
    )  # the alias validates; the missing dataset is what is wrong
    schema = client.get("/openapi.json").json()["components"]["schemas"]["FitCreate"]["properties"]
    assert schema["models"].get("deprecated") is True and "families" in schema
    ex = client.post(
        "/api/v1/excitations", json={"kind": "chirp", "duration": 5, "rate": 100, "models": ["pid"]}
    )
    assert ex.status_code == 200, ex.text[:300]
    assert ex.json()["sidecar"]["excitation"]["spec"]["families"] == ["pid"]
    assert list(ex.json()["identifiability"]["families"]) == ["pid"]
