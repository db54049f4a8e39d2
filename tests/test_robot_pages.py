"""The robot pages (issue 23, "The pages") over a real server with the shared Go2 MJCF: the upload form takes a
robot_id and a PACE log without names is refused naming that field; the robot fit form carries every option with
the request's own bounds; and in headless Chromium its errors show beside their field, with no dialog."""

from __future__ import annotations

import time

import numpy as np
import pytest
import requests
from conftest import Server
from test_browser import browser  # noqa: F401  (the module-scoped Chromium fixture)
from test_robot_service import GO2_XML, pace_bytes

from actuator_sysid.service.robots import RobotFitIn

pytestmark = pytest.mark.skipif(not GO2_XML.is_file(), reason="shared/data/go2-in-air is not here")


@pytest.fixture(scope="module")
def site(server: Server) -> dict:
    """The worker's shared server (these pages need no setting of their own) with the Go2 and a short unnamed
    PACE log read in its joint order."""
    r = requests.post(
        server.url + "/api/v1/robots", files={"file": ("go2.xml", GO2_XML.read_bytes())}, timeout=180
    )
    assert r.status_code == 201, r.text
    robot = r.json()
    t = np.arange(400) * 0.005
    cmd = 0.2 * np.sin(2 * np.pi * 0.7 * t)[:, None] * np.ones(12)
    up = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("go2.pt", pace_bytes(cmd, cmd + 0.01))},
        data={"robot_id": robot["id"]},
        timeout=60,
    )
    assert up.status_code == 201, up.text
    return {"server": server, "robot": robot, "dataset": up.json()}


def test_upload_form_takes_robot_id_and_the_pt_error_names_it(site: dict) -> None:
    server: Server = site["server"]
    assert 'name="robot_id"' in requests.get(server.url + "/", timeout=30).text
    cmd = np.zeros((50, 12))
    r = requests.post(
        server.url + "/api/v1/datasets", files={"file": ("nonames.pt", pace_bytes(cmd, cmd))}, timeout=60
    )
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "no joint names" in detail and "robot_id" in detail and "/robots" in detail, detail
    assert site["dataset"]["joints"] == [j["name"] for j in site["robot"]["joints"]]


def test_robot_fit_form_carries_every_option_with_the_requests_bounds(site: dict) -> None:
    server: Server = site["server"]
    page = requests.get(server.url + f"/robots/{site['robot']['id']}", timeout=30).text
    props = RobotFitIn.model_json_schema()["properties"]
    kp = next(p for p in props["kp"]["anyOf"] if "maximum" in p)
    delay = next(p for p in props["delay"]["anyOf"] if "maximum" in p)
    bias_limit = next(p for p in props["bias_limit"]["anyOf"] if "maximum" in p)
    for field, hi in (
        ("kp", kp["maximum"]),
        ("bias_limit", bias_limit["maximum"]),
        ("delay", delay["maximum"]),
        ("decimation", props["decimation"]["maximum"]),
    ):
        tag = page.split(f'id="rf-{field}"', 1)[1].split(">", 1)[0]
        assert f'max="{hi}"' in tag, (field, tag)
    missing = [f for f in RobotFitIn.model_fields if f'id="rf-{f}"' not in page]
    assert missing == [], missing  # every option the API takes, the selection among them
    assert 'id="rf-name"' in page and 'id="rf-tags"' in page  # and the run's name and tags
    assert "alert(" not in page


def test_robot_fit_form_errors_show_beside_their_field_without_a_dialog(browser, site: dict) -> None:  # noqa: F811
    server: Server = site["server"]
    ctx = browser.new_context(viewport={"width": 800, "height": 900})
    page = ctx.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    before = len(requests.get(server.url + "/api/v1/fits", timeout=10).json())
    try:
        page.set_default_timeout(30_000)
        page.goto(f"{server.url}/robots/{site['robot']['id']}")
        page.fill("#rf-kp", "20000")
        page.click("#robot-fit button[type=submit]")
        err = page.locator("#err-rf-kp")
        err.wait_for(state="visible")
        assert "between 0 and 10000" in err.inner_text(), err.inner_text()
        assert posts == []  # checked before sending
        box, field = err.bounding_box(), page.locator("#rf-kp").bounding_box()
        assert abs(box["x"] - field["x"]) < 300 and 0 <= box["y"] - field["y"] < 80, (box, field)
        page.fill("#rf-kp", "20")
        page.fill("#rf-groups", '{"hip": "no_such_joint"}')  # only the server knows the model's joints
        page.click("#robot-fit button[type=submit]")
        groups = page.locator("#err-rf-groups")
        groups.wait_for(state="visible")
        assert "no_such_joint" in groups.inner_text(), groups.inner_text()
        assert page.locator("#err-rf-kp").is_hidden() and len(posts) == 1
        assert dialogs == [] and "/robots/" in page.url
        assert len(requests.get(server.url + "/api/v1/fits", timeout=10).json()) == before
    finally:
        ctx.close()


