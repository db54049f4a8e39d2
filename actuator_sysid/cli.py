"""The `actuator-sysid` command: serve, inspect, fit, demo. A thin layer over the same core as the service.

Bad input prints one message on stderr and exits with code 2; there are no tracebacks for user errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .datasets.recording import DatasetError, JointInfo, Recording, Segment

if TYPE_CHECKING:
    from .fitting.fit import FitRequest
    from .fitting.result import FitResult, JointFit

EXIT_BAD_INPUT = 2


class UsageError(ValueError):
    """A flag or setting the user gave that the command refuses; main prints it and exits with EXIT_BAD_INPUT."""


def _invalid(e: Any, names: Mapping[str, str]) -> UsageError:
    """A pydantic ValidationError as one line per problem, each under the flag (`names`) that gave the value."""
    parts = []
    for err in e.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        where = names.get(field, f"ACTUATOR_SYSID_{field.upper()}" if field else "value")
        parts.append(f"{where}: {err['msg']}, got {str(err.get('input'))[:80]!r}")
    return UsageError("; ".join(parts))


SETTINGS_FLAGS = {
    "host": "--host",
    "port": "--port",
    "data_dir": "--data-dir",
    "database_url": "--database-url",
    "executor": "--executor",
    "ray_address": "--ray-address",
    "workers": "--workers",
}


def _settings(given: dict[str, Any]) -> Any:
    """The service's Settings from the flags given (None: left out) over ACTUATOR_SYSID_* variables; a value
    either refuses (a port past 65535, no workers) is a UsageError naming the flag or the variable."""
    from pydantic import ValidationError

    from .service.settings import Settings

    try:
        return Settings(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as e:
        names = {k: f"{flag} (or ACTUATOR_SYSID_{k.upper()})" for k, flag in SETTINGS_FLAGS.items()}
        raise _invalid(e, names) from None


@contextmanager
def _database(url: str) -> Iterator[None]:
    """Opening the service's database at `url`: a URL SQLAlchemy cannot use, or a database it cannot reach, is
    a UsageError that says which."""
    from sqlalchemy.exc import ArgumentError, OperationalError

    shown = url.split("@")[-1] if "@" in url else url  # no password in the message
    try:
        yield
    except ArgumentError as e:
        raise UsageError(
            f"--database-url {shown[:120]!r}: {e}; use e.g. postgresql+psycopg://user@host/db or sqlite:///path"
        ) from None
    except OperationalError as e:
        reason = str(e.orig or e).strip().splitlines()[0][:200]
        raise UsageError(f"--database-url {shown[:120]!r}: cannot open the database ({reason})") from None


def _csv(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def _read(args: argparse.Namespace) -> Recording:
    """Read the log(s) named on the command line, in any supported format (datasets.readers)."""
    from .datasets.readers import read_paths
    from .datasets.sources import ReadOptions, parse_names

    opts = ReadOptions(
        fmt=args.format,
        joint_names=parse_names(args.joint_names),
        state_topic=args.state_topic,
        command_topic=args.command_topic,
        positions=args.positions,
        targets=args.targets,
        velocities=args.velocities,
        rate_hz=args.rate,
    )
    opts.validate("command line")
    return read_paths([Path(p) for p in args.log], Path(args.sidecar) if args.sidecar else None, opts)


# --- serve ---


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP service (settings from ACTUATOR_SYSID_* variables, overridden by the flags)."""
    import uvicorn

    from .service.app import create_app
    from .service.logs import configure_logging
    from .service.settings import Settings

    settings: Settings = _settings({k: getattr(args, k) for k in SETTINGS_FLAGS})
    configure_logging(settings.log_format)
    with _database(settings.database_url):
        app = create_app(settings)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    """Create, list or revoke API tokens in the service's database (only a hash of each token is kept)."""
    settings = _settings({"data_dir": args.data_dir, "database_url": args.database_url})
    from .service.db import Repository

    with _database(settings.database_url):
        repo = Repository(settings.database_url)
    try:
        if args.action == "create":
            print(repo.create_token(args.project, args.name or ""))
            print(f"token for project {args.project!r}: shown once, keep it secret", file=sys.stderr)
        elif args.action == "list":
            for t in repo.list_tokens():
                print(f"{t['id']}  {t['project']:<20} {t['created_at'][:19]}  {t['name']}")
        elif not args.id:
            raise UsageError("token revoke: give the id of the token to revoke (see `token list`)")
        elif not repo.revoke_token(args.id):
            print(
                f"actuator-sysid token revoke: no token with id {args.id!r} (see `token list`)",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
    finally:
        repo.close()
    return 0


# --- inspect ---


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print what the reader made of a log: joints, segments, duration, rate, warnings."""
    from .files import dumps

    summary = _read(args).summary()
    print(dumps(summary))
    print(_digest(summary), file=sys.stderr)
    return 0


def _digest(summary: dict) -> str:
    """The summary in a few lines for a person: joints, segments, rate, duration, warnings."""
    q = summary.get("quality", {})
    segs = q.get("segments", [])
    lines = [
        f"joints: {', '.join(summary['joints'])}",
        f"segments: {summary['segments']} ({', '.join(s['name'] for s in segs[:8])}"
        f"{', ...' if len(segs) > 8 else ''})",
        f"rate: {summary['rate_hz']:.6g} Hz, duration: {summary['duration_s']:.6g} s, "
        f"format: {summary['source_format']}",
    ]
    lines += [f"note: {w}" for w in summary.get("warnings", [])]
    lines += [f"quality: {w}" for w in q.get("warnings", [])]
    return "\n".join(lines)


# --- excite ---


def cmd_excite(args: argparse.Namespace) -> int:
    """Design an excitation within the bounds and write it as canonical CSV + JSON sidecar."""
    import json

    from .datasets.excitation import ExcitationError, ExcitationSpec
    from .fitting.design import excitation_with_identifiability, format_prediction

    given = {
        k: getattr(args, k)
        for k in (
            "kind",
            "duration",
            "rate",
            "q_min",
            "q_max",
            "qd_max",
            "tau_max",
            "f_min",
            "f_max",
            "inertia",
            "mass",
            "com_distance",
            "gravity",
            "joint",
            "seed",
            "kp",
            "kd",
            "noise_q",
            "noise_qd",
        )
    }
    if args.families is not None:
        given["families"] = [m.strip() for m in args.families.split(",") if m.strip()]
    if args.nominal:
        nominal = {}
        for item in args.nominal.split(","):
            name, sep, value = item.partition("=")
            try:
                nominal[name.strip()] = float(value)
            except ValueError:
                sep = ""
            if not sep:
                raise ExcitationError(f"--nominal: {item!r} is not NAME=NUMBER (e.g. stiffness=25,delay=2)")
        given["nominal"] = nominal
    spec = ExcitationSpec(**{k: v for k, v in given.items() if v is not None})
    text, side, pred = excitation_with_identifiability(spec)
    if pred is not None:
        print(format_prediction(pred), file=sys.stderr)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".json").write_text(json.dumps(side, indent=1))
        peak = side["excitation"]["peak"]
        print(
            f"wrote {out} (+ sidecar {out.with_suffix('.json').name}): {spec.kind}, {spec.duration:g} s at "
            f"{spec.rate:g} Hz; q in [{peak['q_min']:.4g}, {peak['q_max']:.4g}] rad, |qd| ≤ "
            f"{peak['qd_abs']:.4g} rad/s, rigid-body |tau| ≤ {peak['tau_rigid_body_abs']:.4g} N·m",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
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

            self.bar = tqdm(
                total=1000,
                desc=self.desc,
                file=sys.stderr,
                mininterval=0.2,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining} {postfix}",
            )
        self.bar.set_postfix_str(message, refresh=False)
        self.bar.update(max(0, min(1000, round(fraction * 1000)) - self.bar.n))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_fit(rec: Recording, req: FitRequest, out: Path, label: str) -> FitResult:
    """Fit with a progress bar and write fit.json, report.html, isaaclab.py and isaaclab.json into `out`; the
    result as fit.json holds it."""
    from .files import write_files
    from .fitting.result import as_result
    from .pipeline import compute_fit
    from .service.report import render_report

    progress = _ProgressBar(f"fitting {label}")
    try:
        fit = compute_fit(rec, req, progress, {"dataset": label})
    finally:
        progress.close()
    row = {
        "id": label,
        "title": f"fit of {label}",
        "status": "succeeded",
        "dataset_name": label,
        "request": asdict(req),
        "created_at": fit.result["created_at"],  # the one the exports state, set by compute_fit
    }
    validation = json.loads(fit.exports["validation.json"]) if "validation.json" in fit.exports else None
    html = render_report(row, fit.result, fit.report, standalone=True, validation=validation)
    write_files(out, {**fit.files(), "report.html": html})
    return as_result(fit.result)


def _request(args: argparse.Namespace) -> FitRequest:
    """FitRequest from the flags; flags left out keep FitRequest's defaults (validation judges the rest)."""
    from .fitting.fit import FitRequest

    given = {
        "joints": _csv(args.joints) if getattr(args, "joints", None) else None,
        "families": _csv(args.families) if getattr(args, "families", None) else None,
        "generations": args.generations,
        "population": args.population,
        "seed": args.seed,
        "decimation": getattr(args, "decimation", None),
        "effort_mode": getattr(args, "effort_mode", None),
        "joint_terms": _csv(args.joint_terms) if getattr(args, "joint_terms", None) else None,
        "add_terms": _csv(args.add_terms) if getattr(args, "add_terms", None) else None,
        "holdout": getattr(args, "holdout", None),
        "folds": getattr(args, "folds", None),
        "folds_by": getattr(args, "folds_by", None),
        "budget_s": getattr(args, "budget", None),
        "validate_last": getattr(args, "validate_last", None),
        "ladder_judge": getattr(args, "ladder_judge", None),
        "networks": _net_options(args),
    }
    req = FitRequest(**{k: v for k, v in given.items() if v is not None})
    if hasattr(args, "families") and args.families is None:  # no family named: the default ladder
        req.families = None
    return req


def device_gain_lines(gains: Mapping[str, Any] | None) -> list[str]:
    """The fitted device-unit conversion in words: gain scale with its interval, SI gains per logged kp."""
    if not gains:
        return []
    out = []
    fmt = lambda d: ", ".join(f"kp {k}: {v:.4g}" for k, v in d.items())  # noqa: E731
    if "gain_scale" in gains:
        iv = gains.get("gain_scale_interval")
        ci = f" (95 % {iv[0]:.4g}–{iv[1]:.4g})" if iv else ""
        out.append(
            f"device gains: stiffness = {gains['gain_scale']:.4g}{ci} N·m/rad per firmware kp unit "
            f"(reference kp {gains['kp_reference']:g}); SI stiffness {fmt(gains['stiffness_at'])} N·m/rad"
        )
    if "damping_scale" in gains:
        out.append(
            f"device gains: damping = {gains['damping_scale']:.4g} N·m·s/rad per firmware kd unit "
            f"(reference kd {gains['kd_reference']:g}); SI damping "
            + ", ".join(f"kd {k}: {v:.4g}" for k, v in gains["damping_at"].items())
        )
    if "vin_reference" in gains and len(gains.get("saturation_effort_at", {})) > 1:
        out.append(
            f"supply: envelope stated at {gains['vin_reference']:g} V; saturation effort "
            + ", ".join(f"{k} V: {v:.4g}" for k, v in gains["saturation_effort_at"].items())
            + " N·m"
        )
    return out


def ranking_lines(jr: JointFit) -> list[str]:
    """The joint's ranking, one family a line, in the error it is ranked by: validation torque RMSE (MAE, R²,
    % of the torque range) when a net learned measured torque, else position RMSE."""
    out = []
    for k, row in enumerate(jr.ranking, 1):
        m = jr.models[row.family]
        if row.metric == "torque_rmse" and row.torque_rmse is not None:
            extra = [
                f"{label} {fmt.format(v)}"
                for key, label, fmt in (
                    ("torque_mae", "MAE", "{:.4g} N·m"),
                    ("torque_r2", "R²", "{:.3f}"),
                    ("torque_rmse_of_range", "", "{:.1%} of the torque range"),
                )
                if (v := m.torque_error(row.split or "validation", key)) is not None
            ]
            text = (
                f"{row.split} torque RMSE {row.torque_rmse:.4g} N·m ({', '.join(x.strip() for x in extra)})"
            )
        else:
            text = f"{row.split} position RMSE {row.position_rmse:.4g} rad"
        out.append(f"{k}. {row.family}: {text}")
    return out


def ladder_lines(result: FitResult) -> list[str]:
    """What a fit with no family named tried and what each rung bought (fitting/ladder.py); none otherwise."""
    ladder = result.extra.get("ladder")
    if not isinstance(ladder, Mapping):
        return []
    return [f"ladder (no --families): {ladder.get('rule', '')}", *(f"  {n}" for n in ladder.get("notes", []))]


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit a log and write the results, the standalone report and the Isaac Lab exports."""
    if getattr(args, "robot", None) and getattr(args, "inertials", False):
        return cmd_fit_inertials(args)
    if getattr(args, "robot", None):
        return cmd_fit_robot(args)
    rec = _read(args)
    out = Path(args.out) if args.out else Path("out") / Path(args.log[0]).stem
    result = run_fit(rec, _request(args), out, Path(args.log[0]).name)
    from .service.report import fidelity_gaps

    verdict = result.verdict
    print(f"verdict: {(verdict.verdict if verdict else 'not judged').upper()}", file=sys.stderr)
    for c in verdict.checks if verdict else ():
        print(f"  {'ok' if c.status == 'ok' else c.status:>6}  {c.reason}", file=sys.stderr)
    for line in ladder_lines(result):
        print(line, file=sys.stderr)
    for joint, jr in result.joints.items():
        print(f"{joint}: best model {jr.best_model}", file=sys.stderr)
        for line in ranking_lines(jr):
            print(f"{joint}:   {line}", file=sys.stderr)
        for family, m in jr.models.items():
            if m.is_network and (how := getattr(m, "training", {}).get("early_stopping")):
                print(f"{joint}: {family} early stopping watched {how}", file=sys.stderr)
        for line in fidelity_gaps(jr.ranking):  # what a consumer-native family gives up
            print(f"{joint}: {line}", file=sys.stderr)
        for line in device_gain_lines(jr.device_gains):
            print(f"{joint}: {line}", file=sys.stderr)
    print(f"wrote {out}/fit.json, report.html, isaaclab.py, isaaclab.json", file=sys.stderr)
    return 0


ROBOT_FLAGS = {  # RobotFitIn's field → the `fit --robot` flag that gives it
    "kp": "--kp",
    "kd": "--kd",
    "delay": "--delay",
    "decimation": "--decimation",
    "iterations": "--generations",
    "budget_s": "--budget",
    "bias_limit": "--bias-limit",
    "validation_fraction": "--validate-last",
}


def _check_robot_flags(args: argparse.Namespace) -> None:
    """The robot fit's numeric flags against the API's own model of a robot fit's options (RobotFitIn): one set
    of bounds and messages for both; a UsageError naming the flag."""
    from pydantic import ValidationError

    from .service.robots import RobotFitIn

    given = {field: getattr(args, flag[2:].replace("-", "_")) for field, flag in ROBOT_FLAGS.items()}
    if given["delay"] == "scan":  # the flag's word for "no fixed delay"
        given["delay"] = None
    try:
        RobotFitIn(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as e:
        raise _invalid(e, ROBOT_FLAGS) from None


def cmd_fit_robot(args: argparse.Namespace) -> int:
    """`fit LOG --robot MODEL`: a coupled fit of every actuator through the robot's own model (fitting/robot/)."""
    from .fitting.result import RobotResult
    from .fitting.robot import (
        RobotFitOptions,
        parse_groups,
        require_stand,
        result_lines,
        write_robot_fit,
    )
    from .models.robot import RobotError, load_robot

    _check_robot_flags(args)
    stand = require_stand(args.floating, args.fixed_base)
    packages = tuple(Path(p) for p in args.package_root or ())
    robot = load_robot(args.robot, fixed_base=args.fixed_base, package_roots=packages)
    if stand:
        robot.notes.append(stand)
    try:
        rec = _read(args)
    except DatasetError as e:
        if args.joint_names or "no joint names" not in str(e):
            raise
        args.joint_names = ",".join(robot.joint_names)  # an unnamed log: the model's actuated-joint order
        try:
            rec = _read(args)
        except DatasetError as e2:
            raise RobotError(
                f"{e2}; the robot model {Path(args.robot).name} has {len(robot.joint_names)} actuated "
                f"joint(s): {', '.join(robot.joint_names)}"
            ) from None
        rec.metadata["joint_names_from"] = "robot"
    delay = None if args.delay in (None, "scan") else int(args.delay)
    if getattr(args, "folds", None) or getattr(args, "folds_by", None):
        raise RobotError(
            "--folds / --folds-by: a robot fit validates on held-out recordings (the last ones, or "
            "--holdout KEY=VALUE); this version does not cross-validate"
        )
    # the flags by the options' names (RobotFitOptions.from_fields); those whose text the fit does not read as is
    opts = RobotFitOptions.from_fields(
        vars(args)
        | {
            "groups": parse_groups(args.groups),
            "payload": [b.strip() for b in args.payload.split(",") if b.strip()] if args.payload else None,
            "delay": delay,
            "fit_bias": not args.no_bias,
            "validation_fraction": getattr(args, "validate_last", None),
        }
    )
    from .pipeline import compute_robot_fit  # the worker's path too

    # the CLI writes no robot report: the validation traces' extra replay would go unread
    fit = compute_robot_fit(
        rec,
        robot,
        opts,
        lambda _f, m: print(m, file=sys.stderr, flush=True),
        select=bool(getattr(args, "select", True)),  # the configuration chosen on the training part alone
        traces=False,
    )
    assert isinstance(fit.typed, RobotResult)
    result = fit.typed
    out = Path(args.out) if args.out else Path("out") / Path(args.log[0]).stem
    files = write_robot_fit(result, fit.exports, out)  # fit.json and the rendered exports, each once
    from .export.robot import export_lines

    for line in result_lines(result) + export_lines(result):
        print(line, file=sys.stderr)
    print(f"wrote {out}/{', '.join(files)}", file=sys.stderr)
    return 0


# --- demo ---

DEMO_FAMILY = "dcmotor"
DEMO_TRUTH = {  # stated DCMotor parameters the demo log is made from (Isaac Lab names, SI)
    "stiffness": 8.0,
    "damping": 0.3,
    "saturation_effort": 3.0,
    "actuator_velocity_limit": 9.0,
    "actuator_effort_limit": 1.8,
    "armature": 0.004,
    "friction": 0.03,
    "viscous_friction": 0.02,
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
    from .fitting.fit import simulate

    rng = np.random.default_rng(seed)
    segments = []
    for name, q_des in _demo_commands(rate_hz, seconds, rng):
        n = q_des.size
        z = np.zeros((n, 1))
        segments.append(
            Segment(
                name=name,
                t=np.arange(n) / rate_hz,
                q=z.copy(),
                qd=z.copy(),
                q_des=q_des[:, None],
                qd_des=z.copy(),
                tau_ff=z.copy(),
                metadata={"kp": DEMO_TRUTH["stiffness"], "kd": DEMO_TRUTH["damping"]},
            )
        )
    rec = Recording(
        joints=[JointInfo("pendulum", mass=DEMO_LOAD["mass"], com_distance=DEMO_LOAD["com_distance"])],
        segments=segments,
        source_format="demo",
        velocity_source="simulated with the project's rollout kernel, plus Gaussian noise",
        metadata={"demo_truth": {"family": DEMO_FAMILY, "params": DEMO_TRUTH}},
    )
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
    from .fitting.request import check_numbers
    from .models import parameters

    out = Path(args.out)
    req = _request(args)
    check_numbers(req)  # the seed seeds the demo log too: refused before it is made
    rec = make_demo_recording(args.seed)
    write_table(rec, out / "demo_log.csv")
    print(
        f"wrote {out / 'demo_log.csv'} (+ sidecar demo_log.json): {len(rec.segments)} segments, "
        f"{rec.duration_s:.1f} s at {rec.rate_hz:.0f} Hz",
        file=sys.stderr,
    )
    req.families = ["ideal_pd", DEMO_FAMILY]
    result = run_fit(rec, req, out, "demo pendulum")
    jr = result.joints["pendulum"]
    model = jr.models[DEMO_FAMILY]
    fitted = model.params
    print(f"best model: {jr.best_model} (truth: {DEMO_FAMILY})")
    print(f"{'parameter':<26}{'unit':<12}{'truth':>12}{'fitted':>12}{'error':>10}")
    for name, truth in DEMO_TRUTH.items():
        got = fitted.get(name)
        err = f"{100 * (got - truth) / truth:+.1f}%" if got is not None else "—"
        got_s = f"{got:.4g}" if got is not None else "—"
        print(f"{name:<26}{parameters.get(name).unit:<12}{truth:>12.4g}{got_s:>12}{err:>10}")
    for split, m in (("train", model.metrics.train), ("validation", model.metrics.validation)):
        if m is not None and m.position_rmse is not None:
            print(f"{split} position RMSE: {m.position_rmse:.4g} rad")
    print(f"wrote {out}/fit.json, report.html, isaaclab.py, isaaclab.json", file=sys.stderr)
    return 0


# --- export, validate ---


def _families(text: str | None) -> dict[str, str] | str | None:
    """--family: one family for every joint, or joint=family pairs."""
    if not text:
        return None
    if "=" not in text:
        return text.strip()
    return dict(item.split("=", 1) for item in _csv(text))


def cmd_export(args: argparse.Namespace) -> int:
    """Render one export of a stored fit (fit.json), a joint fit's or a whole-robot fit's (through its robot
    model); the recording gives the bench load if needed."""
    from .datasets.jsontext import loads_bounded
    from .export import BINARY_FORMATS, ExportError, render_bytes, render_format

    src = Path(args.fit)
    fit_json = src / "fit.json" if src.is_dir() else src
    if not fit_json.is_file():
        raise DatasetError(f"{fit_json}: not found; pass a fit folder (with fit.json) or the fit.json file")
    result = loads_bounded(fit_json.read_bytes(), str(fit_json))  # a damaged file: a message, not a traceback
    if not isinstance(result, dict):
        raise DatasetError(f"{fit_json}: not a fit result (a JSON object); pass the fit.json a fit wrote")
    rec = None
    if args.log:
        from .datasets.readers import read_paths

        rec = read_paths([Path(p) for p in args.log], Path(args.sidecar) if args.sidecar else None)
    loads = None
    bench = fit_json.parent / "validation.json"
    if rec is None and bench.is_file():
        loads = loads_bounded(bench.read_bytes(), str(bench)).get("bench") or None
    if args.export_format in BINARY_FORMATS:  # a network checkpoint: bytes, to a file
        try:
            data = render_bytes(result, args.export_format, families=_families(args.family))
        except ExportError as e:
            print(f"actuator-sysid export: error: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        target = Path(args.out or args.export_format)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"wrote {target}", file=sys.stderr)
        return 0
    try:
        from .export.operating import parse_at
        from .export.selection import parse_assignments, parse_rename

        text = render_format(
            result,
            rec,
            args.export_format,
            families=_families(args.family),
            at=parse_at(args.at),
            field_names=args.field_names,
            backend=args.backend,
            loads=loads,
            robot=args.robot,
            package_roots=tuple(Path(p) for p in args.package_root or ()),
            unidentified=args.unidentified,
            given=parse_assignments(args.set),
            rename=parse_rename(args.rename),
        )
    except (ExportError, KeyError) as e:
        print(f"actuator-sysid export: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a USD file's Newton actuation (NEWTON.DJ.001); exit 1 when there is an error finding."""
    from .export.validate import validate_usd

    path = Path(args.usd)
    if not path.is_file():
        raise DatasetError(f"{path}: not found")
    if path.suffix.lower() not in USD_SUFFIXES:
        raise DatasetError(f"{path}: not a USD file; validate reads {', '.join(USD_SUFFIXES)} files")
    try:
        findings = validate_usd(path)
    except ValueError as e:
        print(f"actuator-sysid validate: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for f in findings:
        print(f"{f.severity.upper()} {f.code} {f.where}: {f.message}")
    errors = sum(f.severity == "error" for f in findings)
    print(f"{path}: {errors} error(s), {len(findings) - errors} other finding(s)", file=sys.stderr)
    return 1 if errors else 0


# --- entry point ---


def build_parser() -> argparse.ArgumentParser:
    """The `actuator-sysid` command line: one builder per subcommand."""
    p = argparse.ArgumentParser(prog="actuator-sysid", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        _serve_parser,
        _token_parser,
        _inspect_parser,
        _fit_parser,
        _excite_parser,
        _demo_parser,
        _export_parser,
        _validate_parser,
        _warmup_parser,
    ):
        add(sub)
    return p


def _serve_parser(sub: argparse._SubParsersAction) -> None:
    """`serve`: the HTTP service and web UI."""
    s = sub.add_parser("serve", help="run the HTTP service and web UI")
    s.add_argument("--host", help="listen address (default ACTUATOR_SYSID_HOST or 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port (default ACTUATOR_SYSID_PORT or 8000)")
    s.add_argument("--data-dir", help="where datasets, fits and the database live (default ./data)")
    s.add_argument(
        "--database-url",
        help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db "
        "(default ACTUATOR_SYSID_DATABASE_URL or SQLite in the data dir)",
    )
    s.add_argument(
        "--executor", choices=["local", "ray"], help="where fits run (default local worker processes)"
    )
    s.add_argument("--ray-address", help="Ray head to submit fits to, host:port (with --executor ray)")
    s.add_argument("--workers", type=int, help="fits running at once (default 1)")
    s.set_defaults(func=cmd_serve)


def _token_parser(sub: argparse._SubParsersAction) -> None:
    """`token`: API tokens on the server's database."""
    tk = sub.add_parser("token", help="create, list or revoke API tokens")
    tk.add_argument("action", choices=["create", "list", "revoke"])
    tk.add_argument("id", nargs="?", help="token id to revoke (from `token list`)")
    tk.add_argument(
        "--project", default="default", help="project the token may see and write (default default)"
    )
    tk.add_argument("--name", help="a label, e.g. who holds the token")
    tk.add_argument("--data-dir", help="the server's data dir (default ./data)")
    tk.add_argument("--database-url", help="the server's database URL, if not SQLite in the data dir")
    tk.set_defaults(func=cmd_token)


def _log_args(sp: argparse.ArgumentParser) -> None:
    """The log arguments every subcommand that reads a log shares; formats from the reader registry."""
    from .datasets.readers import registry  # importing readers registers every log format

    sp.add_argument(
        "log", nargs="+", help=f"joint log(s): files, folders or zips of one dataset ({registry.labels()})"
    )
    sp.add_argument("--sidecar", help="metadata JSON (default: <log>.json or <stem>.json beside the log)")
    sp.add_argument("--format", help=f"{registry.format_list()} (default: detect from the content)")
    sp.add_argument(
        "--joint-names",
        help="comma-separated joint names, for files without them (PACE, "
        "Float64MultiArray commands, LeRobot, Isaac Lab HDF5)",
    )
    sp.add_argument("--state-topic", help="ROS: the measured sensor_msgs/JointState topic")
    sp.add_argument(
        "--command-topic", help="ROS: the command topic (JointState, JointTrajectory or Float64MultiArray)"
    )
    sp.add_argument("--positions", help="HDF5: dataset of joint positions in each demo, e.g. obs/joint_pos")
    sp.add_argument("--targets", help="HDF5: dataset of position targets in each demo, e.g. actions")
    sp.add_argument("--velocities", help="HDF5: dataset of joint velocities in each demo (optional)")
    sp.add_argument(
        "--rate",
        type=float,
        help="sample rate in Hz for logs without time stamps (Isaac Lab "
        "HDF5: required; actuator-net CSV: default 50)",
    )


def _budget_args(sp: argparse.ArgumentParser) -> None:
    """Seed and search budget, shared by fit and demo."""
    sp.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sp.add_argument("--generations", type=int, help="CMA-ES generations per model family")
    sp.add_argument("--population", type=int, help="CMA-ES population size")
    sp.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="wall-clock budget for the whole fit: the search stops with its best so far",
    )


def _inspect_parser(sub: argparse._SubParsersAction) -> None:
    """`inspect`: what the reader makes of a log."""
    i = sub.add_parser("inspect", help="print what the reader makes of a log, as JSON")
    _log_args(i)
    i.set_defaults(func=cmd_inspect)


def _fit_parser(sub: argparse._SubParsersAction) -> None:
    """`fit`: models fitted to a log; results, report and exports."""
    f = sub.add_parser("fit", help="fit actuator models to a log and write results, report and exports")
    _log_args(f)
    f.add_argument(
        "--families",
        "--models",
        dest="families",
        help="comma-separated model families, e.g. dcmotor,ideal_pd; mlp,lstm,gru fit actuator networks "
        "(--models is the deprecated spelling). Default (or auto): climb the ladder dcmotor, dcmotor_delay, "
        "the friction families, each kept only when it buys the ladder's stated margin on validation, or with "
        "--ladder-judge training on an inner split of the training part (the fit prints the rule and what each "
        "rung bought)",
    )
    f.add_argument("--joints", help="comma-separated joints to fit (default: all)")
    f.add_argument("--decimation", type=int, help="physics steps per log sample (default 1)")
    f.add_argument(
        "--effort-mode",
        choices=["explicit", "implicit"],
        help="explicit (default) or Newton's implicit effort mode",
    )
    f.add_argument(
        "--joint-terms",
        help="joint terms instead of each family's default, comma-separated, e.g. "
        "armature,friction,dynamic_friction,viscous_friction,encoder_offset; "
        "BAM friction: stribeck_friction, load_friction, load_friction_external, "
        "load_friction_quadratic_motor (docs/models.md)",
    )
    f.add_argument(
        "--add-terms",
        help="joint terms added to every family's own, comma-separated, e.g. encoder_offset (the encoder's "
        "zero against gravity's, as BAM fits it on a pendulum bench)",
    )
    f.add_argument(
        "--holdout",
        metavar="KEY=VALUE",
        help="validate on the recordings whose segment metadata KEY equals VALUE (e.g. kp=20; a nested "
        "key as bam.kp, or its unique name), train on the rest",
    )
    f.add_argument("--folds", type=int, metavar="K", help="k-fold cross-validation over whole recordings")
    f.add_argument(
        "--folds-by",
        metavar="KEY",
        help="leave-one-value-out cross-validation: one fold per value of metadata KEY (e.g. kp)",
    )
    f.add_argument(
        "--validate-last",
        type=float,
        metavar="FRACTION",
        help="split every segment in time: its last FRACTION (e.g. 0.3) validates, a net's history carried "
        "across the cut; with --robot (0.05-0.5, default 0.3): the last FRACTION of one log in time, or of a "
        "log's recordings",
    )
    f.add_argument(
        "--ladder-judge",
        choices=("held-out", "training"),
        help="with no --families: held-out (default) judges the ladder's rungs on the validation split it reports; "
        "training judges them on an inner split of the training part, refits the pick on the whole of it and "
        "leaves the held-out figure untouched by any choice",
    )
    _net_args(f)
    _robot_args(f)
    _budget_args(f)
    f.add_argument("--out", help="output folder (default out/<log stem>)")
    f.set_defaults(func=cmd_fit)


def _ints(text: str) -> list[int]:
    return [int(x) for x in _csv(text)]


def _floats(text: str) -> list[float]:
    return [float(x) for x in _csv(text)]


def _net_inputs(text: str) -> str | list[str]:
    """--net-inputs: a layout choice (auto, error, commands) or the channels themselves, comma-separated."""
    return _csv(text) if "," in text else text


# every field of fitting.training.NetOptions: (flag, field, type, help)
NET_FLAGS: tuple[tuple[str, str, Any, str], ...] = (
    (
        "--net-history-ms",
        "history_ms",
        _floats,
        "MLP history in ms, e.g. 0,10,20 (default: chosen on the inner split from 0-20, 0-40, 0-90 ms; converted "
        "at the log's rate)",
    ),
    (
        "--net-input-idx",
        "input_idx",
        _ints,
        "MLP history in physics steps back (Isaac Lab input_idx), e.g. 0,1,2",
    ),
    ("--net-input-order", "input_order", str, "pos_vel (default) or vel_pos"),
    ("--net-hidden", "hidden", _ints, "MLP layer widths, e.g. 32,32 (default)"),
    ("--net-activation", "activation", str, "MLP activation: softsign (default), tanh, elu, relu"),
    ("--net-hidden-size", "hidden_size", int, "LSTM / GRU hidden size (default 16)"),
    ("--net-layers", "num_layers", int, "LSTM / GRU layers (default 1)"),
    (
        "--net-epochs",
        "epochs",
        int,
        "supervised epoch cap; patience or the budget ends training first (default 1000)",
    ),
    (
        "--net-patience",
        "patience",
        int,
        "epochs without a better inner-split loss before stopping (default 60)",
    ),
    ("--net-lr", "lr", float, "Adam learning rate (default 3e-3)"),
    ("--net-batch-size", "batch_size", int, "MLP batch size (default 512)"),
    ("--net-window", "window", int, "in-the-loop rollout window, samples (default 50)"),
    ("--net-lstm-window", "lstm_window", int, "LSTM / GRU training sequence, samples (default 50)"),
    ("--net-burn-in", "burn_in", int, "LSTM / GRU samples before the loss counts (default 10)"),
    ("--net-in-loop-epochs", "in_loop_epochs", int, "in-the-loop epochs (default 150)"),
    ("--net-in-loop-lr", "in_loop_lr", float, "in-the-loop learning rate (default lr/3 MLP, lr/30 LSTM)"),
    ("--net-mode", "mode", str, "auto (default: torque when logged), torque or in_the_loop"),
    (
        "--net-inputs",
        "inputs",
        _net_inputs,
        "what the net reads: auto (default: the drive's commands too where the log has tau_ff, qd_des or a kd "
        "that varies), error (q_des - q and qd only), commands (every command, raw gains too) or the channels, "
        "e.g. pos_error,vel_error,tau_cmd",
    ),
    (
        "--net-inner-fraction",
        "inner_fraction",
        float,
        "share of the training data early stopping watches (0.2): whole, evenly spaced training segments when "
        "there are 6 or more driven ones, else the last part in time of each",
    ),
)


def _net_args(f: argparse.ArgumentParser) -> None:
    """`fit`: the actuator networks' options (fitting.training.NetOptions), one flag each."""
    for flag, name, kind, text in NET_FLAGS:
        f.add_argument(flag, dest=f"net_{name}", type=kind, help=text)
    f.add_argument(
        "--net-no-gain-normalise",
        dest="net_gain_normalise",
        action="store_false",
        default=None,
        help="do not scale the position error by the segments' logged kp",
    )


def _net_options(args: argparse.Namespace) -> dict | None:
    """The `networks` object of the request from the --net-* flags given (None: none given)."""
    names = [name for _, name, _, _ in NET_FLAGS] + ["gain_normalise"]
    given = {n: getattr(args, f"net_{n}") for n in names if getattr(args, f"net_{n}", None) is not None}
    return given or None


def cmd_fit_inertials(args: argparse.Namespace) -> int:
    """`fit LOG --robot MODEL --inertials`: link inertials, friction and armature from the log's joint torque,
    by the inverse-dynamics regressor (fitting/robot/inertial.py); held-out logs judge the torque residual."""
    from .export.robot_inertials import update_mjcf, update_urdf
    from .fitting.robot import InertialOptions, identify_inertials
    from .models.robot import load_robot

    packages = tuple(Path(p) for p in args.package_root or ())
    robot = load_robot(args.robot, fixed_base=args.fixed_base, package_roots=packages)
    rec = _read(args)
    held_out = []
    for path in args.validation_log or ():
        args.log = [path]
        held_out.append(_read(args))
    opts = InertialOptions(
        filter_window_s=args.filter_window, filter_order=args.filter_order, min_speed=args.min_speed
    )
    res = identify_inertials(robot, [rec], validation=held_out, options=opts)
    out = Path(args.out) if args.out else Path("out") / "inertials"
    out.mkdir(parents=True, exist_ok=True)
    (out / "inertials.json").write_text(json.dumps(res.to_dict(), indent=1))
    model = Path(args.robot)
    update = update_urdf if model.suffix.lower() == ".urdf" else update_mjcf
    identified = out / f"{model.stem}_identified{model.suffix}"
    identified.write_text(update(model.read_text(), res))
    held = res.rmse.get("held_out", {})
    for joint, terms in res.friction.items():
        text = ", ".join(
            f"{k} {v:.4g}"
            + ("" if res.identifiability.get(f"{joint}.{k}", "alone") == "alone" else " (combination)")
            for k, v in terms.items()
        )
        where = f"; held-out torque RMSE {held[joint]:.3g}" if joint in held else ""
        print(f"{joint}: {text}{where}", file=sys.stderr)
    for note in res.notes:
        print(note, file=sys.stderr)
    print(
        f"verdict: {res.verdict['verdict']} (the held-out torque RMSE against the logged effort and the trivial "
        "predictors: zero torque, the model file, rigid-body least squares without friction)",
        file=sys.stderr,
    )
    for reason in res.verdict.get("reasons", []):
        print(f"  {reason}", file=sys.stderr)
    print(f"wrote {out / 'inertials.json'} (rank {res.rank}; {res.filter})", file=sys.stderr)
    print(f"wrote {identified} (the model file with the identified values)", file=sys.stderr)
    return 0


def _inertial_args(f: argparse.ArgumentParser) -> None:
    """`fit --robot --inertials`: the torque identification's options."""
    f.add_argument(
        "--inertials",
        action="store_true",
        help="with --robot: identify link inertials, joint friction and armature from the log's torque "
        "(tau, else tau_ff) by the inverse-dynamics regressor, physically consistent (log-Cholesky)",
    )
    f.add_argument(
        "--validation-log",
        metavar="FILE",
        action="append",
        help="with --inertials: a held-out log whose torque residual is reported (repeatable)",
    )
    f.add_argument(
        "--filter-window",
        type=float,
        default=0.05,
        metavar="S",
        help="with --inertials: the zero-phase Savitzky-Golay window giving qd and qdd from q, in s (default "
        "0.05; shorten it where q is clean and the rate high)",
    )
    f.add_argument(
        "--filter-order",
        type=int,
        default=3,
        help="with --inertials: the filter's polynomial order (default 3)",
    )
    f.add_argument(
        "--min-speed",
        type=float,
        default=0.0,
        help="with --inertials: rows of a joint slower than this (rad/s or m/s) are left out: stick phases",
    )


def _robot_args(f: argparse.ArgumentParser) -> None:
    """`fit --robot`: the whole-robot options."""
    _inertial_args(f)
    f.add_argument(
        "--robot",
        help="robot model (MJCF, URDF, USD): fit every actuator through the robot's coupled "
        "dynamics, hanging in the air (visuals and collisions skipped)",
    )
    f.add_argument(
        "--fixed-base", metavar="LINK", help="with --robot: the link fixed to the world (default the root)"
    )
    f.add_argument(
        "--package-root",
        metavar="DIR",
        action="append",
        help="with --robot: a folder the model may read files from besides its own (repeatable); a URDF's "
        "package://NAME/... is looked up in DIR/NAME, or DIR itself when it is named NAME",
    )
    f.add_argument(
        "--groups",
        help="with --robot: parameter sharing by joint-name regex, e.g. "
        "hip='.*_hip_joint',calf='.*_calf_joint' (default: per joint)",
    )
    f.add_argument(
        "--kp", type=float, help="with --robot: PD stiffness, N·m/rad (default: the log's, else fitted)"
    )
    f.add_argument(
        "--kd", type=float, help="with --robot: PD damping, N·m·s/rad (default: the log's, else fitted)"
    )
    f.add_argument(
        "--delay", help="with --robot: command delay in physics steps, or scan (default scan 0..8)"
    )
    f.add_argument("--no-bias", action="store_true", help="with --robot: no per-joint encoder bias")
    f.add_argument(
        "--bias-limit",
        type=float,
        help="with --robot: cap every joint's encoder bias at ± this many rad (a plausible calibration, "
        "0.001..0.3); with --select, tried against the uncapped bias",
    )
    f.add_argument(
        "--position-friction",
        action="store_true",
        help="with --robot: Coulomb friction linear along each joint's stroke (friction_upper at the upper "
        "limit); with --select, tried against constant friction. No consumer holds it: exports carry the "
        "mid-stroke friction",
    )
    f.add_argument(
        "--select",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --robot, on unless --no-select (which fits the options as given): choose gains given/fitted and "
        "bias off/within ±0.05 rad/free on the whole training part "
        "(fitted gains must cut its error by 35 %%, both with a bounded bias; the bias off or bounded, whichever "
        "tracks the training part's last 30 %% better replayed free; a free one must cut the error by 5 %%), then per "
        "group/joint "
        "and the window length on an inner split of the training part as long as the held-out part (train earlier, "
        "validate later), simplest first, a richer choice cutting the inner error by 5 %%; then refit it",
    )
    f.add_argument(
        "--payload",
        metavar="LINK[,LINK]",
        help="with --robot: links whose mass is fitted (a payload, a battery; link inertial corrections)",
    )
    f.add_argument("--payload-com", action="store_true", help="with --payload: fit those links' COM too")
    f.add_argument(
        "--floating",
        action="store_true",
        help="with --robot: the model's base floats (a free joint); "
        "name the link on the stand with --fixed-base",
    )
    f.add_argument(
        "--dc-motor",
        action="store_true",
        help="with --robot: fit a DC-motor envelope per group "
        "(saturation effort, velocity limit, max motor effort); only a log that saturates identifies it",
    )


def _excite_parser(sub: argparse._SubParsersAction) -> None:
    """`excite`: an excitation within bounds, with its predicted identifiability."""
    e = sub.add_parser(
        "excite", help="design an excitation (chirp, multisine, steps, prbs, BAM set) within bounds"
    )
    e.add_argument(
        "--kind",
        default="chirp",
        help="chirp, multisine, steps, prbs, sin_time_square, lift_and_drop, "
        "up_and_down or bam (the three BAM trajectories); default chirp",
    )
    e.add_argument("--duration", type=float, help="seconds (per trajectory for bam; default 20)")
    e.add_argument("--rate", type=float, help="samples per second (default 200)")
    e.add_argument("--q-min", type=float, help="lowest position, rad (default -1)")
    e.add_argument("--q-max", type=float, help="highest position, rad (default 1)")
    e.add_argument("--qd-max", type=float, help="largest speed, rad/s (default 5)")
    e.add_argument(
        "--tau-max", type=float, help="largest rigid-body torque the load may need, N·m (with the load)"
    )
    e.add_argument("--f-min", type=float, help="lowest frequency, Hz (default 0.1)")
    e.add_argument("--f-max", type=float, help="highest frequency, Hz (default 5)")
    e.add_argument("--inertia", type=float, help="load inertia without the point mass, kg·m²")
    e.add_argument("--mass", type=float, help="pendulum mass, kg")
    e.add_argument("--com-distance", type=float, help="pendulum length to the mass, m")
    e.add_argument("--gravity", type=float, help="gravity, m/s² (default 9.81)")
    e.add_argument(
        "--families",
        "--models",
        dest="families",
        help="families to predict identifiability for, comma-separated (default dcmotor,delayed_pd; "
        "empty: no prediction; --models is the deprecated spelling)",
    )
    e.add_argument(
        "--nominal",
        help="nominal actuator parameters for the prediction, NAME=VALUE,... in SI "
        "(registry names, e.g. stiffness=25,saturation_effort=7,delay=2)",
    )
    e.add_argument("--noise-q", type=float, help="position noise σ the fit will see, rad (default 0.001)")
    e.add_argument("--noise-qd", type=float, help="velocity noise σ, rad/s (default σ_q·rate/√2)")
    e.add_argument("--joint", help="joint name (default joint)")
    e.add_argument("--seed", type=int, help="random seed for steps and prbs (default 0)")
    e.add_argument("--kp", type=float, help="position gain to record in the sidecar, N·m/rad")
    e.add_argument("--kd", type=float, help="damping gain to record in the sidecar, N·m·s/rad")
    e.add_argument("--out", help="CSV file to write (+ <stem>.json sidecar); default: CSV on stdout")
    e.set_defaults(func=cmd_excite)


def _demo_parser(sub: argparse._SubParsersAction) -> None:
    """`demo`: a log from known DCMotor parameters, fitted back."""
    d = sub.add_parser("demo", help="simulate a pendulum log from known DCMotor parameters and fit it")
    d.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    _budget_args(d)
    d.set_defaults(func=cmd_demo)


def _export_parser(sub: argparse._SubParsersAction) -> None:
    """`export`: one export of a fit."""
    x = sub.add_parser(
        "export",
        help="render one export of a fit: isaaclab.py/.json/.yaml, newton.usda, mjcf.xml, randomization.json",
    )
    x.add_argument("fit", help="fit folder (with fit.json) or a fit.json file")
    x.add_argument(
        "--at",
        metavar="kp=VALUE[,vin=VALUE]",
        help="operating point of a fit of device-unit gains: the SI stiffness at this firmware kp "
        "(and kd) and the envelope at this supply voltage (default: the fit's reference, the most "
        "common logged kp and vin); the export states the point it used",
    )
    from .export.formats import FORMATS, format_help  # the export registry: one registration per format

    x.add_argument(
        "--format",
        dest="export_format",
        required=True,
        choices=FORMATS,
        help=f"export format: {format_help()}",
    )
    x.add_argument("--out", help="file to write (default: stdout)")
    x.add_argument(
        "--set",
        action="append",
        metavar="[JOINT/]PARAM=VALUE",
        help="a value to write instead of the fit's, e.g. a datasheet limit the log never pressed: "
        "--set actuator_effort_limit=0.6 (repeat or comma-separate)",
    )
    x.add_argument(
        "--unidentified",
        choices=["omit", "comment"],
        help="a parameter the fit did not identify: omit leaves it at the consumer's default where the "
        "consumer has one (default); comment writes the estimate with a NOT IDENTIFIED comment",
    )
    x.add_argument(
        "--rename",
        action="append",
        metavar="FIT_JOINT=ROBOT_JOINT",
        help="write a joint under the robot's name, e.g. --rename pendulum=elbow_joint",
    )
    x.add_argument(
        "--family",
        help="model family for every joint, or joint=family pairs, comma-separated "
        "(default: each joint's best; Isaac Lab: best built-in class)",
    )
    x.add_argument(
        "--field-names",
        choices=["isaaclab-3", "isaaclab-2"],
        default="isaaclab-3",
        help="Isaac Lab field names (default isaaclab-3)",
    )
    x.add_argument(
        "--backend",
        choices=["newton", "physx"],
        default="newton",
        help="Isaac Lab physics backend the friction values are written for (default newton)",
    )
    x.add_argument(
        "--log",
        nargs="+",
        help="the fitted log, for the test-bench load of newton.usda / mjcf.xml "
        "(default: the fit folder's validation.json)",
    )
    x.add_argument("--sidecar", help="metadata JSON of the log")
    x.add_argument(
        "--robot",
        help="the robot model: a whole-robot fit's exports are written into it (default: the file fit.json "
        "names); for a joint fit, a robot USD whose joints (matched by prim name) get the fitted NewtonActuators",
    )
    x.add_argument(
        "--package-root",
        metavar="DIR",
        action="append",
        help="a folder the robot model may read files from besides its own, as `fit --package-root`",
    )
    x.set_defaults(func=cmd_export)


def _validate_parser(sub: argparse._SubParsersAction) -> None:
    """`validate`: NEWTON.DJ.001 on a USD file."""
    v = sub.add_parser("validate", help="check a USD file's Newton actuation (rule NEWTON.DJ.001)")
    v.add_argument("usd", help="USD file (.usda, .usdc, .usd)")
    v.set_defaults(func=cmd_validate)


def _warmup_parser(sub: argparse._SubParsersAction) -> None:
    """`warmup`: Warp's kernel builds, once per machine."""
    w = sub.add_parser(
        "warmup",
        help="compile the Warp kernels CPU fits launch, so the first fit does not (make install runs it)",
    )
    w.set_defaults(func=cmd_warmup)


def cmd_warmup(args: argparse.Namespace) -> int:
    """Build (or load from Warp's cache) the CPU fits' kernel modules and say how long it took."""
    from .models.warmup import compile_kernels

    done = compile_kernels()
    print(f"{len(done.modules)} Warp kernel modules built or loaded from the cache in {done.seconds:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run a subcommand; user errors → message on stderr and exit code 2."""
    from .export.selection import ExportError
    from .fitting.fit import FitRequestError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (DatasetError, FitRequestError, ExportError, UsageError) as e:  # RobotError is a DatasetError
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
