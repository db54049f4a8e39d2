"""BAM test-bench logs (log-formats §2): Rhoban's pendulum bench, one JSON file per run, many runs per set.

Every file becomes one segment, named after the file (split only at time gaps), rolled out whole as BAM
rolls it out: ``torque_enable`` becomes the per-sample ``Segment.enable`` channel (no actuator effort where
it is off), and a file off throughout gets ``metadata["free_swing"] = True``. The firmware ``kp`` is in the
servo's units: segments say ``gain_units = "device"`` and carry ``kp`` and ``vin`` at the top of their
metadata, so a fit estimates one conversion to N·m/rad shared by every file. The file's pendulum (mass m at length l on an arm of mass m_arm) becomes a per-segment
load override, expressed exactly with the existing JointInfo fields as the rigid body it is::

    mass = m + m_arm                         (all the moving mass)
    com_distance = (m + m_arm/2)·l / mass    (its centre of mass)
    inertia = m·l² + m_arm·l²/3 − mass·com_distance²   (≥ 0: the inertia about that centre)

so that ``Recording.load_for`` gives J = m·l² + m_arm·l²/3 and a gravity coefficient (m + m_arm/2)·g·l.
The file's own fields (mass, length, arm_mass, kp in firmware units, vin, motor, trajectory, eRob's
damping) are kept as ``metadata["bam"]``. ``load`` is a vendor register (the XL330's Present PWM as
recorded, the MX's Present Load) and eRob's ``control`` a current: neither is effort, so BAM recordings have no
measured torque.
"""

from __future__ import annotations

import json
import math
from typing import Literal, overload

import numpy as np

from .assemble import TABLE_CHANNELS, RawSegment, assemble, check_increasing, finite
from .jsontext import check_depth
from .names import safe_name
from .recording import DatasetError, Recording
from .registry import register_reader
from .servo_laws import SERVO_LAWS, law_for
from .sources import ReadOptions, Source, head_text

NUMERIC_FILE_FIELDS = ("mass", "length", "arm_mass", "kp", "vin", "damping", "dt")
KNOWN_ENTRY_FIELDS = {
    "timestamp",
    "position",
    "speed",
    "goal_position",
    "torque_enable",
    "input_volts",
    "temp",
    "load",
    "torque_demand",
    "control",
}


# Voltage-driven servos whose firmware P law is known (datasets/servo_laws.py, each row citing BAM's source):
# duty = clip(duty_per_kp_rad·kp·(g − q), ±max_duty), |current| ≤ current_limit [A], the goal g slewed at most
# goal_rate_limit [rad/s] where the firmware does so. The XL330 logs' Present PWM follows its law, clip included
# (tests/test_bam_plant.py). A fit of such a servo ties the DC-motor envelope to its gain: saturation effort,
# velocity limit and effort limit follow from stiffness and damping (models/rollout.py VoltageServo), as the
# motor's kt and R make them, and the damping kt²/R keeps R in the law's range: logs at low kp cannot tell
# back-EMF damping from viscous friction, and an implausibly low R there mispredicts every higher kp.
VOLTAGE_SERVOS = {
    name: servo for name, law in SERVO_LAWS.items() if (servo := law.voltage_servo()) is not None
}


def is_bam(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("entries"), list)


def pendulum_load(m: float, length: float, m_arm: float) -> dict[str, float]:
    """JointInfo fields (mass, com_distance, inertia) of a point mass m at length l on a uniform arm m_arm."""
    total = m + m_arm
    if total <= 0:
        return {"mass": 0.0, "com_distance": 0.0, "inertia": 0.0}
    com = (m + m_arm / 2) * length / total
    inertia = max(0.0, m * length**2 + m_arm * length**2 / 3 - total * com**2)
    return {"mass": total, "com_distance": com, "inertia": inertia}


def _number(d: dict, key: str, filename: str, where: str, required: bool = False) -> float | None:
    v = d.get(key)
    if v is None:
        if required:
            raise DatasetError(
                f"{filename}: {where}missing field {key!r}; BAM logs give {key} (see log-formats §2)"
            )
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise DatasetError(f"{filename}: {where}field {key!r} must be a finite number, got {v!r}")
    return float(v)


