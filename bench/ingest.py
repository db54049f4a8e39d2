"""Ingest benchmark: read speed (MB/s) and peak memory of the canonical CSV / Parquet and the MCAP readers.

    .venv/bin/python bench/ingest.py              # 10 MB and 100 MB of each format; one JSON object on stdout
    .venv/bin/python bench/ingest.py --gb         # also 1 GB (minutes, and several GB of disk in --dir)
    .venv/bin/python bench/ingest.py --sizes 10   # a quick run

Each file is written first (12 joints: measured q, qd, tau and commanded q_des, qd_des, at 500 Hz), then
read once by `actuator_sysid.datasets.readers.read_paths` in a fresh process, which reports the read time,
its resident memory before reading (interpreter, libraries, and one 0.2 MB read of the same format so
that decoders and the allocator are warm, as in a running service) and its peak resident memory. The
figure that matters for MCAP is the peak over the baseline against the largest decoded segment (all of a
Segment's arrays): the reader must stay under 2× it whatever the file size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
JOINTS = 12
RATE = 500.0
MB = 1e6


def _rss_mb() -> float:
    """Current resident memory of this process [MB] (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def _peak_mb() -> float:
    """Peak resident memory of this process [MB]: VmHWM, the high-water mark of this program's own memory.

    Not getrusage's ru_maxrss: Linux carries it across fork and exec, so a child would report its parent's
    resident size whenever that was larger (the writer process holds ~270 MB after a 1 GB file).
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / MB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


# --------------------------------------------------------------------------------------------- writing


def _signals(n: int, start: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k = np.arange(start, start + n)
    t = k / RATE
    phase = np.arange(JOINTS)
    q_des = 0.8 * np.sin(2 * math.pi * 0.7 * t[:, None] + phase)
    q = q_des + 0.01 * rng.standard_normal((n, JOINTS))
    return {
        "t": t,
        "q": q,
        "qd": np.gradient(q, axis=0) * RATE,
        "tau": rng.standard_normal((n, JOINTS)),
        "q_des": q_des,
        "qd_des": np.gradient(q_des, axis=0) * RATE,
    }


def write_table(path: Path, size_mb: float) -> None:
    """Wide canonical table of about `size_mb`, written in blocks (CSV) or row groups (Parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [f"j{i}" for i in range(JOINTS)]
    rng = np.random.default_rng(0)
    block = 2_000
    start = 0
    writer = None
    path.unlink(missing_ok=True)
    while True:
        s = _signals(block, start, rng)
        cols = {"t": s["t"]}
        for j, name in enumerate(names):
            for ch in ("q", "qd", "tau", "q_des", "qd_des"):
                cols[f"{name}/{ch}"] = s[ch][:, j]
        table = pa.table(cols)
        if path.suffix == ".csv":
            import pyarrow.csv as pcsv

            with open(path, "ab") as f:
                pcsv.write_csv(table, f, pcsv.WriteOptions(include_header=start == 0))
            size = path.stat().st_size
        else:
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
            size = path.stat().st_size
        start += block
        if size >= size_mb * MB:
            break
    if writer is not None:
        writer.close()


def write_mcap(path: Path, size_mb: float) -> None:
    """ROS 2 MCAP of about `size_mb`: /joint_states (position, velocity, effort) and /joint_commands."""
    sys.path.insert(0, str(ROOT / "tests"))
    from mcap.writer import CompressionType
    from mcap_ros2.writer import Writer
    from test_readers import JOINT_STATE

    names = [f"j{i}" for i in range(JOINTS)]
    rng = np.random.default_rng(0)
    t0 = 1_700_000_000 * 10**9
    with open(path, "wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD)
        schema = w.register_msgdef("sensor_msgs/msg/JointState", JOINT_STATE)
        start, block = 0, 5000
        while f.tell() < size_mb * MB:
            s = _signals(block, start, rng)
            for i in range(block):
                ns = t0 + round(s["t"][i] * 1e9)
                stamp = {"sec": ns // 10**9, "nanosec": ns % 10**9}
                hdr = {"stamp": stamp, "frame_id": ""}
                w.write_message(
                    "/joint_states",
                    schema,
                    {
                        "header": hdr,
                        "name": names,
                        "position": s["q"][i].tolist(),
                        "velocity": s["qd"][i].tolist(),
                        "effort": s["tau"][i].tolist(),
                    },
                    log_time=ns,
                )
                w.write_message(
                    "/joint_commands",
                    schema,
                    {
                        "header": hdr,
                        "name": names,
                        "position": s["q_des"][i].tolist(),
                        "velocity": s["qd_des"][i].tolist(),
                        "effort": [],
                    },
                    log_time=ns,
                )
            start += block
        w.finish()


# --------------------------------------------------------------------------------------------- reading


def child(path: str, warmup: str) -> None:
    """In a fresh process: read once, print {seconds, baseline/peak RSS, largest decoded segment}."""
    import mcap.reader  # noqa: F401 - every library a reader needs is loaded before the baseline
    import mcap_ros2.decoder  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import rosbags.typesys  # noqa: F401

    from actuator_sysid.datasets import canonical, ros, walk_these_ways  # noqa: F401
    from actuator_sysid.datasets.readers import read_paths

    read_paths([Path(warmup)])  # a small file of the same format: decoders built, allocator warm
    base = _rss_mb()
    t = time.perf_counter()
    rec = read_paths([Path(path)])
    sec = time.perf_counter() - t
    peak = _peak_mb()
    seg = max(
        sum(a.nbytes for a in (s.t, s.q, s.qd, s.q_des, s.qd_des, s.tau_ff, s.tau) if a is not None)
        for s in rec.segments
    )
    print(
        json.dumps(
            {
                "seconds": sec,
                "baseline_rss_mb": base,
                "peak_rss_mb": peak,
                "largest_segment_mb": seg / MB,
                "samples": sum(s.n for s in rec.segments),
                "segments": len(rec.segments),
            }
        )
    )


def measure(fmt: str, size_mb: float, folder: Path) -> dict:
    path = folder / f"bench-{int(size_mb)}mb.{fmt}"
    t = time.perf_counter()
    (write_mcap if fmt == "mcap" else write_table)(path, size_mb)
    write_s = time.perf_counter() - t
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    warm = folder / f"warmup.{fmt}"
    (write_mcap if fmt == "mcap" else write_table)(warm, 0.2)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), str(warm)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    file_mb = path.stat().st_size / MB
    path.unlink()
    over = r["peak_rss_mb"] - r["baseline_rss_mb"]
    return {
        "file_mb": round(file_mb, 1),
        "read_s": round(r["seconds"], 2),
        "mb_per_s": round(file_mb / r["seconds"], 1),
        "samples": r["samples"],
        "segments": r["segments"],
        "baseline_rss_mb": round(r["baseline_rss_mb"], 1),
        "peak_rss_mb": round(r["peak_rss_mb"], 1),
        "peak_over_baseline_mb": round(over, 1),
        "largest_segment_mb": round(r["largest_segment_mb"], 1),
        "peak_over_segment": round(over / r["largest_segment_mb"], 2),
        "write_s": round(write_s, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10,100", help="file sizes in MB, comma-separated (default 10,100)")
    p.add_argument("--gb", action="store_true", help="also 1000 MB (slow; needs disk)")
    p.add_argument("--formats", default="csv,parquet,mcap")
    p.add_argument("--dir", help="where to write the temporary files (default: a temp dir)")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    sizes = [float(s) for s in args.sizes.split(",") if s] + ([1000.0] if args.gb else [])
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "joints": JOINTS,
        "rate_hz": RATE,
        "results": {},
    }
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="ingest-bench-") as tmp:
        for fmt in args.formats.split(","):
            for size in sizes:
                results["results"][f"{fmt}_{size:g}mb"] = measure(fmt, size, Path(tmp))
                print(f"{fmt} {size:g} MB: {results['results'][f'{fmt}_{size:g}mb']}", file=sys.stderr)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
