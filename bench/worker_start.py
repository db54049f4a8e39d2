"""Fit start-up: how long a small fit takes end to end (POST to its outcome) with spawned and with warm workers.

A server per mode (ACTUATOR_SYSID_WORKER_START=spawn, then warm) gets the small log of bench/service.py and
`--fits` small dcmotor fits one after another; each is timed from its POST until it succeeds. A spawned worker
imports the fitting stack every time; a warm one is forked from a forkserver that imported it once, so from the
second fit on the difference is the import. Prints one JSON object: per mode the seconds of every fit, and the
ratio of the later fits' medians.

Usage: python bench/worker_start.py [--fits 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service import start_server, upload_small_log  # noqa: E402

BODY = {"models": ["dcmotor"], "budget": {"generations": 5, "population": 8}}
FIT_TIMEOUT_S = 300


def one_mode(mode: str, fits: int, work: Path) -> list[float]:
    """Seconds of each fit, POST to outcome, on a server whose workers start `mode`."""
    os.environ["ACTUATOR_SYSID_WORKER_START"] = mode
    data = work / mode / "data"
    data.mkdir(parents=True)
    proc, url = start_server(data, 10 * 1024 * 1024)
    try:
        ds = upload_small_log(url)["id"]
        out = []
        for _ in range(fits):
            t0 = time.perf_counter()
            fit = requests.post(url + "/api/v1/fits", json={"dataset_id": ds, **BODY}, timeout=30).json()[
                "id"
            ]
            while True:
                status = requests.get(f"{url}/api/v1/fits/{fit}", timeout=10).json()["status"]
                if status in ("succeeded", "failed", "cancelled"):
                    break
                if time.perf_counter() - t0 > FIT_TIMEOUT_S:
                    raise RuntimeError(f"{mode}: fit {fit} still {status} after {FIT_TIMEOUT_S} s")
                time.sleep(0.1)
            if status != "succeeded":
                raise RuntimeError(f"{mode}: fit {fit} {status}")
            out.append(round(time.perf_counter() - t0, 2))
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fits", type=int, default=4, help="fits per mode, one after another (2-20)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if not 2 <= args.fits <= 20:
        ap.error("--fits must be between 2 and 20")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        seconds = {mode: one_mode(mode, args.fits, Path(tmp)) for mode in ("spawn", "warm")}
    later = {mode: statistics.median(s[1:]) for mode, s in seconds.items()}
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "fit_seconds": seconds,
        "later_fits_median_s": later,
        "spawn_over_warm": round(later["spawn"] / later["warm"], 2),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
