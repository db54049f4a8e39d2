"""The robot fit report's per-joint parts, from a stored Go2-shaped result: a table per joint (its group, errors,
bias, its group's terms with intervals, "not identified" as a mark on the term, flags), and small multiples with
each simulation's residual below, one legend above them all instead of one squeezing the first figure."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import numpy as np
from test_numbers_nowrap import _go2_result

from actuator_sysid.service.db import Repository
from actuator_sysid.service.robot_page import _small_multiples, render_robot_fit

JOINTS = [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]


def _traces() -> dict:
    t = np.arange(50) * 0.02
    return {
        "t": t.tolist(),
        "joints": {
            j: {
                "measured": np.sin(t + k).tolist(),
                "fit": (np.sin(t + k) + 0.01).tolist(),
                "model_defaults": (np.sin(t + k) - 0.05).tolist(),
            }
            for k, j in enumerate(JOINTS)
        },
    }


def _page(tmp_path: Path) -> str:
    fit = {
        "id": "0123456789abcdef0123456789abcdef",
        "status": "succeeded",
        "progress": 1.0,
        "message": "done",
        "request": {"robot_id": "f" * 32},
        "dataset_id": "d" * 32,
        "created_at": "2026-12-05T09:00:00",
        "result": _go2_result(JOINTS),
    }
    repo = Repository(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        return render_robot_fit(fit, _traces(), ["fit.json"], repo, None)
    finally:
        repo.close()


def _rows(html: str) -> dict[str, list[str]]:
    table = html.split('<table id="per-joint">', 1)[1].split("</table>", 1)[0]
    rows = {}
    for tr in table.split("<tr>")[2:]:
        cells = [" ".join(unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in tr.split("<td")[1:]]
        cells = [
            c.split(">", 1)[-1].strip() if c.startswith("class") else c.lstrip("> ").strip() for c in cells
        ]
        rows[cells[0]] = cells
    return rows


def test_the_per_joint_table_marks_each_unidentified_term_on_its_joints(tmp_path: Path) -> None:
    rows = _rows(_page(tmp_path))
    assert list(rows) == JOINTS
    head = [
        "joint",
        "group",
        "coupled",
        "defaults",
        "bias",
        "armature",
        "viscous_friction",
        "friction",
        "flags",
    ]
    for j, cells in rows.items():
        group = j.split("_")[1]
        assert cells[1] == group, cells
        friction = cells[head.index("friction") + 1]  # the decoupled fit's column follows the coupled one
        assert ("not identified" in friction) == (group == "calf"), (j, friction)
        assert "not identified" not in cells[head.index("armature") + 1], cells
        flags = cells[-1]
        assert ("hip.armature at a search bound" in flags) == (group == "hip"), (j, flags)


def test_small_multiples_carry_residuals_and_leave_the_legend_to_the_page(tmp_path: Path) -> None:
    figs = _small_multiples(_traces())
    assert len(figs) == 12
    for f in figs:
        residuals = [d for d in f["data"] if d.get("yaxis") == "y2"]
        assert {d["name"] for d in residuals} == {
            "simulated (fit) − measured",
            "simulated (model file's terms) − measured",
        }
        fit = next(d for d in residuals if d["name"].startswith("simulated (fit)"))
        assert np.allclose(fit["y"], 0.01, atol=1e-6)
        assert f["layout"]["showlegend"] is False and not any(d["showlegend"] for d in f["data"])
    legend = _page(tmp_path).split('id="multiples-legend"', 1)[1].split("</p>", 1)[0]
    assert "measured" in legend and "simulated (fit)" in legend and "residual" in legend


def test_dataset_plots_give_each_joint_one_colour_and_one_legend_entry_beside_the_axes() -> None:
    """A 12-joint log's segment plots: a joint's q and q_des (and qd, τ) share its colour, twelve joints twelve
    colours, one legend entry each, the legend right of the axes (not over the time axis' title)."""
    from conftest import make_recording

    from actuator_sysid.service.pages import GROUP_SHADES, joint_colours, segment_figures

    rec = make_recording(joints=tuple(JOINTS), segments=1, n=50)
    for fig in segment_figures(rec):
        colours: dict[str, set[str]] = {}
        for d in fig["data"]:
            colours.setdefault(d["name"], set()).add(d["line"]["color"])
        assert list(colours) == JOINTS and all(len(c) == 1 for c in colours.values()), colours
        assert len({next(iter(c)) for c in colours.values()}) == 12
        for leg in ("FR", "FL", "RR", "RL"):  # many joints read by leg: one hue per leg, a shade per joint
            shades = {next(iter(c)) for j, c in colours.items() if j.startswith(leg)}
            assert any(shades <= set(hue) for hue in GROUP_SHADES), (leg, shades)
        assert [d["name"] for d in fig["data"] if d["showlegend"]] == JOINTS
        legend = fig["layout"]["legend"]
        assert len(set(joint_colours(["a", "b", "c"]))) == 3  # a few joints: distinct colours
        assert legend["orientation"] == "v" and legend["x"] > 1.0 and legend["xanchor"] == "left"
