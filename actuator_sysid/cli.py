"""The `actuator-sysid` command: serve, inspect, fit, demo. A thin layer over the same core as the service.

Bad input prints one message on stderr and exits with code 2; there are no tracebacks for user errors.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .datasets.recording import DatasetError, JointInfo, Recording, Segment

if TYPE_CHECKING:
    from .fitting.api import FitRequest

EXIT_BAD_INPUT = 2


def _csv(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _read(args: argparse.Namespace) -> Recording:
    from .datasets.canonical import read_log

    return read_log(Path(args.log), Path(args.sidecar) if args.sidecar else None, args.format)


# --- serve ---


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP service (settings from ACTUATOR_SYSID_* variables, overridden by the flags)."""
    import uvicorn

    from .service.app import create_app
    from .service.settings import Settings

    given = {"host": args.host, "port": args.port, "data_dir": args.data_dir}
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")
    return 0


# --- inspect ---


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print what the reader made of a log: joints, segments, duration, rate, warnings."""
    from .service.storage import dumps

    print(dumps(_read(args).summary()))
    return 0


# --- fit ---


class _ProgressBar:
    """A fitting progress callback drawing a tqdm bar on stderr, opened on its first call."""

    def __init__(self, desc: str) -> None:
        self.desc = desc
        self.bar: Any = None

    def __call__(self, fraction: float, message: str) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=1000, desc=self.desc, file=sys.stderr, mininterval=0.2,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining} {postfix}")
        self.bar.set_postfix_str(message, refresh=False)
        self.bar.update(max(0, min(1000, round(fraction * 1000)) - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_fit(rec: Recording, req: FitRequest, out: Path, label: str) -> dict:
    """Fit with a progress bar and write fit.json, report.html, isaaclab.py and isaaclab.json into `out`."""
    from .service.jobs import compute_fit
    from .service.report import render_report
    from .service.storage import write_files

    progress = _ProgressBar(f"fitting {label}")
    try:
        fit = compute_fit(rec, req, progress)
    finally:
        progress.close()
    row = {"id": label, "title": f"fit of {label}", "status": "succeeded", "dataset_name": label,
           "request": asdict(req), "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
    html = render_report(row, fit.result, fit.report, standalone=True)
    write_files(out, {**fit.files(), "report.html": html})
    return fit.result


def _request(args: argparse.Namespace) -> FitRequest:
    """FitRequest from the flags; flags left out keep FitRequest's defaults (validation judges the rest)."""
    from .fitting.api import FitRequest

    given = {"joints": _csv(args.joints) if getattr(args, "joints", None) else None,
             "models": _csv(args.models) if getattr(args, "models", None) else None,
             "generations": args.generations, "population": args.population, "seed": args.seed}
    return FitRequest(**{k: v for k, v in given.items() if v is not None})


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit a log and write the results, the standalone report and the Isaac Lab exports."""
    rec = _read(args)
    out = Path(args.out) if args.out else Path("out") / Path(args.log).stem
    result = run_fit(rec, _request(args), out, Path(args.log).name)
    for joint, jr in result["joints"].items():
        print(f"{joint}: best model {jr['best_model']}", file=sys.stderr)
    print(f"wrote {out}/fit.json, report.html, isaaclab.py, isaaclab.json", file=sys.stderr)
    return 0


# --- demo ---

DEMO_FAMILY = "dcmotor"
DEMO_TRUTH = {  # stated DCMotor parameters the demo log is made from (Isaac Lab names, SI)
    "stiffness": 8.0, "damping": 0.3, "saturation_effort": 3.0, "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 1.8, "armature": 0.004, "friction": 0.03, "viscous_friction": 0.02,
}
DEMO_LOAD = {"mass": 0.5, "com_distance": 0.15}  # pendulum bob: m·g·l ≈ 0.74 N·m


def _demo_commands(rate_hz: float, seconds: float, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Commanded positions of the demo segments: chirps, steps and a sum of sines, up to ±1.6 rad."""
    t = np.arange(0.0, seconds, 1.0 / rate_hz)
    chirp = lambda a, f0, f1: a * np.sin(2 * np.pi * (f0 + (f1 - f0) * t / (2 * seconds)) * t)  # noqa: E731
    steps = np.repeat(rng.uniform(-1.6, 1.6, int(np.ceil(seconds / 0.5))), int(0.5 * rate_hz))[: t.size]
    return [
        ("chirp_small", chirp(0.5, 0.2, 3.0)),
        ("steps", steps),
        ("chirp_large", chirp(1.4, 0.2, 2.0)),
        ("sines", 0.9 * np.sin(2 * np.pi * 0.7 * t) + 0.5 * np.sin(2 * np.pi * 2.3 * t)),
        ("chirp_fast", chirp(0.9, 1.0, 4.0)),
    ]