# a running robot fit's page: the header's and the live line's percentages, the live loss curves (name and
# values) and the y ticks
LIVE_JS = """() => { const d = document.getElementById('live-loss');
  return {header: document.querySelector('[data-live=pct]').textContent.trim(),
          line: document.getElementById('live-pct').textContent.trim(),
          curves: d.data.map(t => ({name: t.name, ys: t.y})),
          ticks: [...d.querySelectorAll('.ytick text')].map(t => +t.textContent.replace('−', '-'))}; }"""


WIDE_JS = """() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 801)
  .slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""


def test_a_running_robot_fit_is_cancelled_from_its_page(browser, site: dict) -> None:  # noqa: F811
    """The running fit's page (a selection, the default) streams its status and log, its header agreeing with the
    live line; its live loss chart draws the selection's first candidate as its own curve while it is fitted, has
    y ticks where the curve lies and follows the window from 1280 to 800 px; its cancel button stops the fit."""
    server: Server = site["server"]
    t = np.arange(4000) * 0.005  # 20 s: the selection still runs when the page cancels it
    cmd = 0.2 * np.sin(2 * np.pi * (0.5 + 0.05 * t) * t)[:, None] * np.ones(12)
    up = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("go2_long.pt", pace_bytes(cmd, cmd + 0.01))},
        data={"robot_id": site["robot"]["id"]},
        timeout=60,
    )
    assert up.status_code == 201, up.text
    body = {
        "dataset_id": up.json()["id"],
        "robot_id": site["robot"]["id"],
        "robot": {
            "kp": 20,
            "kd": 1.5,
            "decimation": 2,
            "iterations": 100,
            "budget_s": 300,
            "replay": False,
        },
    }
    r = requests.post(server.url + "/api/v1/fits", json=body, timeout=60)
    assert r.status_code == 202, r.text
    fid = r.json()["id"]
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.on("dialog", lambda d: d.accept())  # the cancel button asks first
    try:
        page.set_default_timeout(90_000)
        page.goto(f"{server.url}/fits/{fid}")
        page.wait_for_function("document.getElementById('live-status').textContent.includes('running')")
        # the live loss has points; the header says what the live line says; the axis is marked where they lie
        page.wait_for_function("(document.getElementById('live-loss').data || [{}, {}])[1]?.y?.length >= 2")
        live = page.evaluate(LIVE_JS)
        assert live["header"] == live["line"], live
        # the fit's own curve waits for the refit; the first candidate, the teacher with the log's gains (fitted
        # first), is drawn now
        first, candidate = live["curves"][:2]
        assert first["name"].startswith("chosen") and first["ys"] == [], live
        assert candidate["name"] == "teacher, gains given", live
        ys = candidate["ys"]
        inside = [t for t in live["ticks"] if min(ys) / 1.5 <= t <= max(ys) * 1.5]
        assert len(inside) >= 2, live
        # a message without a candidate's name (the refit's, or a plain fit's) draws the first curve
        page.evaluate(
            """() => { document.getElementById('live-msg').textContent =
                'iteration 3: training RMSE 0.0123 rad, 300000 world-steps/s'; }"""
        )
        page.wait_for_function("document.getElementById('live-loss').data[0].y.length > 0", timeout=10_000)
        drawn = page.evaluate("document.getElementById('live-loss').data[0].y")
        assert drawn == [0.0123], drawn
        page.set_viewport_size({"width": 800, "height": 900})  # the chart follows the window
        page.wait_for_function(
            "document.querySelector('#live-loss .main-svg').getBoundingClientRect().width <= 800",
            timeout=10_000,
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= 801, page.evaluate(WIDE_JS)
        page.click("button[data-action=cancel]")
        deadline = time.monotonic() + 90
        while requests.get(server.url + f"/api/v1/fits/{fid}", timeout=30).json()["status"] != "cancelled":
            assert time.monotonic() < deadline, "the robot fit was not cancelled within 90 s"
            time.sleep(1)
        # the page reloads at the stream's end: the live part gone, the status stated (the status text can
        # change before the reload, so wait for the reloaded page itself)
        page.wait_for_function(
            "document.querySelector('#live-log') === null"
            " && document.querySelector('button[data-action=retry]') !== null"
        )
        assert "cancelled" in page.locator("#status").inner_text()
        assert (
            page.locator("#live-log").count() == 0 and page.locator("button[data-action=retry]").count() == 1
        )
    finally:
        ctx.close()


def test_a_robot_log_is_uploaded_and_fitted_with_selection_from_the_pages_alone(
    browser,  # noqa: F811
    site: dict,
    tmp_path,
) -> None:
    """From the robot page alone: a PACE log (no joint names) uploaded for the robot, the page again with that log
    chosen among only the logs of this model's joints; its dataset page names the robot and offers the fit through
    it (the joint-by-joint fit folded away); and a robot fit with selection, named and tagged, run to its report,
    which lists the alternatives the selection tried."""
    server: Server = site["server"]
    robot = site["robot"]
    t = np.arange(600) * 0.005
    cmd = 0.25 * np.sin(2 * np.pi * (0.5 + 0.4 * t))[:, None] * np.linspace(0.6, 1.0, 12)
    log = tmp_path / "go2_chirp.pt"
    log.write_bytes(pace_bytes(cmd, cmd + 0.01 * np.sin(7 * t)[:, None]))
    one = requests.post(  # a servo's log: not this robot's, not offered on its page
        server.url + "/api/v1/datasets",
        files={
            "file": (
                "servo.csv",
                "t,joint,q,q_des\n" + "".join(f"{k / 100},servo,{k / 50},{k / 50}\n" for k in range(60)),
            )
        },
        timeout=60,
    )
    assert one.status_code == 201, one.text
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.set_default_timeout(60_000)
        page.goto(f"{server.url}/robots/{robot['id']}")
        page.set_input_files("#robot-upload input[type=file]", str(log))
        page.click("#robot-upload button[type=submit]")
        page.wait_for_url("**?dataset=*")
        new_id = page.url.split("dataset=")[1].split("#")[0]
        stored = requests.get(f"{server.url}/api/v1/datasets/{new_id}", timeout=30).json()
        assert stored["robot_id"] == robot["id"] and stored["joints"] == [j["name"] for j in robot["joints"]]
        options = page.eval_on_selector_all(
            "#rf-dataset_id option", "os => os.map(o => [o.value, o.selected])"
        )
        assert [new_id, True] in options, options
        assert one.json()["id"] not in [v for v, _ in options], options  # a servo's log is not this model's
        # the dataset page says whose log it is and offers that fit first
        page.goto(f"{server.url}/datasets/{new_id}")
        assert robot["name"] in page.locator("#robot-of").inner_text()
        assert page.locator("#joint-fit").get_attribute("open") is None  # the joint-by-joint fit folded away
        page.click("a.fit-robot")
        page.wait_for_url(f"**/robots/{robot['id']}?dataset={new_id}*")
        page.fill("#rf-name", "go2 chirp selected")
        page.fill("#rf-tags", "go2, selection")
        page.fill("#rf-kp", "20")
        page.fill("#rf-kd", "1.5")
        page.fill("#rf-decimation", "2")
        page.fill("#rf-iterations", "2")
        page.fill("#rf-budget_s", "60")
        page.check("#rf-select")
        page.uncheck("#rf-replay")
        page.click("#robot-fit button[type=submit]")
        page.wait_for_url("**/fits/*")
        fid = page.url.rsplit("/", 1)[1]
        deadline = time.monotonic() + 240
        while (fit := requests.get(f"{server.url}/api/v1/fits/{fid}", timeout=30).json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, "the selected robot fit did not finish within 240 s"
            time.sleep(1)
        assert fit["status"] == "succeeded", fit.get("error")
        req = fit["request"]
        assert req["select"] is True and req["replay"] is False and req["iterations"] == 2, req
        assert fit["name"] == "go2 chirp selected" and fit["tags"] == ["go2", "selection"], fit
        candidates = fit["result"]["selection"]["candidates"]
        assert len(candidates) >= 2, candidates
        # the fit's page reloads itself at the stream's end (a goto now could meet that reload): wait for the
        # report it reloads into
        page.wait_for_function(
            "document.querySelector('#live-log') === null && document.querySelector('#selection') !== null"
        )
        assert page.url.endswith(f"/fits/{fid}"), page.url
        rows = page.locator("#selection tr").count()
        assert rows == len(candidates) + 1, rows  # each alternative with its figures
        # the gains and the bias decided on the whole training part by a teacher: a row for each of the five
        # configurations (no free bias over fitted gains) and one for each teacher (the gains given and fitted)
        tc = fit["result"]["selection"]["training_choice"]
        assert tc["rule"] == "teacher" and len(tc["configurations"]) == 5, tc
        assert page.locator("#training-choice tr").count() == 1 + 5 + 2
        assert page.locator("#training-choice b").count() == 1  # the kept configuration
        assert dialogs == []
    finally:
        ctx.close()


def test_a_log_uploaded_for_a_robot_names_only_its_joints(site: dict) -> None:
    server: Server = site["server"]
    body = "t,joint,q,q_des\n" + "".join(
        f"{k / 100},{j},{k / 50},{k / 50}\n" for j in ("FL_hip_joint", "wheel") for k in range(60)
    )
    r = requests.post(
        server.url + "/api/v1/datasets",
        files={"file": ("mixed.csv", body)},
        data={"robot_id": site["robot"]["id"]},
        timeout=60,
    )
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "wheel" in detail and "FL_hip_joint" not in detail.split("whose joints are")[0], detail
