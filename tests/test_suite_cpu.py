"""bench/suite_cpu.py counts the CPU of the processes a command starts, by kind, and passes on its exit status."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"


def test_a_child_process_cpu_is_counted_and_the_exit_status_passed_on() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "suite_cpu.py"),
            "--",
            sys.executable,
            "-c",
            BUSY + "\nraise SystemExit(3)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    figures = json.loads(out.stdout)
    assert out.returncode == 3 and figures["returncode"] == 3, out.stderr
    spent = [k for k in figures["by_kind"].values() if k["cpu_s"] >= 0.8]
    assert len(spent) == 1 and spent[0]["processes"] == 1, figures
    assert 0.8 <= figures["cpu_s"] <= figures["wall_s"] + 1.0, figures