def _file_fields(d: dict, filename: str) -> dict:
    """The run's top-level fields, checked; `arm-mass` is read as `arm_mass`."""
    if "arm_mass" not in d and "arm-mass" in d:
        d = {**d, "arm_mass": d["arm-mass"]}
    out: dict = {}
    for k in NUMERIC_FILE_FIELDS:
        v = _number(d, k, filename, "", required=k in ("mass", "length"))
        if v is not None:
            if k != "kp" and v < 0:
                raise DatasetError(f"{filename}: field {k!r} must be ≥ 0, got {v!r}")
            out[k] = v
    out.setdefault("arm_mass", 0.0)
    if out.get("dt") is not None and out["dt"] <= 0:
        raise DatasetError(f"{filename}: field 'dt' must be a positive step in seconds, got {out['dt']!r}")
    for k in ("motor", "trajectory"):
        if k in d:
            out[k] = str(d[k])
    return out


@overload
def _column(
    entries: list, key: str, filename: str, required: Literal[True], kind: type = float
) -> np.ndarray: ...
@overload
def _column(
    entries: list, key: str, filename: str, required: bool, kind: type = float
) -> np.ndarray | None: ...
def _column(entries: list, key: str, filename: str, required: bool, kind: type = float) -> np.ndarray | None:
    """One field of every entry as an array; the error names the entry index and the field."""
    present = [key in e for e in entries]
    if not any(present):
        if required:
            raise DatasetError(f"{filename}: entries have no {key!r} field; BAM entries need {key}")
        return None
    if not all(present):
        k = present.index(False)
        raise DatasetError(
            f"{filename}: entries[{k}] has no {key!r} field (other entries have it); "
            "every entry needs the same fields"
        )
    vals = [e[key] for e in entries]
    if kind is bool:
        for k, v in enumerate(vals):
            if not isinstance(v, bool | int | float):
                raise DatasetError(f"{filename}: entries[{k}].{key} must be true or false, got {v!r}")
        return np.array([bool(v) for v in vals])
    for k, v in enumerate(vals):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise DatasetError(f"{filename}: entries[{k}].{key} must be a number, got {v!r}")
    arr = np.array(vals, dtype=np.float64)
    finite(arr, filename, f"entries[].{key}", unit="entry", base=0)
    return arr


def _load(src: Source) -> dict:
    """One BAM file's JSON, checked to be a run with a non-empty list of entry objects."""
    fn = src.name
    try:
        text = src.read_bytes().decode("utf-8-sig")
        check_depth(text, fn)  # before json.loads, which recurses once per level
        d = json.loads(text)
    except UnicodeDecodeError:
        raise DatasetError(f"{fn}: not UTF-8 text; a BAM log is a JSON file") from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"{fn}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    if not is_bam(d):
        raise DatasetError(
            f"{fn}: not a BAM log: no 'entries' list (a JSON sidecar goes in the metadata "
            "field or --sidecar, not beside the BAM files)"
        )
    if len(d["entries"]) == 0:
        raise DatasetError(f"{fn}: 'entries' is empty; the run recorded no samples")
    for k, entry in enumerate(d["entries"]):
        if not isinstance(entry, dict):
            raise DatasetError(f"{fn}: entries[{k}] must be an object, got {type(entry).__name__}")
    return d


