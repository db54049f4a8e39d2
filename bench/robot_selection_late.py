"""The robot selection's training choice judged offline: rules for the gains and the bias replayed on each
candidate's figures, without refitting.

Per seed of bench/robot_selection.py's known-truth leg, each of the six candidates (gains given / fitted × bias
off / within ±0.05 rad / free) is fitted on the whole training part as the bench fits it (delay scanned), and the
bias off is fitted again at the bounded fit's delay, as `training_choice` fits it. Each fit states its far-end
error (the bench's MuJoCo judge), its training RMSE and `late_rmse` at each of SHARES (replayed free over the
training part's last share). `rules` then replays training-choice rules on those lines: today's (the gains by
the training RMSE and GAINS_MARGIN, the bias by the late replay over LATE_SHARE, a free bias by BIAS_MARGIN) and
variants (another share, the gains by the late replay too, several shares, the training RMSE beside the late
replay, the bias decided over the logged gains, the bounded bias kept where it agrees across gains, the bias off
with its own delay scan). Today's rule gives the library's choice on every seed where the refit lands on the same
delay. `delays` fits each candidate again a delay step below and above its scan's, for delay rules offline.
`teacher` fits a richer model no consumer runs and measures how far each candidate is from it on the training
commands played faster, for rules that pick the candidate closest to it; with --given a second teacher keeps
the log's gains, and `teacher-rules` adds the library's rule (the teacher whose gains its training RMSE keeps)
and variants of it: both speeds summed, both teachers joined, the simplest candidate within a tie of the nearest,
the distance over part of the playback (the teacher records keep it by quarter).

Usage: python bench/robot_selection_late.py record --seeds 0-9,60-69 --out FILE
       python bench/robot_selection_late.py delays --records FILE --seeds 0-9,60-69 --out FILE2
       python bench/robot_selection_late.py rules FILE [FILE ...] [--fresh-from SEED]
       python bench/robot_selection_late.py delay-rules FILE [FILE ...] --delays FILE2 [...] [--fresh-from SEED]
       python bench/robot_selection_late.py teacher --seeds 0-9 --out FILE3 [--teacher-decimation 4] [--given]
       python bench/robot_selection_late.py teacher-rules FILE [FILE ...] --teacher FILE3 [...] [--fresh-from SEED]
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench")]

import robot_selection as bench  # noqa: E402

from actuator_sysid.datasets.recording import Recording  # noqa: E402
from actuator_sysid.fitting.result import RobotResult  # noqa: E402
from actuator_sysid.fitting.robot import RobotFitOptions  # noqa: E402
from actuator_sysid.fitting.robot_select import (  # noqa: E402
    BIAS_MARGIN,
    GAINS_MARGIN,
    LATE_SHARE,
    Candidate,
    configurations,
    fit_candidate,
    late_rmse,
)
from actuator_sysid.models.robot import RobotModel  # noqa: E402

SHARES = (0.1, 0.15, 0.2, 0.3, 0.4)  # the training part's last shares replayed
GIVEN, FITTED = "gains given", "gains fitted"
OFF, BOUNDED, FREE = "bias off", "bias within ±0.05 rad", "bias on"
AT_BOUNDED = " @bounded delay"  # the bias off fitted at the bounded fit's delay, as training_choice fits it


def seeds_of(text: str) -> list[int]:
    """ "0-9,60,61" → [0, …, 9, 60, 61]."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _seed(robot: RobotModel, opts: RobotFitOptions, seed: int) -> tuple:
    """A seed's log (as the fit reads it), its judge's view, its truth, the far end's first sample and the bench's
    configurations by name."""
    rec, log, truth = bench.make_log(robot, seed, 8.0)
    split = int(round(log.q.shape[0] * (1.0 - bench.VALIDATION)))
    configs = {c.name: c for c in configurations(bench.bench_axes(rec, robot, opts))}
    return rec, log, truth, split, configs


def _append(path: str, row: dict, t0: float) -> None:
    """One seed's line appended to `path`, with its wall time, and said on stderr."""
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    bench.say(f"seed {row['seed']}: {row['wall_s']} s")


def _rows(files: list[str]) -> dict[int, dict]:
    """Every line of these JSON-lines files, by seed."""
    return {r["seed"]: r for f in files for r in map(json.loads, Path(f).read_text().splitlines())}


