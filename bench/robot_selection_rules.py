"""The robot selection's numbers per seed, for judging selection rules offline: every candidate's inner-validation
error (at its own scanned delay and held at each given delay), its fitted bias, and its far-end error.

Per seed of bench/robot_selection.py's known-truth leg, each candidate configuration is fitted as
`select_robot_fit` scores it (the inner split of the training part at --inner, INNER_ITERATIONS) once with the
delay scanned and once held at each of --delays; at each of --fractions, scanned and held at the first candidate's
scanned delay there; and once on the whole training part (delay scanned, intervals on), replayed over the far end
by the MuJoCo judge. One JSON line per seed goes to --out; `rules` then replays inner-split rules on those lines
without refitting: the former protocol (on records made at the selection's inner share) and variants through the
library's robot_select.greedy_choice (one gains × bias axis scored at another inner fraction, another margin, each
candidate's own delay); a "?" marks a seed where a score the rule needed was not recorded. Today's protocol
decides the gains and the bias on the whole training part, which bench/robot_selection.py measures itself.

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
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import robot_selection as bench  # noqa: E402

from actuator_sysid.fitting.ladder import MIN_GAIN  # noqa: E402
from actuator_sysid.fitting.result import RobotResult  # noqa: E402
from actuator_sysid.fitting.robot import BIAS_PLAUSIBLE, RobotFitOptions  # noqa: E402
from actuator_sysid.fitting.robot_select import (  # noqa: E402
    Candidate,
    configurations,
    fit_candidate,
    greedy_choice,
    inner_fit,
    inner_share,
    training_part,
)


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


def _inner_row(res: RobotResult) -> dict:
    """An inner fit's figures: validation and training RMSE, delay, bias."""
    return {
        "rmse": float(res.validation.rmse),
        "per_joint": res.validation.per_joint_rmse,
        "training_rmse": float(res.training.rmse),
        "delay": int(res.delay_steps),
        **_bias(res),
    }


def record_seed(
    robot,
    xml: str,
    seed: int,
    seconds: float,
    opts: RobotFitOptions,
    delays: list[int],
    fractions: list[float],
    inner: float | None = None,
) -> dict:
    """One seed's numbers: per candidate, inner fits at `inner` (None: the selection's inner_share; scanned and
    held at each of `delays`; at each of `fractions`, scanned and held at the first candidate's scanned delay
    there) and the far-end fit."""
    t0 = time.perf_counter()
    rec, log, truth = bench.make_log(robot, seed, seconds)
    split = int(round(log.q.shape[0] * (1.0 - bench.VALIDATION)))
    axes = bench.bench_axes(rec, robot, opts)
    inner_fraction = inner_share(rec, opts) if inner is None else inner
    train, _ = training_part(rec, robot, opts)
    rows: dict = {}
    first: dict[float, int] = {}  # the first candidate's scanned delay at each other fraction
    for c in configurations(axes):
        row: dict = {"inner": {}, "fractions": {}}
        for d in [None, *delays]:
            res = inner_fit(train, robot, opts, c, d, inner_fraction)
            row["inner"]["scan" if d is None else str(d)] = _inner_row(res)
        for f in fractions:
            scan = _inner_row(inner_fit(train, robot, opts, c, None, f))
            first.setdefault(f, scan["delay"])
            held = (
                scan
                if scan["delay"] == first[f]
                else _inner_row(inner_fit(train, robot, opts, c, first[f], f))
            )
            row["fractions"][f"{f:g}"] = {"scan": scan, "held": held}
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
    fractions = [float(f) for f in args.fractions.split(",")] if args.fractions else []
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = bench.load_leg()
        for seed in seeds:
            row = record_seed(robot, xml, seed, 8.0, opts, delays, fractions, args.inner)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")


def _inner(row: dict, name: str, d: int) -> float | None:
    """A candidate's recorded inner RMSE at the recorded inner fraction and delay d: held there, or scanned when
    the scan found d."""
    inner = row["candidates"][name]["inner"]
    if str(d) in inner:
        return float(inner[str(d)]["rmse"])
    return float(inner["scan"]["rmse"]) if inner["scan"]["delay"] == d else None


def _at_fraction(row: dict, name: str, fraction: float, how: str) -> float | None:
    """A candidate's inner RMSE with the last `fraction` of the training part validating, `how` "held" (at the
    first candidate's scanned delay there, as select_robot_fit holds it) or "scan" (its own delay); None where
    not recorded."""
    if math.isclose(row["inner_fraction"], fraction, abs_tol=1e-3):
        if how == "scan":
            return float(row["candidates"][name]["inner"]["scan"]["rmse"])
        first = next(iter(row["candidates"].values()))["inner"]["scan"]["delay"]
        return _inner(row, name, int(first))
    other = row["candidates"][name].get("fractions", {}).get(f"{fraction:g}")
    return None if other is None else float(other[how]["rmse"])