def make_demo_recording(seed: int = 0, rate_hz: float = 200.0, seconds: float = 4.0) -> Recording:
    """A 1-joint pendulum log simulated from DEMO_TRUTH with the project's rollout, plus sensor noise."""
    from .fitting.api import simulate

    rng = np.random.default_rng(seed)
    segments = []
    for name, q_des in _demo_commands(rate_hz, seconds, rng):
        n = q_des.size
        z = np.zeros((n, 1))
        segments.append(Segment(name=name, t=np.arange(n) / rate_hz, q=z.copy(), qd=z.copy(),
                                q_des=q_des[:, None], qd_des=z.copy(), tau_ff=z.copy(),
                                metadata={"kp": DEMO_TRUTH["stiffness"], "kd": DEMO_TRUTH["damping"]}))
    rec = Recording(joints=[JointInfo("pendulum", **DEMO_LOAD)], segments=segments, source_format="demo",
                    velocity_source="simulated with the project's rollout kernel, plus Gaussian noise",
                    metadata={"demo_truth": {"family": DEMO_FAMILY, "params": DEMO_TRUTH}})
    sim = simulate(rec, "pendulum", DEMO_FAMILY, DEMO_TRUTH)
    for seg in rec.segments:
        s = sim[seg.name]
        seg.q = (s["q"] + rng.normal(0.0, 1e-3, seg.n))[:, None].astype(np.float64)
        seg.qd = (s["qd"] + rng.normal(0.0, 2e-2, seg.n))[:, None].astype(np.float64)
        seg.tau = (s["applied"] + rng.normal(0.0, 1e-2, seg.n))[:, None].astype(np.float64)
    return rec


def cmd_demo(args: argparse.Namespace) -> int:
    """Simulate a pendulum log from stated DCMotor parameters, fit it, and print truth next to the fit."""
    from .datasets.canonical import write_table
    from .models import parameters

    out = Path(args.out)
    rec = make_demo_recording(args.seed)
    write_table(rec, out / "demo_log.csv")
    print(f"wrote {out / 'demo_log.csv'} (+ sidecar demo_log.json): {len(rec.segments)} segments, "
          f"{rec.duration_s:.1f} s at {rec.rate_hz:.0f} Hz", file=sys.stderr)
    req = _request(args)
    req.models = ["ideal_pd", DEMO_FAMILY]
    result = run_fit(rec, req, out, "demo pendulum")
    jr = result["joints"]["pendulum"]
    fitted = jr["models"][DEMO_FAMILY]["params"]
    print(f"best model: {jr['best_model']} (truth: {DEMO_FAMILY})")
    print(f"{'parameter':<26}{'unit':<12}{'truth':>12}{'fitted':>12}{'error':>10}")
    for name, truth in DEMO_TRUTH.items():
        got = fitted.get(name)
        err = f"{100 * (got - truth) / truth:+.1f}%" if got is not None else "—"
        got_s = f"{got:.4g}" if got is not None else "—"
        print(f"{name:<26}{parameters.get(name).unit:<12}{truth:>12.4g}{got_s:>12}{err:>10}")
    for split in ("train", "validation"):
        m = jr["models"][DEMO_FAMILY]["metrics"].get(split) or {}
        if "position_rmse" in m:
            print(f"{split} position RMSE: {m['position_rmse']:.4g} rad")
    print(f"wrote {out}/fit.json, report.html, isaaclab.py, isaaclab.json", file=sys.stderr)
    return 0


# --- entry point ---


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="actuator-sysid", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP service and web UI")
    s.add_argument("--host", help="listen address (default ACTUATOR_SYSID_HOST or 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port (default ACTUATOR_SYSID_PORT or 8000)")
    s.add_argument("--data-dir", help="where datasets, fits and the database live (default ./data)")
    s.set_defaults(func=cmd_serve)

    def log_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("log", help="joint log: canonical CSV or Parquet table")
        sp.add_argument("--sidecar", help="metadata JSON (default: <log>.json or <stem>.json beside the log)")
        sp.add_argument("--format", help="csv or parquet (default: detect from the content)")

    def budget_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        sp.add_argument("--generations", type=int, help="CMA-ES generations per model family")
        sp.add_argument("--population", type=int, help="CMA-ES population size")

    i = sub.add_parser("inspect", help="print what the reader makes of a log, as JSON")
    log_args(i)
    i.set_defaults(func=cmd_inspect)

    f = sub.add_parser("fit", help="fit actuator models to a log and write results, report and exports")
    log_args(f)
    f.add_argument("--models", help="comma-separated model families, e.g. dcmotor,ideal_pd (default dcmotor)")
    f.add_argument("--joints", help="comma-separated joints to fit (default: all)")
    budget_args(f)
    f.add_argument("--out", help="output folder (default out/<log stem>)")
    f.set_defaults(func=cmd_fit)

    d = sub.add_parser("demo", help="simulate a pendulum log from known DCMotor parameters and fit it")
    d.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    budget_args(d)
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run a subcommand; user errors → message on stderr and exit code 2."""
    from .fitting.api import FitRequestError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (DatasetError, FitRequestError) as e:
        print(f"actuator-sysid {args.command}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"actuator-sysid {args.command}: error: {e.strerror or e}: {e.filename or ''}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
