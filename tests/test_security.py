"""Security: tokens on every route, projects isolated, hostile names and bodies refused with 4xx, and a
bounded schemathesis run over /openapi.json that finds no 5xx. One real server with auth required."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from conftest import Server, run_cli, start_server
from fastapi.routing import iter_route_contexts
from test_service_flow import SMALL_BUDGET, upload_log, wait_status

from actuator_sysid.service.app import create_app
from actuator_sysid.service.auth import is_public
from actuator_sysid.service.db import Repository
from actuator_sysid.service.settings import Settings

LIMIT = 2_000_000


def make_token(data_dir: Path, project: str) -> str:
    """A token made by `actuator-sysid token create`, the command an operator runs (its main, in this
    process: tests/test_cli.py and tests/test_input_faults.py run the entry point in a fresh interpreter)."""
    out = run_cli("token", "create", "--data-dir", str(data_dir), "--project", project)
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert token.startswith("asid_") and len(token) > 40, out
    return token


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict, dict, dict]]:
    """A server with auth required, tokens of projects alpha and beta, and alpha's dataset and fit."""
    root = tmp_path_factory.mktemp("sec")
    data = root / "data"
    alpha = make_token(data, "alpha")  # through the CLI, as an operator does
    repo = Repository(f"sqlite:///{data / 'actuator_sysid.db'}")
    beta, fuzz = repo.create_token("beta"), repo.create_token("fuzz")
    repo.close()
    server = start_server(
        data, {"ACTUATOR_SYSID_AUTH": "required", "ACTUATOR_SYSID_MAX_UPLOAD_BYTES": str(LIMIT)}
    )
    try:
        ha, hb = {"Authorization": f"Bearer {alpha}"}, {"Authorization": f"Bearer {beta}"}
        hf = {"Authorization": f"Bearer {fuzz}"}
        ds = upload_log(server, root, headers=ha)
        r = requests.post(
            server.url + "/api/v1/fits",
            headers=ha,
            timeout=30,
            json={"dataset_id": ds["id"], "joints": ["knee"], "models": ["dcmotor"], "budget": SMALL_BUDGET},
        )
        fit = wait_status(server, r.json()["id"], ("succeeded", "failed"), headers=ha)
        assert fit["status"] == "succeeded", fit
        yield server, {"a": ha, "b": hb, "fuzz": hf}, ds, fit
    finally:
        server.stop()