def _scored(lookup: Callable[[str], float | None], missing: list[str]) -> Callable[[Candidate], float]:
    """A score for greedy_choice read from a seed's record by `lookup` (a candidate's name to its recorded
    inner RMSE); what it lacks goes to `missing`."""

    def score(c: Candidate) -> float:
        v = lookup(c.name)
        if v is None:
            missing.append(c.name)
        return math.inf if v is None else v

    return score


def _plausible(row: dict, name: str, fraction: float) -> bool:
    """Whether a candidate's inner fit at `fraction` (held) kept every joint's bias within BIAS_PLAUSIBLE."""
    fit = row["candidates"][name].get("fractions", {}).get(f"{fraction:g}", {}).get("held", {})
    return all(abs(v) <= BIAS_PLAUSIBLE + 1e-9 for v in fit.get("bias", {}).values())


def choose_joint(row: dict, fraction: float, how: str, margin: float, plausible: bool = False) -> str | None:
    """The library's choice (robot_select.greedy_choice) over one joint axis of every recorded configuration
    (gains × bias, simplest first), each richer entry at `margin`, scored at `fraction` (with `plausible`, a
    candidate whose inner fit's bias passes BIAS_PLAUSIBLE dropped); None where a score it needed was not
    recorded."""
    names = [n for n in row["candidates"] if not plausible or _plausible(row, n, fraction)]
    axis = [Candidate(n, margin=margin) for n in names]
    missing: list[str] = []
    _, choice = greedy_choice([axis], _scored(lambda n: _at_fraction(row, n, fraction, how), missing))
    return None if missing else choice[0].name


FORMER_MARGIN = 0.25  # the former inner-split protocol's margin for fitted gains and for a bias


def choose_protocol(row: dict) -> str | None:
    """The former inner-split protocol (before the gains and the bias were decided on the whole training part)
    replayed on a record made at the selection's inner fraction: fitted gains, then a bias, each kept when it
    lowers the inner RMSE by FORMER_MARGIN, a bias at the held delay and at its other neighbour too."""
    names = list(row["candidates"])
    held = int(row["candidates"][names[0]]["inner"]["scan"]["delay"])
    other = held - 1 if held > 0 else 1
    missing: list[str] = []
    at_held = _scored(lambda n: _inner(row, n, held), missing)
    at_other = _scored(lambda n: _inner(row, n, other), missing)

    def score(g: str, b: str, at: Callable[[Candidate], float]) -> float:
        return at(Candidate(f"{g}, {b}"))

    g, b = "gains given", "bias off"
    if score("gains fitted", b, at_held) < (1 - FORMER_MARGIN) * score(g, b, at_held):
        g = "gains fitted"
    for alt in (f"bias within ±{BIAS_PLAUSIBLE:g} rad", "bias on"):
        if all(score(g, alt, at) < (1 - FORMER_MARGIN) * score(g, b, at) for at in (at_held, at_other)):
            b = alt
    return None if missing else f"{g}, {b}"


RULES: dict[str, Callable[[dict], str | None]] = {
    "the former protocol (inner share, gains 25 %, a bias 25 % at two neighbouring delays)": choose_protocol,
    "one gains × bias axis, last 15 % validates, delay held, margin 2 %": lambda r: choose_joint(
        r, 0.15, "held", 0.02
    ),
    "the same, margin 0": lambda r: choose_joint(r, 0.15, "held", 0.0),
    f"the same, margin {MIN_GAIN:.0%}": lambda r: choose_joint(r, 0.15, "held", MIN_GAIN),
    "the same, each candidate's own delay": lambda r: choose_joint(r, 0.15, "scan", 0.02),
    "the same, a candidate whose inner bias passes ±0.05 rad dropped": lambda r: choose_joint(
        r, 0.15, "held", 0.02, plausible=True
    ),
    "one gains × bias axis, last 3/7 validates, margin 2 %": lambda r: choose_joint(r, 3 / 7, "held", 0.02),
    "one gains × bias axis, last 60 % validates, margin 2 %": lambda r: choose_joint(r, 0.6, "held", 0.02),
}


