"""The ladder selection's numbers per seed, for judging selection rules offline: every rung's figures on inner
splits of the training part and its far-end error, so a rule can be replayed without refitting.

Per seed of bench/ladder_selection.py's known-truth bench, every rung path (bench.rung_paths) is fitted as one named
fit on each inner split of the training part (`inner`: the ladder's own, the fastest training band judges;
`slow`: the slowest band trains, the two faster ones judge) and on the whole training part with the far end held
out. Each rung's pooled and per-recording errors, fit loss, parameter count and fitted values are kept. One JSON
line per seed goes to --out; `rules` replays selection rules on those lines and counts the seeds whose pick lies
within 5 % of the best rung far out.

Usage: python bench/ladder_selection_rules.py record --seeds 0-9 --out FILE [--splits inner,slow]
       python bench/ladder_selection_rules.py rules FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]

import ladder_selection as bench  # noqa: E402

from actuator_sysid.datasets.readers import read_paths  # noqa: E402
from actuator_sysid.datasets.recording import Recording  # noqa: E402
from actuator_sysid.fitting.fit import FitRequest, fit_result  # noqa: E402
from actuator_sysid.fitting.ladder import (  # noqa: E402
    DELAY,
    MIN_GAIN,
    NATIVE,
    Walk,
    first_rungs,
    friction_rungs,
    inner_split,
    mujoco_rungs,
)
from actuator_sysid.fitting.result import FitResult, ModelFit  # noqa: E402
from actuator_sysid.models.families import FAMILIES  # noqa: E402

JOINT = "xl330"
JUDGE_KEY = "bench_judges"


def _split(m: Any) -> dict[str, float | None] | None:
    if m is None:
        return None
    return {"mae": m.position_mae, "rmse": m.position_rmse, "vel_rmse": m.velocity_rmse}


def _figures(m: ModelFit) -> dict[str, Any]:
    """One rung's figures: pooled train and validation errors, per-recording errors, loss, parameters."""
    return {
        "train": _split(m.metrics.train),
        "validation": _split(m.metrics.validation),
        "segments": {
            s.segment: {
                "split": s.split,
                "mae": s.position_mae,
                "rmse": s.position_rmse,
                "vel": s.velocity_rmse,
            }
            for s in m.metrics.segments
        },
        "loss": m.loss,
        "n_params": m.n_params,
        "params": {k: v for k, v in m.params.items() if isinstance(v, int | float)},
    }


def _every_rung(rec: Recording, req: FitRequest) -> dict[str, Any]:
    """Every rung path fitted as one named fit on `rec`'s split: each rung's figures."""
    out: dict[str, Any] = {}
    for path in bench.rung_paths():
        res: FitResult = fit_result(rec, dataclasses.replace(req, families=path))
        out |= {f: _figures(m) for f, m in res.joints[JOINT].models.items()}
    return out


def _marked(rec: Recording, judges: set[float], trains: set[float]) -> Recording:
    """The training recordings of the bands in `trains` and `judges`, the judges marked."""
    segs = [
        dataclasses.replace(
            s, metadata={**s.metadata, JUDGE_KEY: "yes" if s.metadata["band_hz"] in judges else "no"}
        )
        for s in rec.segments
        if s.metadata["band_hz"] in judges | trains
    ]
    return dataclasses.replace(rec, segments=segs)


def record_seed(seed: int, search: dict[str, int], splits: list[str]) -> dict[str, Any]:
    """One seed's numbers: every rung on each inner split and on the whole training part (far end held out)."""
    t0 = time.perf_counter()
    t = bench.truth(seed)
    with tempfile.TemporaryDirectory() as tmp:
        rec = bench.tagged(read_paths(bench.write_logs(Path(tmp), t, 3.0)))
    holdout = f"band_hz={bench.FAR:g}"
    base = FitRequest(families=None, holdout=holdout, seed=seed, **search)  # type: ignore[arg-type]
    row: dict[str, Any] = {"seed": seed, "truth": t, "splits": {}}
    for name in splits:
        if name == "inner":
            inner = inner_split(rec, dataclasses.replace(base, ladder_judge="training"))
            assert inner is not None
            row["splits"][name] = {"how": inner.how, "rungs": _every_rung(inner.rec, inner.req)}
        elif name == "slow":
            b = sorted(bench.TRAIN_BANDS)
            part = _marked(rec, set(b[1:]), {b[0]})
            req = FitRequest(families=None, holdout=f"{JUDGE_KEY}=yes", seed=seed, **search)  # type: ignore[arg-type]
            row["splits"][name] = {
                "how": f"{b[0]} Hz trains, {b[1:]} Hz judge",
                "rungs": _every_rung(part, req),
            }
    row["far"] = _every_rung(rec, base)
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


# ---- offline rules ----------------------------------------------------------------------------------------------

Rule = Callable[[dict[str, Any]], str]


def _score(row: dict[str, Any], split: str, key: str) -> dict[str, float]:
    """Each rung's pooled validation figure `key` on an inner split."""
    out = {}
    for f, fig in row["splits"][split]["rungs"].items():
        v = (fig["validation"] or {}).get(key)
        if v is not None and math.isfinite(v):
            out[f] = float(v)
    return out


