"""The robot selection's training choice judged offline: rules for the gains and the bias replayed on each
candidate's figures, without refitting.

Per seed of bench/robot_selection.py's known-truth leg, each of the six candidates (gains given / fitted × bias
off / within ±0.05 rad / free) is fitted on the whole training part as the bench fits it (delay scanned), and the
bias off is fitted again at the bounded fit's delay, as `training_choice` fits it. Each fit states its far-end
error (the bench's MuJoCo judge), its training RMSE and `late_rmse` at each of SHARES (replayed free over the
training part's last share). `rules` then replays training-choice rules on those lines: today's (the gains by
the training RMSE and GAINS_MARGIN, the bias by the late replay over LATE_SHARE, a free bias by BIAS_MARGIN) and
variants (another share, the gains by the late replay too, several shares, the training RMSE beside the late
replay). Today's rule gives the library's choice on every seed where the refit lands on the same delay.

Usage: python bench/robot_selection_late.py record --seeds 0-9,60-69 --out FILE
       python bench/robot_selection_late.py rules FILE [FILE ...] [--fresh-from SEED]
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

from actuator_sysid.fitting.robot import RobotFitOptions  # noqa: E402
from actuator_sysid.fitting.robot_select import (  # noqa: E402
    BIAS_MARGIN,
    GAINS_MARGIN,
    LATE_SHARE,
    configurations,
    fit_candidate,
    late_rmse,
)

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


def record(args: argparse.Namespace) -> None:
    """One JSON line per seed: each fit's far-end error, training RMSE, delay and late replays."""
    opts = RobotFitOptions(decimation=bench.DECIMATION, validation_fraction=bench.VALIDATION)
    with contextlib.redirect_stdout(sys.stderr):
        robot, xml = bench.load_leg()
        for seed in seeds_of(args.seeds):
            t0 = time.perf_counter()
            rec, log, truth = bench.make_log(robot, seed, 8.0)
            split = int(round(log.q.shape[0] * (1.0 - bench.VALIDATION)))
            configs = {c.name: c for c in configurations(bench.bench_axes(rec, robot, opts))}
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
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            bench.say(f"seed {seed}: {row['wall_s']} s")


Rule = Callable[[dict], str]


def _fit(row: dict, name: str) -> dict:
    """A candidate's figures as training_choice sees them (the bias off at the bounded fit's delay)."""
    return row["candidates"][name + AT_BOUNDED if name.endswith(OFF) else name]


def _late(row: dict, name: str, share: str) -> float:
    return float(_fit(row, name)["late"][share])


def _training(row: dict, name: str) -> float:
    return float(_fit(row, name)["training"])


def rule(
    shares: tuple[str, ...] = (f"{LATE_SHARE:g}",),
    gains_by_late: float | None = None,
    with_training: float = 0.0,
) -> Rule:
    """The training choice: the gains by the training RMSE and GAINS_MARGIN (`gains_by_late`: by the late replay
    over shares[0] with that margin), then the bias off or bounded by the late replays' geometric mean over
    `shares` (times the training RMSE to the power `with_training`), then a free bias over the logged gains by
    BIAS_MARGIN of training RMSE."""

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
            logs = [math.log(_late(row, name, s)) for s in shares]
            return sum(logs) / len(logs) + with_training * math.log(_training(row, name))

        bias = BOUNDED if score(BOUNDED) < score(OFF) else OFF
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
}


def rules(args: argparse.Namespace) -> None:
    """Per rule, on the tuning seeds and on the fresh ones (from --fresh-from): the count within WITHIN, the
    geometric mean of chosen / best, and the count per block of ten."""
    rows = {r["seed"]: r for f in args.files for r in map(json.loads, Path(f).read_text().splitlines())}
    parts = {
        "tuning": [r for s, r in sorted(rows.items()) if args.fresh_from is None or s < args.fresh_from],
        "fresh": [r for s, r in sorted(rows.items()) if args.fresh_from is not None and s >= args.fresh_from],
    }
    for part, chosen_rows in parts.items():
        if not chosen_rows:
            continue
        print(f"{part}: {len(chosen_rows)} seeds")
        for label, choose in RULES.items():
            ratios: dict[int, float] = {}
            for r in chosen_rows:
                far = {k: v["far"] for k, v in r["candidates"].items() if not k.endswith(AT_BOUNDED)}
                ratios[r["seed"]] = far[choose(r)] / min(far.values())
            within = {s: x <= 1.0 + bench.WITHIN for s, x in ratios.items()}
            blocks: dict[int, int] = {}
            for s, ok in within.items():
                blocks[s // 10] = blocks.get(s // 10, 0) + ok
            mean = math.exp(sum(map(math.log, ratios.values())) / len(ratios))
            print(
                f"  {sum(within.values()):3d}/{len(within)}  mean {mean:.3f}  "
                f"blocks at 8+ {sum(b >= 8 for b in blocks.values())}/{len(blocks)} "
                f"{list(blocks.values())}  {label}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--seeds", required=True, help="comma-separated seeds or ranges (0-9,60-69)")
    r.add_argument("--out", required=True)
    q = sub.add_parser("rules")
    q.add_argument("files", nargs="+")
    q.add_argument("--fresh-from", type=int, help="seeds from here on are counted apart, as fresh")
    args = ap.parse_args(argv)
    (record if args.cmd == "record" else rules)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
