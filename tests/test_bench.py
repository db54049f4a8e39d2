"""The benchmark script keeps running and prints the figures BENCHMARKS.md quotes (a smoke run, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_rollout_bench_prints_json_figures() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rollout.py"), "--quick", "--candidates", "32"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=True,
    )
    figures = json.loads(out.stdout)
    for key in ("warp_cpu_1core", "warp_cpu_all_cores", "torch_oracle", "warp_traces"):
        assert figures[key] > 0, key
    sizes = figures["sizes"]
    assert len(sizes) == 3 and sizes[-1]["candidate_steps"] == 100 * sizes[0]["candidate_steps"]
    assert figures["ratios"]["warp_all_over_oracle"] > 0
    assert figures["fit_demo_dcmotor"]["evaluations"] > 0


XL330 = ROOT.parent / "shared" / "data" / "bam-xl330" / "processed"


@pytest.mark.skipif(not XL330.is_dir(), reason="the real XL330 logs are not beside this checkout")
def test_real_bam_bench_quick_prints_our_side() -> None:
    """bench/real_bam.py --quick --skip-bam fits the real XL330 logs (cropped) and prints every section's keys."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "real_bam.py"), "--quick", "--skip-bam"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        check=True,
    )
    figures = json.loads(out.stdout)
    assert (
        "bam" not in figures
        and figures["machine"]["cores"] > 0
        and len(figures["machine"]["load_average_before"]) == 3
    )
    assert figures["dataset"] == {
        "files": 12,
        "segments": figures["dataset"]["segments"],
        "kps": [100.0, 200.0, 800.0],
    }
    ours = figures["ours"]
    assert (
        ours["split"]["holdout"] == "kp=800" and len(ours["split"]["validation"]) == 4
    )  # the four kp = 800 files
    for fam, row in ours["families"].items():
        assert "error" not in row, (fam, row.get("error"))
        assert 0 < row["validation_position_mae"] < 1.0 and row["seconds"] > 0, fam
    assert {"dcmotor", "dcmotor_stribeck", "mlp"} <= set(ours["families"])
    assert ours["best_native"] == "dcmotor" and ours["best_overall"] in ours["families"]
    for fam in ("dcmotor", "dcmotor_stribeck"):  # even the first 1.5 s of kp = 800 drive it beyond training
        said = ours["families"][fam]["beyond_training"] or ""
        assert said.startswith("the validation recordings ask"), fam
    loo = figures["leave_one_kp_out"]["validation_position_mae"]
    assert set(loo) == {"kp=100", "kp=200", "kp=800"}
    assert all(0 < v < 1.0 for fold in loo.values() for v in fold.values())
    assert set(figures["acceptance"]) >= {
        "native_mae_over_bam_m1",
        "overall_mae_over_bam_m6",
        "native_time_over_bam_m1",
        "overall_time_over_bam_m6",
    }
    assert figures["time_to_bam"] == {"native_vs_m1": None, "overall_vs_m6": None}  # no BAM run, no target
