"""CPU seconds by kind of process while a command runs (e.g. `make test` in a clean clone).

Reads every process's user + system time from /proc twice a second and keeps the last reading per process, so
servers, forkservers, fit workers, Chromium and subprocess tests are counted beside the pytest workers. A process
that lives under half a second is missed. Linux only. Prints one JSON object on stdout.

    python bench/suite_cpu.py -- make test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter

TICK = os.sysconf("SC_CLK_TCK")

# (kind, substrings of the command line that mark it), first match wins
KINDS = (
    ("pytest worker", ("exec(eval(sys.stdin",)),
    ("forkserver and the fit workers it forked", ("multiprocessing.forkserver",)),
    ("spawned (parse workers, spawned fit workers)", ("multiprocessing.spawn",)),
    ("server app", ("actuator_sysid.cli serve",)),
    ("chromium", ("chrom",)),
    ("mypy", ("mypy",)),
    ("ray", ("ray/", "raylet", "gcs_server", "ray start")),
    ("install (uv, pip, warmup)", ("uv", "pip", "warmup")),
    ("schemathesis", ("schemathesis",)),
    ("bench script run by a test", ("/bench/",)),
    ("pytest controller", ("-m pytest",)),
)


def kind(cmd: str) -> str:
    """The KINDS entry a command line falls under, else its first 60 characters."""
    return next(
        (k for k, marks in KINDS if any(m in cmd for m in marks)), cmd[:60] or "(exited before it was read)"
    )


def snapshot(seen: dict[tuple[int, int], list]) -> None:
    """Update each live process's [command line, CPU seconds], keyed by (pid, start time) so a reused pid is new."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / TICK
            key = (int(name), int(fields[19]))
            if key not in seen:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    seen[key] = [f.read().replace(b"\0", b" ").decode(errors="replace"), cpu]
            else:
                seen[key][1] = cpu
        except (OSError, ValueError, IndexError):  # gone between listdir and open
            continue


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    seen: dict[tuple[int, int], list] = {}
    snapshot(seen)
    before = set(seen)  # what ran before the command is not counted
    t0 = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        snapshot(seen)
        time.sleep(0.5)
    wall = time.monotonic() - t0
    by_kind: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for key, (cmd, cpu) in seen.items():
        if key in before or key[0] == os.getpid():
            continue
        k = kind(cmd)
        by_kind[k] += cpu
        count[k] += 1
    out = {
        "command": command,
        "returncode": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(sum(by_kind.values()), 1),
        "by_kind": {k: {"cpu_s": round(v, 1), "processes": count[k]} for k, v in by_kind.most_common()},
    }
    print(json.dumps(out, indent=2))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
