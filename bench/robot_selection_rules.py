"""The robot selection's numbers per seed, for judging selection rules offline: every candidate's inner-validation
error (at its own scanned delay and held at each given delay), its fitted bias, and its far-end error.

Per seed of bench/robot_selection.py's known-truth leg, each candidate configuration is fitted as
`select_robot_fit` scores it (the inner split of the training part, INNER_ITERATIONS) once with the delay scanned
and once held at each of --delays, and once on the whole training part (delay scanned, intervals on) and replayed
over the far end by the MuJoCo judge. One JSON line per seed goes to --out; `rules` then replays the protocol's
variants (bias margin, a bias judged at a neighbouring delay too) on those lines without refitting: a "?" marks a seed
where a score the variant needed was not recorded (read from the candidate's scanned fit instead).

`delays` replays delay rules on bench/robot_selection.py --sweep N output (the chosen configuration's inner
error and far-end error at each delay 0..N): which delay each rule keeps and its far-end error over the best
candidate's (every candidate refitted with its delay scanned).

Usage: python bench/robot_selection_rules.py record --seeds 0,1,2 --out FILE
       python bench/robot_selection_rules.py rules FILE [FILE ...]
       python bench/robot_selection_rules.py delays FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import robot_selection as bench  # noqa: E402

from actuator_sysid.fitting.ladder import MIN_GAIN  # noqa: E402
from actuator_sysid.fitting.result import RobotResult  # noqa: E402
from actuator_sysid.fitting.robot import RobotFitOptions  # noqa: E402
from actuator_sysid.fitting.robot_select import (  # noqa: E402
    BIAS_MARGIN,
    GAINS_MARGIN,
    configurations,
    fit_candidate,
    inner_fit,
    inner_share,
    training_part,
)
from actuator_sysid.models.robot import load_robot  # noqa: E402


def _bias(res: RobotResult) -> dict:
    """The fitted bias per joint and, when the fit states intervals, each bias interval."""
    out: dict = {"bias": {k: round(float(v), 6) for k, v in res.encoder_bias.items()}}
    if res.intervals:
        out["bias_intervals"] = {
            k: iv.to_json() if hasattr(iv, "to_json") else dataclasses.asdict(iv)
            for k, iv in res.intervals.items()
            if "bias" in k
        }
    return out


def record_seed(robot, xml: str, seed: int, seconds: float, opts: RobotFitOptions, delays: list[int]) -> dict:
    """One seed's numbers: per candidate, inner fits (scanned and held) and the far-end fit."""
    t0 = time.perf_counter()
    rec, log, truth = bench.make_log(robot, seed, seconds)
    split = int(round(log.q.shape[0] * (1.0 - bench.VALIDATION)))
    axes = bench.bench_axes(rec, robot, opts)
    inner_fraction = inner_share(rec, opts)
    train, _ = training_part(rec, robot, opts)
    rows: dict = {}
    for c in configurations(axes):
        row: dict = {"inner": {}}
        for d in [None, *delays]:
            res = inner_fit(train, robot, opts, c, d, inner_fraction)
            row["inner"]["scan" if d is None else str(d)] = {
                "rmse": float(res.validation.rmse),
                "per_joint": res.validation.per_joint_rmse,
                "training_rmse": float(res.training.rmse),
                "delay": int(res.delay_steps),
                **_bias(res),
            }
        full = fit_candidate(rec, robot, opts, c)
        row["full"] = {
            "far_end_rmse": bench.judged(xml, log, full, split),
            "training_rmse": float(full.training.rmse),
            "delay": int(full.delay_steps),
            **_bias(full),
        }
        rows[c.name] = row
        bench.say(
            f"seed {seed}: {c.name}: far {row['full']['far_end_rmse']:.5f} "
            + " ".join(f"{k}:{v['rmse']:.5f}/d{v['delay']}" for k, v in row["inner"].items())
        )
    return {
        "seed": seed,
        "truth": truth,
        "inner_fraction": inner_fraction,
        "candidates": rows,
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def record(args: argparse.Namespace) -> None:
    seeds = [int(s) for s in args.seeds.split(",")]
    delays = [int(d) for d in args.delays.split(",")] if args.delays else []
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "go2_leg.xml"
        path.write_text(bench.LEG_XML)
        robot = load_robot(path)
        xml = bench.peer.in_air_xml(path, bench.KP, bench.KD, bench.LOG_DT / bench.DECIMATION)
        for seed in seeds:
            row = record_seed(robot, xml, seed, 8.0, opts, delays)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")


def _inner(row: dict, name: str, d: int) -> float | None:
    """A candidate's recorded inner RMSE at delay d: held there, or scanned when the scan found d."""
    inner = row["candidates"][name]["inner"]
    if str(d) in inner:
        return float(inner[str(d)]["rmse"])
    return float(inner["scan"]["rmse"]) if inner["scan"]["delay"] == d else None


def choose(row: dict, bias_margin: float, step: int | None) -> tuple[str, bool]:
    """The protocol replayed on a seed's record (gains axis, then bias axis; the first candidate's scanned delay
    held; with `step`, a bias must buy its margin that many delay steps from the held one too, 1 where that is
    below 0); whether every score it needed was recorded (a missing one is read from the candidate's scanned
    fit)."""
    gains = ["gains given", "gains fitted"]
    names = list(row["candidates"])
    biases = [n.split(", ", 1)[1] for n in names if n.startswith("gains given")]
    d = int(row["candidates"][names[0]]["inner"]["scan"]["delay"])
    complete = True

    def at(name: str, k: int) -> float:
        nonlocal complete
        v = _inner(row, name, k)
        complete &= v is not None
        return float(row["candidates"][name]["inner"]["scan"]["rmse"]) if v is None else v

    g = 1 if at(f"{gains[1]}, {biases[0]}", d) < at(f"{gains[0]}, {biases[0]}", d) * (1 - GAINS_MARGIN) else 0
    kept = biases[0]
    other = d if step is None else (d + step if d + step >= 0 else 1)
    for b in biases[1:]:
        if all(
            at(f"{gains[g]}, {b}", k) < at(f"{gains[g]}, {kept}", k) * (1 - bias_margin) for k in (d, other)
        ):
            kept = b
    return f"{gains[g]}, {kept}", complete


def rules(args: argparse.Namespace) -> None:
    """Per rule, each seed's chosen far-end error over the best candidate's and the count within WITHIN."""
    rows: dict[int, dict] = {}
    for f in args.files:
        for line in Path(f).read_text().splitlines():
            r = json.loads(line)
            rows[r["seed"]] = r
    for label, margin, step in (
        (f"bias margin {MIN_GAIN:.0%}, held delay only", MIN_GAIN, None),
        (f"bias margin {BIAS_MARGIN:.0%}, held delay only", BIAS_MARGIN, None),
        (f"bias margin {MIN_GAIN:.0%}, held delay and one step later", MIN_GAIN, 1),
        (f"bias margin {BIAS_MARGIN:.0%}, held delay and one step later", BIAS_MARGIN, 1),
        (f"bias margin {BIAS_MARGIN:.0%}, held delay and one step shorter (the protocol)", BIAS_MARGIN, -1),
    ):
        cells, passed = [], 0
        for seed in sorted(rows):
            far = {k: v["full"]["far_end_rmse"] for k, v in rows[seed]["candidates"].items()}
            chosen, complete = choose(rows[seed], margin, step)
            x = far[chosen] / min(far.values())
            passed += x <= 1 + bench.WITHIN
            cells.append(f"{seed}:{x:.2f}{'' if complete else '?'}")
        print(f"{passed}/{len(rows)}  {label}: {' '.join(cells)}")


def _walk(key: str) -> Callable[[dict], int | None]:
    """From the inner scan's delay one step at a time each way while the recorded figure falls; the lowest."""

    def rule(row: dict) -> int | None:
        by = {int(d): v[key] for d, v in row["chosen_by_delay"].items() if v.get(key) is not None}
        held = row["inner_delay"]
        if held not in by:
            return None
        seen = {held: by[held]}
        for step in (-1, 1):
            d = held
            while d + step in by:
                seen[d + step] = by[d + step]
                if seen[d + step] >= seen[d]:
                    break
                d += step
        return min(sorted(seen), key=seen.__getitem__)

    return rule


def _lowest(key: str) -> Callable[[dict], int | None]:
    """The delay whose recorded figure is lowest over the sweep."""

    def rule(row: dict) -> int | None:
        by = {int(d): v[key] for d, v in row["chosen_by_delay"].items() if v.get(key) is not None}
        return min(sorted(by), key=by.__getitem__) if by else None

    return rule


def _longest_tied(kind: str, tie: float) -> Callable[[dict], int | None]:
    """The longest delay whose training RMSE in the chosen configuration's own scan (`kind`: decoupled at every
    delay, or coupled at those refined) is within `tie` of the lowest."""

    def rule(row: dict) -> int | None:
        by = {int(d): v for d, v in row["training_rmse_by_delay"][row["chosen"]][kind].items()}
        low = min(by.values())
        return max(d for d, v in by.items() if v <= (1.0 + tie) * low)

    return rule


DELAY_RULES: dict[str, Callable[[dict], int | None]] = {
    "the refit's own scan (fit_robot's rule in the recorded run)": lambda r: r["far_end_delay"][r["chosen"]],
    "inner validation, stepped from the inner scan's delay": _walk("inner"),
    "inner validation, lowest over the sweep": _lowest("inner"),
    "training RMSE of the refit held at each delay, lowest": _lowest("training"),
    "decoupled scan, longest within 2 % of the lowest": _longest_tied("decoupled", 0.02),
    "decoupled scan, longest within 5 % of the lowest": _longest_tied("decoupled", 0.05),
    "decoupled scan, longest within 10 % of the lowest": _longest_tied("decoupled", 0.10),
    "coupled scan, longest within 5 % of the lowest": _longest_tied("coupled", 0.05),
    "far end, lowest (an oracle: the bound)": _lowest("far"),
}


def delays(args: argparse.Namespace) -> None:
    """Per delay rule, each seed's kept delay and far-end error over the best candidate's, and the count within."""
    rows: dict[int, dict] = {}
    for f in args.files:
        for r in json.loads(Path(f).read_text())["seeds"]:
            rows[r["seed"]] = r
    for label, rule in DELAY_RULES.items():
        cells, passed = [], 0
        for seed in sorted(rows):
            r = rows[seed]
            best = min(r["far_end_rmse"].values())
            d = rule(r)
            if d is None or str(d) not in r["chosen_by_delay"]:
                far = r["far_end_rmse"][r["chosen"]] if d == r["far_end_delay"][r["chosen"]] else None
            else:
                far = r["chosen_by_delay"][str(d)]["far"]
            if far is None:
                cells.append(f"{seed}:d{d}?")
                continue
            passed += far <= (1 + bench.WITHIN) * best
            cells.append(f"{seed}:d{d} {far / best:.2f}")
        print(f"{passed}/{len(rows)}  {label}: {' '.join(cells)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--seeds", required=True, help="comma-separated")
    r.add_argument("--delays", default="0,1,2,3", help="held delays (physics steps), comma-separated")
    r.add_argument("--out", required=True)
    q = sub.add_parser("rules")
    q.add_argument("files", nargs="+")
    sub.add_parser("delays").add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        record(args)
    elif args.cmd == "delays":
        delays(args)
    else:
        rules(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
