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
    rates = figures["candidate_steps_per_s"]
    assert set(rates) == {"warp_loss_only", "warp_traces", "torch_oracle"}
    assert all(v > 0 for v in rates.values())
    assert figures["ratios"]["warp_loss_over_oracle"] > 0
    assert figures["fit_demo_dcmotor"]["evaluations"] > 0