def _parts(seeds: list[int], fresh_from: int | None) -> list[tuple[str, list[int]]]:
    """The seeds cut into tuning (before `fresh_from`) and fresh (from it on), each sorted; empty parts left out."""
    fresh = [s for s in sorted(seeds) if fresh_from is not None and s >= fresh_from]
    tuning = [s for s in sorted(seeds) if s not in fresh]
    return [(name, part) for name, part in (("tuning", tuning), ("fresh", fresh)) if part]


def _score(ratios: dict[int, float]) -> tuple[int, list[int], float]:
    """Chosen / best by seed → the count within WITHIN, that count per block of ten and the geometric mean."""
    blocks: dict[int, int] = {}
    for s, x in ratios.items():
        blocks[s // 10] = blocks.get(s // 10, 0) + (x <= 1.0 + bench.WITHIN)
    mean = math.exp(sum(map(math.log, ratios.values())) / len(ratios))
    return sum(blocks.values()), list(blocks.values()), mean


def record(args: argparse.Namespace) -> None:
    """One JSON line per seed: each fit's far-end error, training RMSE, delay and late replays."""
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = bench.load_leg()
        for seed in seeds_of(args.seeds):
            t0 = time.perf_counter()
            rec, log, truth, split, configs = _seed(robot, opts, seed)
            fits = {name: fit_candidate(rec, robot, opts, c) for name, c in configs.items()}
            for g in (GIVEN, FITTED):
                held = dataclasses.replace(opts, delay=int(fits[f"{g}, {BOUNDED}"].delay_steps))
                fits[f"{g}, {OFF}{AT_BOUNDED}"] = fit_candidate(rec, robot, held, configs[f"{g}, {OFF}"])
            lates = {f"{s:g}": late_rmse(rec, robot, opts, fits, s) for s in SHARES}
            row = {
                "seed": seed,
                "truth": truth,
                "candidates": {
                    name: {
                        "far": bench.judged(xml, log, fit, split),
                        "training": float(fit.training.rmse or 0.0),
                        "delay": int(fit.delay_steps),
                        "bias": {k: round(float(v), 6) for k, v in fit.encoder_bias.items()},
                        "late": {s: lates[s][name] for s in lates},
                    }
                    for name, fit in fits.items()
                },
            }
            _append(args.out, row, t0)


def delays(args: argparse.Namespace) -> None:
    """One JSON line per seed of a `record` file: each candidate fitted again with its delay held a step below
    and a step above the one its scan kept, with that fit's far-end error, training RMSE and late replays."""
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    done = _rows([args.records])
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = bench.load_leg()
        for seed in seeds_of(args.seeds):
            t0 = time.perf_counter()
            rec, log, _, split, configs = _seed(robot, opts, seed)
            out: dict[str, dict] = {}
            for name, c in configs.items():
                d0 = int(done[seed]["candidates"][name]["delay"])
                held = {
                    d: fit_candidate(rec, robot, dataclasses.replace(opts, delay=d), c)
                    for d in (d0 - 1, d0 + 1)
                    if 0 <= d <= opts.max_delay
                }
                lates = {
                    f"{s:g}": late_rmse(rec, robot, opts, {str(d): f for d, f in held.items()}, s)
                    for s in (0.3, 0.4)
                }
                out[name] = {
                    str(d): {
                        "far": bench.judged(xml, log, f, split),
                        "training": float(f.training.rmse or 0.0),
                        "late": {s: lates[s][str(d)] for s in lates},
                    }
                    for d, f in held.items()
                }
            _append(args.out, {"seed": seed, "neighbours": out}, t0)


def _sim(xml: str, log: bench.peer.PeerLog, fit: RobotResult, start: int) -> np.ndarray:
    """A fit's positions replayed by the bench's judge from the log's state at `start`."""
    return bench.peer.simulate_terms(xml, log, start, *bench.judge_terms(fit, log))


def teacher(args: argparse.Namespace) -> None:
    """One JSON line per seed: each candidate's far-end error and its distance to a teacher, a model no consumer
    runs (gains fitted, the bias within ±0.05 rad, friction along the stroke, physics `--teacher-decimation`
    steps a sample: a finer delay grid), over the training part's commands played 2 and 3 × faster from the log's
    first state; and the teacher's own far-end error."""
    if args.at_teacher_delay and not args.given:
        raise SystemExit("--at-teacher-delay needs --given: the followed teacher is one of the two")
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    fine = args.teacher_decimation
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = bench.load_leg()
        xml_fine = bench.load_leg(fine)[1]
        for seed in seeds_of(args.seeds):
            t0 = time.perf_counter()
            rec, log, _, split, configs = _seed(robot, opts, seed)
            fits = {name: fit_candidate(rec, robot, opts, c) for name, c in configs.items()}
            rich = dataclasses.replace(opts, decimation=fine, position_friction=True, bias_limit=0.05)
            teachers = {"": fit_candidate(rec, robot, rich, Candidate("teacher", fit_gains=True))}
            if args.given:
                teachers["_given"] = fit_candidate(rec, robot, rich, Candidate("teacher, gains given"))
            at_fine = dataclasses.replace(log, decimation=fine)
            row: dict = {
                "seed": seed,
                "far": {name: bench.judged(xml, log, f, split) for name, f in fits.items()},
                "training": {name: float(f.training.rmse or 0.0) for name, f in fits.items()},
            }
            for key, teach in teachers.items():
                row[f"teacher{key}_far"] = bench.judged(xml_fine, at_fine, teach, split)
                row[f"teacher{key}_training"] = float(teach.training.rmse or 0.0)
                row[f"teacher{key}_delay"] = int(teach.delay_steps)
                row[f"distance{key}"] = {}
            for speed in (2, 3):
                cmd = log.cmd[: split + 1 : speed]
                still = np.repeat(log.q[:1], cmd.shape[0], 0)
                fast = bench.peer.PeerLog(still, np.zeros_like(still), cmd, bench.LOG_DT, fine, log.joints)
                refs = {key: _sim(xml_fine, fast, teach, 0) for key, teach in teachers.items()}
                fast = dataclasses.replace(fast, decimation=bench.DECIMATION)
                sims = {name: _sim(xml, fast, f, 0) for name, f in fits.items()}
                for key, ref in refs.items():
                    row[f"distance{key}"][str(speed)] = {
                        name: float(np.sqrt(np.mean((x - ref) ** 2))) for name, x in sims.items()
                    }
                    # the same distance over each quarter of the playback, slowest first (a chirp's rises)
                    row.setdefault(f"quarters{key}", {})[str(speed)] = {
                        name: [float(np.sqrt(np.mean(e**2))) for e in np.array_split(x - ref, 4)]
                        for name, x in sims.items()
                    }
            if args.at_teacher_delay:
                row["at_teacher"] = _at_teacher_delay(
                    rec, robot, xml, log, split, opts, configs, fits, row, fine
                )
            _append(args.out, row, t0)


def _kept(t: dict) -> str:
    """The key of the teacher the library follows in a teacher line: the log's gains ("_given") unless fitted
    gains ("") lower its training RMSE by GAINS_MARGIN."""
    return "" if t["teacher_training"] < (1.0 - GAINS_MARGIN) * t["teacher_given_training"] else "_given"


def _at_teacher_delay(
    rec: Recording,
    robot: RobotModel,
    xml: str,
    log: bench.peer.PeerLog,
    split: int,
    opts: RobotFitOptions,
    configs: dict,
    fits: dict,
    row: dict,
    fine: int,
) -> dict:
    """Each of the five allowed configurations fitted again at the followed teacher's delay, on the fit's grid
    the step below and the step above where it falls between two (a scan's own delay reused), and judged: for
    rules that take the delay from the teacher instead of the configuration's scan."""
    key = _kept(row)
    d_fine, per = row[f"teacher{key}_delay"], fine // bench.DECIMATION
    far: dict[str, dict[str, float]] = {}
    for d in sorted({d_fine // per, -(-d_fine // per)}):
        held = dataclasses.replace(opts, delay=d)
        far[str(d)] = {
            name: row["far"][name]
            if int(fits[name].delay_steps) == d
            else bench.judged(xml, log, fit_candidate(rec, robot, held, c), split)
            for name, c in configs.items()
            if name != f"{FITTED}, {FREE}"
        }
    return {"followed": key, "fine_delay": d_fine, "per_step": per, "far": far}


def teacher_rules(args: argparse.Namespace) -> None:
    """The candidate closest to the teacher (of all six; of the five the library allows; or the bias alone,
    the gains as today's rule keeps them) against today's rule, per speed, on tuning and fresh seeds."""
    rows, taught = _rows(args.files), _rows(args.teacher)
    today = rule()

    def allowed(n: str) -> bool:
        """One of the five configurations the library allows (no free bias over fitted gains)."""
        return n != f"{FITTED}, {FREE}"

    def closest(t: dict, speed: str, keep: Callable[[str], bool], teacher: str = "") -> str:
        """The candidate `keep` allows nearest a teacher ("" fitted gains, "_given" the log's) at `speed`."""
        d = t[f"distance{teacher}"][speed]
        return min((n for n in d if keep(n)), key=d.__getitem__)

    # the rules that read a record file (today's and the gains as it keeps them) only where one is given
    rules: dict[str, Callable[[dict, dict], str]] = {"today": lambda r, t: today(r)} if rows else {}
    for speed in ("2", "3"):
        rules |= {
            f"closest to the teacher at {speed} ×, of all six": lambda r, t, s=speed: closest(t, s, bool),
            f"closest to the teacher at {speed} ×, no free bias over fitted gains": lambda r, t, s=speed: (
                closest(t, s, allowed)
            ),
        }
        if rows:
            rules[f"closest to the teacher at {speed} ×, the gains as today"] = lambda r, t, s=speed: closest(
                t, s, lambda n: n.startswith(today(r).split(", ")[0])
            )

    def nearest(d: dict[str, float]) -> str:
        """The allowed candidate with the least figure in `d`."""
        return min((n for n in d if allowed(n)), key=d.__getitem__)

    def followed(t: dict, speed: str) -> str:
        """The library's rule: the closest of the five to the teacher it follows."""
        return closest(t, speed, allowed, _kept(t))

    def simplest_near(t: dict, tie: float) -> str:
        """The simplest of the five (gains given before fitted; the bias off, bounded, free) within `tie` of
        the followed teacher's nearest at 3 ×: parsimony where the distances cannot tell."""
        d = {n: v for n, v in t[f"distance{_kept(t)}"]["3"].items() if allowed(n)}
        near = min(d.values()) * (1.0 + tie)
        return next(n for n in d if d[n] <= near)  # the record lists the candidates simplest first

    def both(t: dict, join: Callable[[float, float], float]) -> str:
        """The closest of the five by both teachers' distances at 3 ×, joined."""
        return nearest({n: join(v, t["distance_given"]["3"][n]) for n, v in t["distance"]["3"].items()})

    def summed(t: dict) -> str:
        """The closest of the five to the followed teacher at 2 × and 3 ×, the distances summed."""
        d = t[f"distance{_kept(t)}"]
        return nearest({n: d["2"][n] + v for n, v in d["3"].items()})

    def over(t: dict, part: tuple[int, ...]) -> str:
        """The closest of the five to the followed teacher over `part`'s quarters of the 3 × playback."""
        q = t[f"quarters{_kept(t)}"]["3"]
        return nearest({n: sum(v[i] ** 2 for i in part) for n, v in q.items()})

    if all("distance_given" in t for t in taught.values()):
        for speed in ("2", "3"):
            rules[f"closest to the teacher its training RMSE keeps at {speed} ×, of the five"] = (
                lambda r, t, s=speed: followed(t, s)
            )
        rules |= {
            "closest to the followed teacher at 2 × and 3 × summed, of the five": lambda r, t: summed(t),
            "closest to both teachers at 3 ×, their distances summed": lambda r, t: both(t, float.__add__),
            "closest to both teachers at 3 ×, the larger distance": lambda r, t: both(t, max),
        }
        if all("quarters_given" in t for t in taught.values()):  # the distance over part of the playback
            for label, part in (("first half", (0, 1)), ("last half", (2, 3)), ("last quarter", (3,))):
                rules[f"closest to the followed teacher over the playback's {label} at 3 ×"] = (
                    lambda r, t, x=part: over(t, x)
                )
        for tie in (0.01, 0.02, 0.03, 0.05):
            rules[f"the simplest within {tie:.0%} of the followed teacher's nearest at 3 ×"] = (
                lambda r, t, x=tie: simplest_near(t, x)
            )

    # the library's pick refitted at the followed teacher's delay (the step below or above it on the fit's grid);
    # the library refits at the step above only where the teacher's delay lies between two steps
    def refit(t: dict, side: Callable[..., int], between_only: bool = False) -> float:
        at = t["at_teacher"]["far"]
        if between_only and len(at) == 1:
            return t["far"][followed(t, "3")]
        return at[str(side(map(int, at)))][followed(t, "3")]

    refits: dict[str, Callable[[dict], float]] = {}
    if all("at_teacher" in t for t in taught.values()):
        for label, side in (("below", min), ("above", max)):
            refits[f"the library's pick refitted at the teacher's delay, the step {label}"] = (
                lambda t, x=side: refit(t, x)
            )
        refits["the step above only where the teacher's delay lies between two steps (the library)"] = (
            lambda t: refit(t, max, between_only=True)
        )
    for part, seeds in _parts(list(taught), args.fresh_from):
        best = {s: min(taught[s]["far"].values()) for s in seeds}
        ratio = sorted(taught[s]["teacher_far"] / best[s] for s in seeds)
        print(
            f"{part}: {len(seeds)} seeds; the teacher's far-end error over the best candidate's: median "
            f"{ratio[len(ratio) // 2]:.2f}, {ratio[0]:.2f}–{ratio[-1]:.2f}"
        )
        for label, choose in rules.items():
            within, blocks, mean = _score(
                {s: taught[s]["far"][choose(rows.get(s, {}), taught[s])] / best[s] for s in seeds}
            )
            print(f"  {within:3d}/{len(seeds)}  mean {mean:.3f}  {blocks}  {label}")
        for label, far in refits.items():
            within, blocks, mean = _score({s: far(taught[s]) / best[s] for s in seeds})
            print(f"  {within:3d}/{len(seeds)}  mean {mean:.3f}  {blocks}  {label}")


Rule = Callable[[dict], str]


def _fit(row: dict, name: str) -> dict:
    """A candidate's figures as training_choice sees them (the bias off at the bounded fit's delay)."""
    return row["candidates"][name + AT_BOUNDED if name.endswith(OFF) else name]


def _late(row: dict, name: str, share: str) -> float:
    return float(_fit(row, name)["late"][share])


def _late_mean(v: dict, shares: tuple[str, ...] = ("0.3",)) -> float:
    """The mean log of a fit's late replays over `shares`."""
    return sum(math.log(v["late"][s]) for s in shares) / len(shares)


def _training(row: dict, name: str) -> float:
    return float(_fit(row, name)["training"])


def rule(
    shares: tuple[str, ...] = (f"{LATE_SHARE:g}",),
    gains_by_late: float | None = None,
    with_training: float = 0.0,
    cross: float | None = None,
    agree: float | None = None,
    scanned: bool = False,
) -> Rule:
    """The training choice: the gains by the training RMSE and GAINS_MARGIN (`gains_by_late`: by the late replay
    over shares[0] with that margin), then the bias off or bounded by the late replays' geometric mean over
    `shares` (times the training RMSE to the power `with_training`), then a free bias over the logged gains by
    BIAS_MARGIN of training RMSE. `cross`: over fitted gains whose late replays of bias off and bounded lie
    within that share of each other, the bias as the late replay decides it over the logged gains. `agree`:
    over fitted gains, the bounded bias kept when it lies within that share of the logged gains' bounded bias
    (a true bias is the same whatever the gains; one that takes up a gain error is not). `scanned`: the bias off
    fitted with its own delay scan, not at the bounded fit's delay."""

    def choose(row: dict) -> str:
        if gains_by_late is None:
            ratio = _training(row, f"{FITTED}, {BOUNDED}") / _training(row, f"{GIVEN}, {BOUNDED}")
            gains = FITTED if ratio < 1.0 - GAINS_MARGIN else GIVEN
        else:
            s = shares[0]
            ratio = _late(row, f"{FITTED}, {BOUNDED}", s) / _late(row, f"{GIVEN}, {BOUNDED}", s)
            gains = FITTED if ratio < 1.0 - gains_by_late else GIVEN

        def score(bias: str) -> float:
            name = f"{gains}, {bias}"
            figures = row["candidates"][name] if scanned else _fit(row, name)
            return _late_mean(figures, shares) + with_training * math.log(_training(row, name))

        bias = BOUNDED if score(BOUNDED) < score(OFF) else OFF
        if cross is not None and gains == FITTED and abs(score(BOUNDED) - score(OFF)) <= math.log1p(cross):
            s = shares[0]
            bias = BOUNDED if _late(row, f"{GIVEN}, {BOUNDED}", s) < _late(row, f"{GIVEN}, {OFF}", s) else OFF
        if agree is not None and gains == FITTED:
            a = list(_fit(row, f"{FITTED}, {BOUNDED}")["bias"].values())
            b = list(_fit(row, f"{GIVEN}, {BOUNDED}")["bias"].values())
            gap = math.dist(a, b) / max(math.hypot(*a), math.hypot(*b), 1e-9)
            bias = BOUNDED if gap <= agree else OFF
        if gains == GIVEN and bias == BOUNDED:
            free = _training(row, f"{GIVEN}, {FREE}") < (1.0 - BIAS_MARGIN) * _training(
                row, f"{GIVEN}, {BOUNDED}"
            )
            bias = FREE if free else bias
        return f"{gains}, {bias}"

    return choose


RULES: dict[str, Rule] = {
    f"today: the bias by the late replay over the last {LATE_SHARE:.0%}": rule(),
    **{f"the bias by the last {s:.0%}": rule((f"{s:g}",)) for s in SHARES if s != LATE_SHARE},
    **{
        f"the gains by the late replay too, margin {m:g}": rule(gains_by_late=m)
        for m in (0.0, 0.1, 0.2, GAINS_MARGIN)
    },
    "the bias by the last 20 % and 30 %": rule(("0.2", "0.3")),
    "the bias by the last 30 % and 40 %": rule(("0.3", "0.4")),
    "the bias by the last 10, 20, 30 and 40 %": rule(("0.1", "0.2", "0.3", "0.4")),
    **{f"the bias by the last 30 % × training^{w:g}": rule(with_training=w) for w in (0.5, 1.0)},
    "the bias off with its own delay scan": rule(scanned=True),
    "the bias off with its own delay scan, by the last 30 % and 40 %": rule(("0.3", "0.4"), scanned=True),
    **{
        f"over fitted gains within {c:.0%}, the bias as decided over the logged gains": rule(cross=c)
        for c in (0.02, 0.05, 0.1, 0.2, 10.0)
    },
    **{
        f"over fitted gains, the bounded bias kept when within {a:.0%} of the logged gains' one": rule(
            agree=a
        )
        for a in (0.2, 0.35, 0.5, 0.75)
    },
}


def rules(args: argparse.Namespace) -> None:
    """Per rule, on the tuning seeds and on the fresh ones (from --fresh-from): the count within WITHIN, the
    geometric mean of chosen / best, and the count per block of ten."""
    rows = _rows(args.files)
    for part, seeds in _parts(list(rows), args.fresh_from):
        print(f"{part}: {len(seeds)} seeds")
        for label, choose in RULES.items():
            ratios: dict[int, float] = {}
            for s in seeds:
                far = {k: v["far"] for k, v in rows[s]["candidates"].items() if not k.endswith(AT_BOUNDED)}
                ratios[s] = far[choose(rows[s])] / min(far.values())
            within, blocks, mean = _score(ratios)
            print(
                f"  {within:3d}/{len(seeds)}  mean {mean:.3f}  "
                f"blocks at 8+ {sum(b >= 8 for b in blocks)}/{len(blocks)} {blocks}  {label}"
            )


def _at(cands: dict, near: dict, pick: Callable[[dict[int, dict]], int]) -> dict:
    """Each candidate's figures at the delay `pick` takes from its scanned delay's and its neighbours' (the bias
    off at its own)."""
    out = {}
    for name, c in cands.items():
        if name.endswith(AT_BOUNDED):
            continue
        options = {int(c["delay"]): {**c, "scanned": True}} | {int(d): v for d, v in near[name].items()}
        out[name] = options[pick(options)]
    return out | {f"{g}, {OFF}{AT_BOUNDED}": out[f"{g}, {OFF}"] for g in (GIVEN, FITTED)}


DELAY_RULES: dict[str, Callable[[dict[int, dict]], int]] = {
    "the scan's (today)": lambda o: next(d for d, v in o.items() if v.get("scanned")),
    "the lowest training RMSE": lambda o: min(o, key=lambda d: o[d]["training"]),
    "the lowest late replay, last 30 %": lambda o: min(o, key=lambda d: _late_mean(o[d])),
    "the lowest late replay, last 30 % and 40 %": lambda o: min(
        o, key=lambda d: _late_mean(o[d], ("0.3", "0.4"))
    ),
    "the lowest late replay, last 40 %": lambda o: min(o, key=lambda d: _late_mean(o[d], ("0.4",))),
    "the lowest training RMSE × late replay": lambda o: min(
        o, key=lambda d: o[d]["training"] * o[d]["late"]["0.3"]
    ),
}


def delay_rules(args: argparse.Namespace) -> None:
    """Per delay rule (applied to every candidate), the training choice with the bias off at its own delay: the
    count within WITHIN of the best candidate at the same rule, by block, and the chosen far-end error over the
    one the scan's delays give (a rule that makes every candidate worse can raise the count)."""
    rows = _rows(args.files)
    near = {s: r["neighbours"] for s, r in _rows(args.delays).items()}
    choose = rule(scanned=True)
    today = next(iter(DELAY_RULES.values()))
    for part, seeds in _parts(list(near), args.fresh_from):
        print(f"{part}: {len(seeds)} seeds")
        for label, pick in DELAY_RULES.items():
            ratios, to_today = {}, 0.0
            for s in seeds:
                at = _at(rows[s]["candidates"], near[s], pick)
                far = {k: v["far"] for k, v in at.items() if not k.endswith(AT_BOUNDED)}
                chosen = far[choose({"candidates": at})]
                ratios[s] = chosen / min(far.values())
                base = _at(rows[s]["candidates"], near[s], today)
                to_today += math.log(chosen / base[choose({"candidates": base})]["far"])
            within, blocks, _ = _score(ratios)
            print(
                f"  {within:3d}/{len(seeds)}  {blocks}  chosen / the scan's chosen "
                f"{math.exp(to_today / len(seeds)):.3f}  {label}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--seeds", required=True, help="comma-separated seeds or ranges (0-9,60-69)")
    r.add_argument("--out", required=True)
    d = sub.add_parser("delays")
    d.add_argument("--records", required=True, help="the record file whose scanned delays are the centres")
    d.add_argument("--seeds", required=True)
    d.add_argument("--out", required=True)
    e = sub.add_parser("delay-rules")
    e.add_argument("files", nargs="+", help="record files")
    e.add_argument("--delays", nargs="+", required=True, help="the delays files of those records")
    e.add_argument("--fresh-from", type=int)
    t = sub.add_parser("teacher")
    t.add_argument("--seeds", required=True)
    t.add_argument("--out", required=True)
    t.add_argument(
        "--teacher-decimation", type=int, default=4, help="the teacher's physics steps a log sample"
    )
    t.add_argument(
        "--given", action="store_true", help="also a teacher with the log's gains (distance_given)"
    )
    t.add_argument(
        "--at-teacher-delay",
        action="store_true",
        help="with --given: the five allowed configurations also fitted at the followed teacher's delay",
    )
    for sp in (r, d, t):
        sp.add_argument(
            "--friction-power",
            type=float,
            default=1.0,
            help="the true friction along the stroke: its share to this power (1: linear, as the fits model it)",
        )
    u = sub.add_parser("teacher-rules")
    u.add_argument("files", nargs="*", help="record files (today's rule and the gains as it keeps them)")
    u.add_argument("--teacher", nargs="+", required=True, help="the teacher files of those seeds")
    u.add_argument("--fresh-from", type=int)
    q = sub.add_parser("rules")
    q.add_argument("files", nargs="+")
    q.add_argument("--fresh-from", type=int, help="seeds from here on are counted apart, as fresh")
    args = ap.parse_args(argv)
    bench.FRICTION_POWER = getattr(args, "friction_power", 1.0)
    {
        "record": record,
        "delays": delays,
        "teacher": teacher,
        "rules": rules,
        "delay-rules": delay_rules,
        "teacher-rules": teacher_rules,
    }[args.cmd](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
