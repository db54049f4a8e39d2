"""The fit's plan: which segments train and which validate (always whole recordings), and the one check of
a request against a dataset (`validate_request`) that the CLI, the API and the worker run before a fit."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from ..datasets.recording import Recording, Segment
from ..models.families import NET_FAMILIES
from .request import FitRequest, FitRequestError, check_fields

VALIDATION_SUFFIX = "@validation"  # a time split's validation piece: "<segment>@validation"


def split_in_time(rec: Recording, fraction: float | None) -> Recording:
    """The recording with each segment cut in time (validate_last): its first 1 − fraction trains under its own
    name, the rest validates as "<name>@validation" (metadata `continues`: the training piece, so a network
    takes its history across the cut; a parametric rollout starts there from the measured state). Both keep
    the segment's recording, so no other split separates them. Unchanged without a fraction, or when cut
    already."""
    if fraction is None or any("continues" in s.metadata for s in rec.segments):
        return rec
    if not 0 < fraction < 1:
        raise FitRequestError(f"validate_last must be a fraction between 0 and 1, got {fraction}")
    groups = recordings(rec)
    owner = {
        i: rec.segments[g[0]].metadata.get("recording", rec.segments[g[0]].name) for g in groups for i in g
    }
    segs = []
    for i, seg in enumerate(rec.segments):
        cut = seg.n - int(round(fraction * seg.n))
        if cut < 2 or seg.n - cut < 2:
            raise FitRequestError(
                f"validate_last {fraction:g}: segment {seg.name!r} has {seg.n} samples, too few to keep two "
                "for training and two for validation"
            )
        for sl, name, extra in (
            (slice(0, cut), seg.name, {}),
            (slice(cut, None), seg.name + VALIDATION_SUFFIX, {"continues": seg.name}),
        ):
            segs.append(
                replace(
                    seg,
                    name=name,
                    t=seg.t[sl],
                    q=seg.q[sl],
                    qd=seg.qd[sl],
                    q_des=seg.q_des[sl],
                    qd_des=seg.qd_des[sl],
                    tau_ff=seg.tau_ff[sl],
                    tau=None if seg.tau is None else seg.tau[sl],
                    enable=None if seg.enable is None else seg.enable[sl],
                    metadata={**seg.metadata, "recording": owner[i], **extra},
                )
            )
    return replace(rec, segments=segs)


def validate_request(rec: Recording, req: FitRequest) -> None:
    """Raise FitRequestError naming the problem, before anything is queued or stored."""
    rec = split_in_time(rec, req.validate_last)
    check_fields(rec, req)
    if (
        any(m in NET_FAMILIES for m in req.families or []) or req.networks
    ):  # network options are bounded even unused
        from .training import check_request

        check_request(rec, req if req.families is not None else replace(req, families=[]))  # a ladder: no net
    if not rec.segments:
        raise FitRequestError("the dataset has no segments")
    plan_split(rec, req)  # raises FitRequestError for a holdout or folds the segments cannot satisfy
    missing = [s.name for s in rec.segments if s.q_des is None]
    if missing:
        raise FitRequestError(
            f"segments {missing} have no q_des: closed-loop fits need the commanded position"
        )


def _evenly(m: int, k: int) -> list[int]:
    """k of m positions, evenly spaced and away from both ends (0 … m-1)."""
    return sorted({int(round(x)) for x in np.linspace(0, m - 1, k + 2)[1:-1]})


def split_segments(n: int, validation_fraction: float = 0.2) -> tuple[list[int], list[int]]:
    """Hold out evenly spaced whole segments for validation; a single segment is train only."""
    if n < 2:
        return list(range(n)), []
    val = _evenly(n, max(1, int(round(validation_fraction * n))))
    return [i for i in range(n) if i not in val], val


@dataclass
class Split:
    """Which segments train and which validate; cross-validation adds each fold's validation segments."""

    method: str
    train: list[int]
    validation: list[int]
    folds: list[list[int]] = field(default_factory=list)
    fold_names: list[str] = field(default_factory=list)  # leave-one-value-out: "kp=100", … per fold


