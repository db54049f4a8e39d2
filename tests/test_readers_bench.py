"""bench/ingest.py runs and prints its JSON figures (tiny files here; the real sizes are in BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT, pythonpath


def test_ingest_bench_prints_json_figures(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": pythonpath()}
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ingest.py"), "--sizes", "0.3", "--dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["results"]) == {"csv_0.3mb", "parquet_0.3mb", "mcap_0.3mb"}
    for row in out["results"].values():
        assert row["mb_per_s"] > 0 and row["peak_rss_mb"] >= row["baseline_rss_mb"] > 0
        assert row["samples"] > 0 and row["largest_segment_mb"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary files are gone