def _segment(src: Source, d: dict, info: dict, joint: str) -> tuple[RawSegment, dict[str, float]]:
    """One file as one raw segment (split only at time gaps) and its pendulum load: positions, targets, the
    logged speed and the torque enable per sample, with kp, vin and the voltage servo at the top of its metadata."""
    fn, entries = src.name, d["entries"]
    q = _column(entries, "position", fn, True)
    q_des = _column(entries, "goal_position", fn, True)
    qd = _column(entries, "speed", fn, False)
    enable = _column(entries, "torque_enable", fn, False, bool)
    t = _column(entries, "timestamp", fn, False)
    if t is None:
        if "dt" not in info:
            raise DatasetError(f"{fn}: entries have no 'timestamp' and the file has no 'dt'; give one")
        t = info["dt"] * np.arange(len(entries), dtype=np.float64)
    rows = np.arange(len(entries))
    check_increasing(t, rows, f"{fn}, entries[].timestamp", unit="entry")
    load = pendulum_load(info["mass"], info["length"], info["arm_mass"])
    if enable is None:
        enable = np.ones(len(entries), dtype=bool)
    # one segment per file, rolled out whole as BAM rolls it out: the torque enable is a per-sample channel
    # (the kernel applies no actuator effort where it is off); a file off throughout is a free swing
    meta: dict = {"bam": dict(info), "joints": {joint: dict(load)}, "gain_units": "device"}
    for key in ("kp", "vin"):  # the firmware gain and the supply voltage, at the top for the fit and holdouts
        if key in info:
            meta[key] = info[key]
    if not enable.any():
        meta["free_swing"] = True
    law, _ = law_for(info.get("motor"))
    servo = None if law is None else law.voltage_servo()
    if servo is not None:
        meta["voltage_servo"] = servo
    elif law is not None and law.name == "generic":  # an unlisted servo: its law is fitted
        meta["servo_law"] = law.name
    data = {"q": q[:, None], "q_des": q_des[:, None], "enable": enable[:, None].astype(np.float64)}
    if qd is not None:
        data["qd"] = qd[:, None]
    present = {ch: [ch in data] for ch in TABLE_CHANNELS}
    name = safe_name(src.stem)  # named after its file: made a name, not refused
    return RawSegment(name, t, rows, data, present, split_by_gap=True, metadata=meta, unit="entry"), load


def read_bam(sources: list[Source], side: dict, opts: ReadOptions) -> Recording:
    """Read one or more BAM runs of the same actuator into one Recording (one segment per file, torque enable per sample)."""
    if opts.joint_names is not None and len(opts.joint_names) != 1:
        raise DatasetError(f"BAM logs hold one actuator; give one joint name, not {opts.joint_names}")
    warnings: list[str] = []
    raws: list[RawSegment] = []
    motors: dict[str, str] = {}
    first_load: dict[str, float] | None = None
    joint = opts.joint_names[0] if opts.joint_names else None
    extra_fields: set[str] = set()
    for src in sources:
        fn = src.name
        d = _load(src)
        info = _file_fields(d, fn)
        motor = info.get("motor", "actuator")
        motors[fn] = motor
        note = law_for(info.get("motor"))[1]
        if note is not None and note not in warnings:
            warnings.append(note)
        if joint is None:
            joint = motor
        if len(set(motors.values())) > 1 and not opts.joint_names:
            a, b = list(motors.items())[0], (fn, motor)
            raise DatasetError(
                f"{b[0]}: motor {b[1]!r} but {a[0]} is {a[1]!r}; upload one actuator type per "
                "dataset, or name the joint with --joint-names to treat them as one"
            )
        extra_fields |= set(d["entries"][0]) - KNOWN_ENTRY_FIELDS
        raw, load = _segment(src, d, info, joint)
        first_load = first_load or load
        raws.append(raw)
    present0 = raws[0].present
    for r in raws:
        if r.present != present0:
            raise DatasetError(
                f"{r.name}: entries have {'no ' if not r.present['qd'][0] else ''}'speed' "
                "unlike the other files; upload files with the same fields"
            )
    assert joint is not None
    warnings.append(
        "BAM 'load' is a raw vendor register (PWM or load), not a torque, and eRob 'control' is a "
        "current: the recording has no measured effort"
    )
    if extra_fields:
        warnings.append(f"BAM entry fields {sorted(extra_fields)} are not used")
    rec = assemble(
        [joint],
        raws,
        side,
        sources[0].name if len(sources) == 1 else f"{len(sources)} BAM files",
        warnings,
        drop_short=True,
        joint_defaults={joint: first_load or {}},
    )
    rec.source_format = "bam"
    if len(sources) > 1:
        rec.metadata["source_file"] = [s.name for s in sources]
    return rec


register_reader(
    "bam",
    lambda src, side, opts: read_bam([src], side, opts),
    sniff=lambda _src, head: head_text(head).startswith(("{", "[")),
    binary=False,
    rank=30,
    label="BAM JSON",
)