def _matches(value: object, wanted: str) -> bool:
    """A metadata value equals the text of a holdout: as text, or as numbers (kp=20 matches 20.0)."""
    if str(value) == wanted or (isinstance(value, bool) and str(value).lower() == wanted.lower()):
        return True
    try:
        return float(value) == float(wanted)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def recordings(rec: Recording) -> list[list[int]]:
    """Segment indices per recording (one run: a file, or a table's declared segment), in order of appearance.

    A segment's recording is its metadata ``recording`` (readers set it on the pieces of a run split at time
    gaps), else its own name; BAM datasets read before a file was one segment (no per-sample enable) named a
    file's torque-on and torque-off stretches ``<file>.<k>`` with the same ``bam`` fields: those stay together.
    """
    names = [str(s.metadata["recording"]) if "recording" in s.metadata else s.name for s in rec.segments]
    stems = [
        re.fullmatch(r"(.+)\.\d+", s.name)
        if "recording" not in s.metadata and s.enable is None and isinstance(s.metadata.get("bam"), dict)
        else None
        for s in rec.segments
    ]
    for i, m in enumerate(stems):
        if (
            m
            and sum(
                1
                for j, o in enumerate(stems)
                if o
                and o.group(1) == m.group(1)
                and rec.segments[j].metadata["bam"] == rec.segments[i].metadata["bam"]
            )
            > 1
        ):
            names[i] = m.group(1)
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name, []).append(i)
    return list(groups.values())


def _free_swing(seg: Segment) -> bool:
    """Whether the actuator is off anywhere in the segment (metadata free_swing, or a torque-off stretch)."""
    return bool(seg.metadata.get("free_swing")) or (seg.enable is not None and not bool(np.all(seg.enable)))


def _leaves(meta: dict, prefix: str = "") -> dict[str, object]:
    """Every non-object value of nested metadata by its dotted path ({"bam": {"kp": 100}} → "bam.kp")."""
    out: dict[str, object] = {}
    for k, v in meta.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _metadata_key(rec: Recording, key: str, what: str) -> tuple[str, list[dict[str, object]]]:
    """The dotted path a user's key names (top level, dotted, or a unique nested name) and each segment's values."""
    leaves = [_leaves(s.metadata) for s in rec.segments]
    paths = sorted({p for lv in leaves for p in lv})
    if key in paths:
        return key, leaves
    nested = [p for p in paths if p.endswith("." + key)]
    if len(nested) == 1:
        return nested[0], leaves
    if nested:
        raise FitRequestError(
            f"{what}: metadata key {key!r} is ambiguous, it is {' and '.join(nested)}; write the one you mean"
        )
    raise FitRequestError(f"{what}: no segment has metadata key {key!r}; the keys you can write are {paths}")


def _value_id(value: object) -> object:
    """Values that _matches the same text are one value: 20 and 20.0 are both 20.0."""
    if not isinstance(value, bool):
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    return str(value)


def _value_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _whole(groups: list[list[int]], ids: set[int]) -> list[int]:
    """Every segment of the recordings that hold any of `ids`."""
    return sorted(i for g in groups if ids.intersection(g) for i in g)


def _leave_one_value_out(rec: Recording, key: str, groups: list[list[int]]) -> Split:
    """One fold per value of a metadata key: its recordings validate, the rest train (folds_by)."""
    what = f"folds_by {key!r}"
    if not key:
        raise FitRequestError("folds_by must name a metadata key, e.g. kp")
    path, leaves = _metadata_key(rec, key, what)
    values: dict[object, object] = {}
    for lv in leaves:
        if path in lv:
            values.setdefault(_value_id(lv[path]), lv[path])
    order = sorted(values, key=lambda v: (isinstance(v, str), v))  # numbers ascending, then text
    if len(order) < 2:
        who = "every segment has" if all(path in lv for lv in leaves) else "every segment with it has"
        raise FitRequestError(
            f"{what}: {who} {path} = {_value_text(values[order[0]])}; "
            "leave-one-value-out needs two values or more"
        )
    folds = []
    for v in order:
        folds.append(
            _whole(groups, {i for i, lv in enumerate(leaves) if path in lv and _value_id(lv[path]) == v})
        )
    owner: dict[int, int] = {}
    for k, fold in enumerate(folds):
        for i in fold:
            if i in owner:
                other = [rec.segments[j].name for j in next(g for g in groups if i in g)]
                raise FitRequestError(
                    f"{what}: the recording of segments {other} has {path} = "
                    f"{_value_text(values[order[owner[i]]])} and {_value_text(values[order[k]])}; "
                    "a recording must stay in one fold"
                )
            owner[i] = k
    names = [f"{path}={_value_text(values[v])}" for v in order]
    n = len(rec.segments)
    return Split(
        f"leave one {path} out ({', '.join(names)}), whole recordings; final parameters from a fit on "
        "every segment",
        list(range(n)),
        [],
        folds,
        names,
    )