def ladder_walk(errors: dict[str, float], margin: float) -> str:
    """The ladder's rule on given errors (the bench's own walk), the native envelope where nothing was kept."""
    return bench._walk_pick(errors, margin)[0] or NATIVE


def far_of(row: dict[str, Any]) -> dict[str, float]:
    return {f: fig["validation"]["mae"] for f, fig in row["far"].items() if fig["validation"]}


def evaluate(rows: list[dict[str, Any]], rule: Rule) -> tuple[int, list[tuple[int, str, float]]]:
    """How many seeds the rule's pick lies within the bench's tolerance of the best rung far out."""
    out = []
    for r in rows:
        far = far_of(r)
        pick = rule(r)
        out.append((r["seed"], pick, far[pick] / min(far.values())))
    return sum(x <= 1 + bench.TOLERANCE for *_, x in out), out


def velocity_walk(row: dict[str, Any]) -> str:
    """A phase-sensitive variant of the ladder's climb on recorded inner figures: the delay kept unless it costs
    MIN_GAIN in position MAE, then a friction or MuJoCo rung kept when its velocity RMSE is strictly lower."""
    pos, vel = _score(row, "inner", "mae"), _score(row, "inner", "vel_rmse")
    delay = pos.get(DELAY, math.inf)
    base = DELAY if math.isfinite(delay) and delay <= pos[NATIVE] * (1 + MIN_GAIN) else NATIVE
    walk = Walk(min_gain=1e-12)
    walk.judge(next(r for r in first_rungs() if r.family == base), vel.get(base))
    for rung in [*friction_rungs(base), *mujoco_rungs()]:
        walk.judge(rung, vel.get(rung.family))
    return walk.kept or base


def _parsimony(scores: dict[str, float], tol: float, only: Callable[[str], bool] = lambda f: True) -> str:
    """The fewest-parameter rung within `tol` of the least score (among the rungs `only` admits)."""
    s = {f: v for f, v in scores.items() if only(f)}
    best = min(s.values())
    return min((f for f in s if s[f] <= best * (1 + tol)), key=lambda f: (len(FAMILIES[f].params), s[f]))


def rules() -> dict[str, Rule]:
    """The rules replayed: the ladder's walk at margins on the inner MAE, RMSE and velocity RMSE; the least
    inner figure over every rung (fewest parameters within a tolerance); delay rungs only; the two inner splits
    together; the ladder's training judge and its velocity variant; fixed picks."""
    out: dict[str, Rule] = {}
    for key in ("mae", "rmse", "vel_rmse"):
        for margin in (0.0, MIN_GAIN):
            out[f"walk {key} {margin:g}"] = lambda r, k=key, m=margin: ladder_walk(_score(r, "inner", k), m)
        for tol in (0.0, 0.05, 0.1, 0.2):
            out[f"least {key} within {tol:g}"] = lambda r, k=key, t=tol: _parsimony(_score(r, "inner", k), t)
            out[f"least {key} within {tol:g}, delay rungs"] = lambda r, k=key, t=tol: _parsimony(
                _score(r, "inner", k), t, lambda f: f.endswith("_delay")
            )

    def two(r: dict[str, Any], key: str) -> dict[str, float]:
        a, b = _score(r, "inner", key), _score(r, "slow", key)
        return {f: a[f] / min(a.values()) + b[f] / min(b.values()) for f in a if f in b}

    for key in ("mae", "vel_rmse"):
        out[f"both splits {key}"] = lambda r, k=key: _parsimony(two(r, k), 0.0)
    out["training judge (the ladder's rule)"] = lambda r: ladder_walk(_score(r, "inner", "mae"), MIN_GAIN)
    out["velocity judges"] = velocity_walk
    out["always delay"] = lambda r: DELAY
    out["always the richest"] = lambda r: bench.RICHEST
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--seeds", required=True, help="a range a-b or a list a,b,c")
    rec.add_argument("--out", required=True)
    rec.add_argument("--splits", default="inner")
    rul = sub.add_parser("rules")
    rul.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        lo, sep, hi = args.seeds.partition("-")
        seeds = list(range(int(lo), int(hi) + 1)) if sep else [int(s) for s in args.seeds.split(",")]
        for seed in seeds:
            row = record_seed(seed, bench.SEARCH, args.splits.split(","))
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"seed {seed}: {row['wall_s']} s", file=sys.stderr, flush=True)
        return 0
    rows = [json.loads(line) for f in args.files for line in Path(f).read_text().splitlines() if line.strip()]
    print(
        "seeds " + " ".join(str(r["seed"]) for r in rows) + "; each pick's far-end MAE over the best rung's"
    )
    for name, rule in rules().items():
        if name.startswith("both splits") and any("slow" not in r["splits"] for r in rows):
            continue
        n, per = evaluate(rows, rule)
        print(f"{n:2d}/{len(rows)} {name}: " + " ".join(f"{x:.2f}" for *_, x in per))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