def all_routes(ds_id: str, fit_id: str, probe_dir: Path) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, path parameters filled with real ids."""
    app = create_app(Settings(data_dir=probe_dir))
    fill = {"dataset_id": ds_id, "fit_id": fit_id, "name": "isaaclab.py", "actuator_model": "test-motor"}
    out = []
    for route in iter_route_contexts(
        app.routes
    ):  # the routes of included routers too (FastAPI ≥ 0.165 nests them)
        path = getattr(route, "path", None)
        for method in sorted(getattr(route, "methods", None) or []):
            if path and method != "HEAD":
                out.append((method, re.sub(r"\{(\w+)(:\w+)?\}", lambda m: fill.get(m.group(1), "x"), path)))
    return out


def test_no_route_answers_without_a_valid_token(secured: tuple, tmp_path: Path) -> None:
    server, _tokens, ds, fit = secured
    routes = all_routes(ds["id"], fit["id"], tmp_path / "probe")
    assert len(routes) > 20
    for headers in (
        {},
        {"Authorization": "Bearer asid_not-a-real-token"},
        {"Authorization": "Basic eDp5"},
        {"Cookie": "actuator_sysid_token=forged"},
    ):
        for method, path in routes:
            r = requests.request(
                method, server.url + path, headers=headers, timeout=30, allow_redirects=False
            )
            if is_public(path.split("?")[0]):
                assert r.status_code < 500, (method, path, r.status_code)
                continue
            assert r.status_code in (401, 303), (method, path, headers, r.status_code, r.text[:200])
            if r.status_code == 303:
                assert method == "GET" and r.headers["location"].startswith("/login?next=")
            else:
                assert r.headers.get("www-authenticate") == "Bearer" and "token" in r.json()["detail"]
            assert ds["id"] not in r.text and "isaaclab" not in r.text.lower()
    assert requests.get(server.url + "/healthz", timeout=10).json() == {"status": "ok"}
    assert requests.get(server.url + "/static/plotly.min.js", timeout=10).status_code == 200


def test_login_form_sets_a_cookie_that_opens_the_pages(secured: tuple) -> None:
    server, tokens, ds, fit = secured
    s = requests.Session()
    r = s.post(server.url + "/login", data={"token": "wrong", "next": "/"}, timeout=10, allow_redirects=False)
    assert r.status_code == 401 and "not valid" in r.text
    token = tokens["a"]["Authorization"].split()[1]
    r = s.post(
        server.url + "/login",
        data={"token": token, "next": "//evil.example/x"},
        timeout=10,
        allow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    dashboard = s.get(server.url + "/", timeout=10).text
    assert ds["name"] in dashboard and 'action="/logout"' in dashboard  # tokens: a log out to press
    assert s.get(f"{server.url}/fits/{fit['id']}", timeout=10).status_code == 200
    assert s.get(f"{server.url}/api/v1/fits/{fit['id']}", timeout=10).status_code == 200


def test_a_token_cannot_read_or_change_another_projects_data(secured: tuple) -> None:
    server, tokens, ds, fit = secured
    hb, url = tokens["b"], server.url
    assert requests.get(url + "/api/v1/datasets", headers=hb, timeout=10).json() == []
    assert requests.get(url + "/api/v1/fits", headers=hb, timeout=10).json() == []
    for method, path in [
        ("GET", f"/api/v1/datasets/{ds['id']}"),
        ("GET", f"/api/v1/datasets/{ds['id']}/original"),
        ("DELETE", f"/api/v1/datasets/{ds['id']}"),
        ("GET", f"/api/v1/fits/{fit['id']}"),
        ("GET", f"/api/v1/fits/{fit['id']}/events"),
        ("POST", f"/api/v1/fits/{fit['id']}/cancel"),
        ("POST", f"/api/v1/fits/{fit['id']}/retry"),
        ("DELETE", f"/api/v1/fits/{fit['id']}"),
        ("GET", f"/api/v1/fits/{fit['id']}/export/isaaclab.py"),
        ("GET", f"/fits/{fit['id']}"),
        ("GET", f"/datasets/{ds['id']}"),
        ("GET", f"/compare?a={fit['id']}&b={fit['id']}"),
    ]:
        r = requests.request(method, url + path, headers=hb, timeout=30)
        assert r.status_code == 404, (method, path, r.status_code)
    r = requests.post(url + "/api/v1/fits", headers=hb, timeout=10, json={"dataset_id": ds["id"]})
    assert r.status_code == 404
    assert requests.get(url + "/api/v1/fleet/test-motor", headers=hb, timeout=10).json()["fits"] == 0
    assert ds["name"] not in requests.get(url + "/", headers=hb, timeout=10).text
    # alpha still has everything
    assert (
        requests.get(f"{url}/api/v1/fits/{fit['id']}", headers=tokens["a"], timeout=10).json()["status"]
        == "succeeded"
    )


def test_hostile_names_and_bodies_are_4xx_and_touch_no_path(secured: tuple, tmp_path: Path) -> None:
    server, tokens, _ds, fit = secured
    ha, url = tokens["a"], server.url
    csv = b"t,joint,q,q_des\n" + b"".join(f"{i * 0.01:.2f},j1,0.1,0.2\n".encode() for i in range(40))
    for name in (
        "../../../../tmp/evil-upload.csv",
        "..\\..\\evil-upload.csv",
        "/etc/evil-upload.csv",
        "a\x00b.csv",
        "\u202etxt.csv",
        "x" * 1000,
    ):
        r = requests.post(url + "/api/v1/datasets", headers=ha, files={"file": (name, csv)}, timeout=30)
        assert r.status_code in (201, 400, 422), (name, r.status_code)
        if r.status_code == 201:
            shown = r.json()["name"]
            assert "/" not in shown and "\\" not in shown and ".." not in shown.replace("...", "")
            assert len(shown) <= 255
    assert not Path("/tmp/evil-upload.csv").exists() and not Path("/etc/evil-upload.csv").exists()
    for p in (server.data_dir / "blobs").rglob("*"):
        assert p.is_dir() or re.fullmatch(r"[0-9a-f]{64}", p.name), p
    for path in (
        "/api/v1/datasets/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/datasets/../../etc/passwd",
        f"/api/v1/fits/{fit['id']}/export/..%2F..%2Factuator_sysid.db",
        f"/api/v1/fits/{fit['id']}/export/....%2F%2Fetc%2Fpasswd",
    ):
        r = requests.get(url + path, headers=ha, timeout=10)
        assert 400 <= r.status_code < 500 and "root:" not in r.text, (path, r.status_code)

    # oversized: declared, and streamed without a length (chunked)
    big = b"t,joint,q,q_des\n" + b"0.0,j1,0.0,0.0\n" * (LIMIT // 15 + 10)
    r = requests.post(url + "/api/v1/datasets", headers=ha, files={"file": ("big.csv", big)}, timeout=60)
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n\r\n'
        for _ in range(LIMIT // 65536 + 4):
            yield b"0" * 65536

    r = requests.post(
        url + "/api/v1/datasets",
        data=chunks(),
        timeout=60,
        headers={**ha, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert r.status_code == 413, r.text[:200]

    # a zip bomb (200 MB of zeros in ~200 kB): refused, the server keeps answering
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("log.csv", "w") as f:
        for _ in range(200):
            f.write(b"\0" * (1 << 20))
    assert len(buf.getvalue()) < LIMIT
    r = requests.post(
        url + "/api/v1/datasets", headers=ha, files={"file": ("log.zip", buf.getvalue())}, timeout=120
    )
    assert 400 <= r.status_code < 500, r.status_code

    # malformed multipart
    bad_bodies = [
        (
            "multipart/form-data; boundary=zzz",
            b'--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nt,q\n1,2\n',
        ),  # never closed
        ("multipart/form-data; boundary=zzz", b"garbage without any boundary"),
        ("multipart/form-data", b"--x\r\n\r\n--x--\r\n"),  # no boundary parameter
        (
            "multipart/form-data; boundary=zzz",
            b"--zzz\r\nContent-Disposition: form-data\r\n\r\nx\r\n--zzz--\r\n",
        ),
        ("application/json", json.dumps({"file": "t,q"}).encode()),
        (
            "multipart/form-data; boundary=zzz",
            b'--zzz\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n{}\r\n--zzz--\r\n',
        ),  # no file part
    ]
    for ctype, body in bad_bodies:
        r = requests.post(
            url + "/api/v1/datasets", data=body, headers={**ha, "Content-Type": ctype}, timeout=30
        )
        assert 400 <= r.status_code < 500, (ctype, body[:40], r.status_code, r.text[:200])
    assert requests.get(url + "/healthz", timeout=10).status_code == 200


def test_schemathesis_finds_no_server_errors(secured: tuple, tmp_path: Path) -> None:
    """Bounded: every operation's examples and coverage cases, then 25 fuzzed examples per operation, loopback
    only, with a token of its own (empty) project so that it cannot start long fits on real data or wait on
    their event streams."""
    server, tokens, _ds, _fit = secured
    st = Path(sys.executable).with_name("schemathesis")
    out = subprocess.run(
        [
            str(st),
            "run",
            server.url + "/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "25",
            "--header",
            f"Authorization: {tokens['fuzz']['Authorization']}",
            "--workers",
            "1",
            "--seed",
            "1",
            "--phases",
            "examples,coverage,fuzzing",
            "--request-timeout",
            "30",
            "--no-shrink",
            "--generation-database",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    tail = (out.stdout + out.stderr)[-4000:]
    assert out.returncode == 0, tail
    counts = re.search(r"(\d+) generated, (\d+) passed", out.stdout)
    assert counts and counts.group(1) == counts.group(2) and int(counts.group(1)) > 200, tail
    assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
