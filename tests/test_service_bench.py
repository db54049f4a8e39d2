"""bench/service.py keeps running and prints the figures BENCHMARKS.md quotes (a smoke run, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, pythonpath


def test_service_bench_quick_prints_json_figures() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "service.py"), "--quick"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT, check=True, env={"PYTHONPATH": pythonpath(),
                                                                           "PATH": "/usr/bin:/bin"})
    figures = json.loads(out.stdout)
    load, upload = figures["status_routes_during_fit"], figures["upload"]
    assert load["requests"] > 0 and load["errors"] == 0 and load["fit_running_throughout"]
    assert load["latency_ms"]["p99"] > 0
    assert upload["status"] == 201 and upload["bytes"] > 4_000_000 and upload["mb_per_s"] > 0
    assert upload["server_rss_growth_mb"] < 64
    assert set(figures["targets_met"]) == {"p99_le_50ms", "no_errors", "rss_growth_le_64mb"}