def rules(args: argparse.Namespace) -> None:
    """Per rule and block of ten seeds, each seed's chosen far-end error over the best candidate's and the count
    within WITHIN ("?": a score the rule needed was not recorded)."""
    rows: dict[int, dict] = {}
    for f in args.files:
        for line in Path(f).read_text().splitlines():
            r = json.loads(line)
            rows[r["seed"]] = r
    for label, rule in RULES.items():
        print(label)
        for block in sorted({s // 10 for s in rows}):
            cells, passed, judged = [], 0, 0
            for seed in sorted(s for s in rows if s // 10 == block):
                far = {k: v["full"]["far_end_rmse"] for k, v in rows[seed]["candidates"].items()}
                chosen = rule(rows[seed])
                if chosen is None:
                    cells.append(f"{seed}:?")
                    continue
                x = far[chosen] / min(far.values())
                passed, judged = passed + (x <= 1 + bench.WITHIN), judged + 1
                cells.append(f"{seed}:{x:.2f}")
            print(f"  seeds {10 * block}–{10 * block + 9}: {passed}/{judged}  {' '.join(cells)}")


def _recorded(row: dict, key: str) -> dict[int, float]:
    """The chosen configuration's recorded figure `key` at each delay of the sweep where it was recorded."""
    return {int(d): v[key] for d, v in row["chosen_by_delay"].items() if v.get(key) is not None}


def _walk(key: str) -> Callable[[dict], int | None]:
    """From the inner scan's delay one step at a time each way while the recorded figure falls; the lowest."""

    def rule(row: dict) -> int | None:
        by = _recorded(row, key)
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
        by = _recorded(row, key)
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


def _bracketed(kind: str) -> Callable[[dict], int | None]:
    """The upper end of the step the chosen configuration's scan (`kind`) brackets the delay in: the lowest
    delay and whichever neighbour fits better; at delay 0, the step above when within 5 % of it."""

    def rule(row: dict) -> int | None:
        by = {int(d): v for d, v in row["training_rmse_by_delay"][row["chosen"]][kind].items()}
        b = min(by, key=by.__getitem__)
        lo, hi = by.get(b - 1), by.get(b + 1)
        if hi is None:
            return b
        if lo is None:
            return b + 1 if hi <= 1.05 * by[b] else b
        return b + 1 if hi < lo else b

    return rule


def _tie_by_inner(tie: float) -> Callable[[dict], int | None]:
    """fit_robot's pair (the lowest coupled training loss and the step above it) told apart by the inner
    validation when their training losses lie within `tie`: the later, faster part of training decides."""

    def rule(row: dict) -> int | None:
        by = {int(d): v for d, v in row["training_rmse_by_delay"][row["chosen"]]["coupled"].items()}
        b = min(by, key=by.__getitem__)
        if by.get(b + 1) is None or by[b + 1] > (1.0 + tie) * by[b]:
            return b
        inner = _recorded(row, "inner")
        if inner.get(b) is None or inner.get(b + 1) is None:
            return None
        return b + 1 if inner[b + 1] < inner[b] else b

    return rule


def _neighbours_by_inner(row: dict) -> int | None:
    """The refit's delay or a neighbour, whichever validates best on the inner split."""
    d = int(row["far_end_delay"][row["chosen"]])
    inner = _recorded(row, "inner")
    near = {k: inner[k] for k in (d - 1, d, d + 1) if k in inner}
    return min(near, key=near.__getitem__) if d in near else None


DELAY_RULES: dict[str, Callable[[dict], int | None]] = {
    "the refit's own scan (fit_robot's rule in the recorded run)": lambda r: r["far_end_delay"][r["chosen"]],
    "inner validation, stepped from the inner scan's delay": _walk("inner"),
    "inner validation, lowest over the sweep": _lowest("inner"),
    "training RMSE of the refit held at each delay, lowest": _lowest("training"),
    "decoupled scan, longest within 2 % of the lowest": _longest_tied("decoupled", 0.02),
    "decoupled scan, longest within 5 % of the lowest": _longest_tied("decoupled", 0.05),
    "decoupled scan, longest within 10 % of the lowest": _longest_tied("decoupled", 0.10),
    "coupled scan, longest within 5 % of the lowest": _longest_tied("coupled", 0.05),
    "coupled scan's pair (the lowest and the step above within 5 %) told apart by the inner validation": (
        _tie_by_inner(0.05)
    ),
    "the same within 10 %": _tie_by_inner(0.10),
    "the refit's delay or a neighbour, the lowest inner validation": _neighbours_by_inner,
    "decoupled scan, the upper end of the step the lowest and its better neighbour bracket": _bracketed(
        "decoupled"
    ),
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
    r.add_argument("--inner", type=float, help="the inner fraction held at each delay (default: inner_share)")
    r.add_argument("--fractions", default="0.6", help="other inner fractions, comma-separated")
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
