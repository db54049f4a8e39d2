"""The benchmark script keeps running and prints the figures BENCHMARKS.md quotes (a smoke run, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_rollout_bench_prints_json_figures() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "rollout.py"), "--quick", "--candidates", "32"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=True)
    figures = json.loads(out.stdout)
    for key in ("warp_cpu_1core", "warp_cpu_all_cores", "torch_oracle", "warp_traces"):
        assert figures[key] > 0, key
    sizes = figures["sizes"]
    assert len(sizes) == 3 and sizes[-1]["candidate_steps"] == 100 * sizes[0]["candidate_steps"]
    assert figures["ratios"]["warp_all_over_oracle"] > 0
    assert figures["fit_demo_dcmotor"]["evaluations"] > 0