def plan_split(rec: Recording, req: FitRequest) -> Split:
    """The request's split, always of whole recordings: by metadata value (holdout), one fold per value (folds_by),
    k-fold (folds), or evenly spaced recordings with those that swing freely kept in training."""
    n = len(rec.segments)
    given = [k for k in ("holdout", "folds", "folds_by", "validate_last") if getattr(req, k) is not None]
    if len(given) > 1:
        raise FitRequestError(f"{' and '.join(given)} exclude each other: give one of them")
    if req.validate_last is not None:
        val = [i for i, s in enumerate(rec.segments) if "continues" in s.metadata]
        if not val:
            raise FitRequestError("validate_last: the recording was not split in time (plan.split_in_time)")
        return Split(
            f"time split: the last {req.validate_last:.0%} of each segment validates, starting from the "
            "measured state at the cut (a network's history carried across it)",
            [i for i in range(n) if i not in val],
            val,
        )
    groups = recordings(rec)
    r = len(groups)
    if req.folds is not None:
        if not 2 <= req.folds <= r:
            raise FitRequestError(
                f"folds must be between 2 and the number of recordings ({r}), got {req.folds}"
            )
        folds = [sorted(i for g in groups[f :: req.folds] for i in g) for f in range(req.folds)]
        return Split(
            f"{req.folds}-fold over whole recordings; final parameters from a fit on every segment",
            list(range(n)),
            [],
            folds,
        )
    if req.folds_by is not None:
        return _leave_one_value_out(rec, req.folds_by.strip(), groups)
    if req.holdout is not None:
        key, sep, value = req.holdout.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise FitRequestError(f"holdout must be KEY=VALUE (e.g. kp=20), got {req.holdout!r}")
        path, leaves = _metadata_key(rec, key, f"holdout {req.holdout!r}")
        hit = {i for i, lv in enumerate(leaves) if path in lv and _matches(lv[path], value)}
        seen = sorted({str(lv[path]) for lv in leaves if path in lv})
        if not hit:
            raise FitRequestError(
                f"holdout {req.holdout!r}: no segment has {path} = {value}; its values are {seen}"
            )
        val = _whole(groups, hit)
        if len(val) == n:
            who = "every segment has" if len(hit) == n else "the recordings of the segments with"
            raise FitRequestError(
                f"holdout {req.holdout!r}: {who} {path} = {value}, none is left to train on; "
                f"hold out another value of {seen}"
            )
        more = (
            f" (and the {len(val) - len(hit)} other segments of their recordings)"
            if len(val) > len(hit)
            else ""
        )
        return Split(
            f"recordings whose {path} = {value} held out{more}", [i for i in range(n) if i not in val], val
        )
    if r < 2:
        return Split("one recording: every segment trains, none validates", list(range(n)), [])
    free = [g for g in range(r) if any(_free_swing(rec.segments[i]) for i in groups[g])]
    candidates = [g for g in range(r) if g not in free] or free[
        1:
    ]  # all swing freely: the first keeps training
    picked = [
        candidates[j] for j in _evenly(len(candidates), min(max(1, int(round(0.2 * r))), len(candidates)))
    ]
    val = sorted(i for g in picked for i in groups[g])
    why = "; recordings with free swing train" if free else ""
    return Split(f"whole recordings, evenly spaced{why}", [i for i in range(n) if i not in val], val)
