"""ROS bags (docs/log-formats.md §4): MCAP (ROS 2), ROS 2 sqlite3 and ROS 1 bags, read without a ROS install.

MCAP is streamed chunk by chunk with ``mcap`` and decoded with the schema stored in the file
(``mcap-ros2-support``); sqlite3 and ROS 1 bags go through ``rosbags``. The measured state is a
``sensor_msgs/JointState`` topic; commands are a second JointState (``position`` → q_des, ``velocity`` →
qd_des, ``effort`` → tau_ff), a ``trajectory_msgs/JointTrajectory`` (its first point, at header stamp +
time_from_start) or a ``std_msgs/Float64MultiArray`` (no names: the user gives them). Topics are found by
type, and by name when there are several (a command topic's name says command, cmd, target, desired,
goal or reference); ``state_topic`` / ``command_topic`` choose them explicitly.

Messages are timed by ``header.stamp`` (the log time when a topic leaves stamps at zero, or has no
header) and matched by joint name, so joints may come in any order, in separate messages, or appear late;
empty ``position`` / ``velocity`` / ``effort`` arrays mean "not measured". Messages are sorted by stamp.
Each joint's samples are interpolated onto the state topic's message times; times where a joint or the
command has no sample within 5 periods are dropped, which splits segments at gaps. Values are collected
straight into preallocated float64 arrays (sized from the file's message counts), so memory stays close
to the size of the decoded recording whatever the size of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .assemble import GAP_PERIODS, TABLE_CHANNELS, RawSegment, assemble
from .recording import DatasetError, Recording
from .registry import register_reader
from .sources import ReadOptions, Source

MCAP_MAGIC = b"\x89MCAP0\r\n"
ROS1_MAGIC = b"#ROSBAG V2.0"
SQLITE_MAGIC = b"SQLite format 3\x00"
JOINT_STATE = "sensor_msgs/JointState"
TRAJECTORY = "trajectory_msgs/JointTrajectory"
MULTI_ARRAY = "std_msgs/Float64MultiArray"
COMMAND_TYPES = (JOINT_STATE, TRAJECTORY, MULTI_ARRAY)
COMMAND_NAME = re.compile(r"command|cmd|target|desired|goal|reference|_ref\b|/ref\b", re.IGNORECASE)
FIELDS = ("position", "velocity", "effort")
MIN_CHANNEL_COVERAGE = 0.9
"""A velocity/effort channel is used only when at least this fraction of kept samples has it."""


def _norm_type(t: str) -> str:
    """ "sensor_msgs/msg/JointState" and "sensor_msgs/JointState" -> "sensor_msgs/JointState"."""
    return t.replace("/msg/", "/")


@dataclass
class Topic:
    name: str
    msgtype: str
    count: int | None  # message count when the file says it


@dataclass
class _Series:
    """Samples of one topic: stamps plus (n, J) arrays per field, columns added as joints appear (NaN = none)."""

    topic: str
    capacity: int
    t: np.ndarray = field(init=False)
    index: np.ndarray = field(init=False)
    values: dict[str, np.ndarray | None] = field(init=False)  # a field's array exists once it has data
    columns: dict[str, int] = field(default_factory=dict)
    n: int = 0
    first_seen: dict[str, int] = field(default_factory=dict)
    dropped: int = 0
    zero_stamps: int = 0
    _cache: dict[tuple, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cap = max(self.capacity, 16)
        self.t = np.empty(cap)
        self.index = np.empty(cap, dtype=np.int64)
        self.values: dict[str, np.ndarray | None] = dict.fromkeys(FIELDS)

    def _cols(self, names: tuple) -> np.ndarray:
        cols = self._cache.get(names)
        if cols is None:
            new = [n for n in names if n not in self.columns]
            if new:
                for n in new:
                    self.columns[n] = len(self.columns)
                    self.first_seen[n] = self.n
                grow = len(new)
                self.values = {
                    f: None if v is None else np.concatenate([v, np.full((v.shape[0], grow), np.nan)], axis=1)
                    for f, v in self.values.items()
                }
            cols = np.array([self.columns[n] for n in names], dtype=np.intp)
            self._cache[names] = cols
        return cols

    def add(self, t: float, index: int, names: tuple, arrays: dict[str, Any], where: str) -> None:
        if self.n == self.t.shape[0]:
            cap = 2 * self.n
            self.t = np.resize(self.t, cap)
            self.index = np.resize(self.index, cap)
            self.values = {
                f: None if v is None else np.concatenate([v, np.full((cap - v.shape[0], v.shape[1]), np.nan)])
                for f, v in self.values.items()
            }
        cols = self._cols(names)
        i = self.n
        self.t[i] = t
        self.index[i] = index
        for f, a in arrays.items():
            if a is None or len(a) == 0:
                continue
            if len(a) != len(names):
                raise DatasetError(
                    f"{where}: {len(names)} joint names but {len(a)} {f} values; each of name, "
                    f"position, velocity, effort must be empty or as long as name"
                )
            buf = self.values[f]
            if buf is None:
                buf = self.values[f] = np.full((self.t.shape[0], len(self.columns)), np.nan)
            buf[i, cols] = a
        self.n += 1

    def finish(self) -> None:
        """Trim to the samples read and sort by stamp (messages can be logged out of order)."""
        n = self.n
        self.t, self.index = self.t[:n], self.index[:n]
        self.values = {f: None if v is None else v[:n] for f, v in self.values.items()}
        if n > 1 and (np.diff(self.t) < 0).any():
            order = np.argsort(self.t, kind="stable")
            self.t, self.index = self.t[order], self.index[order]
            for f, v in self.values.items():  # one field at a time: one extra copy at most
                self.values[f] = None if v is None else v[order]
            self.out_of_order = True
        else:
            self.out_of_order = False

    def joint(self, name: str, f: str) -> tuple[np.ndarray, np.ndarray]:
        """(stamps, values) of one joint's valid samples of one field."""
        values = self.values[f]
        if values is None:
            return self.t[:0], self.t[:0]
        v = values[:, self.columns[name]]
        ok = ~np.isnan(v)
        return (self.t, v) if ok.all() else (self.t[ok], v[ok])


# --------------------------------------------------------------------------------------------- backends


class _Bag:
    """A bag opened for reading: topics, then messages of chosen topics as (topic, log time ns, index, msg)."""

    topics: dict[str, Topic]

    def messages(self, topics: list[str]) -> Iterator[tuple[str, int, int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _McapBag(_Bag):
    def __init__(self, src: Source) -> None:
        from mcap.exceptions import McapError
        from mcap.reader import make_reader

        self.src = src
        self.stream = src.open()
        self._McapError = McapError
        try:
            self.reader = make_reader(self.stream)
            summary = self.reader.get_summary()
        except (McapError, ValueError, EOFError, OSError) as e:
            self.stream.close()
            raise DatasetError(f"{src.name}: cannot read the MCAP file ({e}); is it complete?") from None
        self.topics = {}
        self.channel_schema: dict[int, Any] = {}
        if summary is None:  # no summary section (an unfinished recording): scan once for the channels
            self._scan()
            return
        counts = summary.statistics.channel_message_counts if summary.statistics else {}
        for cid, ch in summary.channels.items():
            schema = summary.schemas.get(ch.schema_id)
            self.channel_schema[cid] = (ch, schema)
            if schema is None:
                continue
            prev = self.topics.get(ch.topic)
            c = counts.get(cid)
            self.topics[ch.topic] = Topic(
                ch.topic, _norm_type(schema.name), None if c is None else c + (prev.count or 0 if prev else 0)
            )

    def _scan(self) -> None:
        from mcap.reader import NonSeekingReader

        self.stream.seek(0)
        counts: dict[str, int] = {}
        try:
            for schema, ch, _msg in NonSeekingReader(self.stream).iter_messages(log_time_order=False):
                self.channel_schema[ch.id] = (ch, schema)
                if schema is not None:
                    counts[ch.topic] = counts.get(ch.topic, 0) + 1
                    self.topics[ch.topic] = Topic(ch.topic, _norm_type(schema.name), None)
        except (self._McapError, ValueError, EOFError) as e:
            if not self.topics:
                raise DatasetError(f"{self.src.name}: cannot read the MCAP file ({e})") from None
        for name, c in counts.items():
            self.topics[name].count = c
        self.stream.seek(0)
        from mcap.reader import make_reader

        self.reader = make_reader(self.stream)

    def messages(self, topics: list[str]) -> Iterator[tuple[str, int, int, Any]]:
        decoders: dict[int, Any] = {}
        counters = dict.fromkeys(topics, 0)
        from mcap.reader import NonSeekingReader

        # File order, one chunk at a time: the seeking reader's file-order mode loads every chunk before it
        # yields the first message, and its log-time mode keeps a heap; the stream reader keeps one chunk.
        self.stream.seek(0)
        try:
            for schema, channel, message in NonSeekingReader(self.stream).iter_messages(
                topics=topics, log_time_order=False
            ):
                dec = decoders.get(channel.id)
                if dec is None:
                    dec = decoders[channel.id] = _decoder(channel, schema, self.src.name)
                k = counters[channel.topic]
                counters[channel.topic] = k + 1
                try:
                    msg = dec(message.data)
                except Exception as e:  # noqa: BLE001 - any decoding failure is bad input
                    raise DatasetError(
                        f"{self.src.name}, topic {channel.topic}, message {k}: cannot decode as "
                        f"{schema.name if schema else '?'} ({type(e).__name__}: {e})"
                    ) from None
                yield channel.topic, message.log_time, k, msg
        except self._McapError as e:
            raise DatasetError(
                f"{self.src.name}: the MCAP file is damaged ({e}); messages after the damage cannot be read"
            ) from None

    def close(self) -> None:
        self.stream.close()


def _decoder(channel: Any, schema: Any, filename: str) -> Any:
    """A CDR decoder built from the message definition stored in the MCAP file.

    rosbags' generated deserializer (about twice as fast as mcap-ros2-support's, and it returns numpy
    arrays) from the schema text; mcap-ros2-support's decoder when rosbags cannot parse the definition.
    """
    if channel.message_encoding != "cdr" or schema is None or schema.encoding != "ros2msg":
        from mcap_ros2.decoder import DecoderFactory

        dec = DecoderFactory().decoder_for(channel.message_encoding, schema)
        if dec is None:
            raise DatasetError(
                f"{filename}, topic {channel.topic}: messages are {channel.message_encoding!r} "
                f"with a {getattr(schema, 'encoding', 'missing')!r} schema, not ROS 2 CDR; cannot "
                "decode them"
            )
        return dec
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    def full(name: str) -> str:
        return name if "/msg/" in name else name.replace("/", "/msg/", 1)

    try:
        text = schema.data.decode()
        parts = re.split(r"^=+\s*$\n", text, flags=re.MULTILINE)
        types = get_types_from_msg(parts[0], full(schema.name))
        for part in parts[1:]:
            head, _, body = part.partition("\n")
            types.update(get_types_from_msg(body, full(head.replace("MSG:", "").strip())))
        store = get_typestore(Stores.EMPTY)
        store.register(types)
        name = full(schema.name)
        return lambda data: store.deserialize_cdr(data, name)
    except Exception:  # noqa: BLE001 - an unusual definition: the generic decoder handles it
        from mcap_ros2.decoder import DecoderFactory

        return DecoderFactory().decoder_for(channel.message_encoding, schema)


class _RosbagsBag(_Bag):
    """ROS 1 .bag and ROS 2 sqlite3 (.db3) bags through rosbags (its default ROS 2 types for old bags)."""

    def __init__(self, src: Source, suffix: str) -> None:
        from rosbags.highlevel import AnyReader, AnyReaderError
        from rosbags.typesys import Stores, get_typestore

        self.src = src
        self._ctx = src.local_path(suffix)
        path = self._ctx.__enter__()
        try:
            self.reader = AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
            self.reader.open()
        except (AnyReaderError, OSError, ValueError, KeyError) as e:
            self._ctx.__exit__(None, None, None)
            raise DatasetError(f"{src.name}: cannot read the bag ({e})") from None
        self.topics = {}
        for c in self.reader.connections:
            prev = self.topics.get(c.topic)
            self.topics[c.topic] = Topic(
                c.topic, _norm_type(c.msgtype), c.msgcount + (prev.count or 0 if prev else 0)
            )

    def messages(self, topics: list[str]) -> Iterator[tuple[str, int, int, Any]]:
        conns = [c for c in self.reader.connections if c.topic in topics]
        counters = dict.fromkeys(topics, 0)
        for conn, timestamp, raw in self.reader.messages(connections=conns):
            k = counters[conn.topic]
            counters[conn.topic] = k + 1
            try:
                msg = self.reader.deserialize(raw, conn.msgtype)
            except Exception as e:  # noqa: BLE001 - any decoding failure is bad input
                raise DatasetError(
                    f"{self.src.name}, topic {conn.topic}, message {k}: cannot decode as "
                    f"{conn.msgtype} ({type(e).__name__}: {e})"
                ) from None
            yield conn.topic, timestamp, k, msg

    def close(self) -> None:
        self.reader.close()
        self._ctx.__exit__(None, None, None)


def open_bag(src: Source, kind: str) -> _Bag:
    if kind == "mcap":
        return _McapBag(src)
    head = src.head(16)
    return _RosbagsBag(src, ".bag" if head.startswith(ROS1_MAGIC) else ".db3")


# --------------------------------------------------------------------------------------------- topics


def _choose(topics: dict[str, Topic], opts: ReadOptions, fn: str) -> tuple[Topic, Topic]:
    listing = ", ".join(f"{t.name} ({t.msgtype})" for t in topics.values()) or "none"
    for given in (opts.state_topic, opts.command_topic):
        if given is not None and given not in topics:
            raise DatasetError(f"{fn}: no topic {given!r}; the bag has {listing}")
    js = [t for t in topics.values() if t.msgtype == JOINT_STATE]
    if opts.state_topic:
        state = topics[opts.state_topic]
        if state.msgtype != JOINT_STATE:
            raise DatasetError(f"{fn}: state topic {state.name} is {state.msgtype}, not {JOINT_STATE}")
    else:
        cands = [t for t in js if not COMMAND_NAME.search(t.name) and t.name != opts.command_topic]
        if len(cands) != 1:
            why = "no" if not cands else f"{len(cands)}"
            raise DatasetError(
                f"{fn}: {why} candidate state topics (sensor_msgs/JointState not named like a "
                f"command); name it with --state-topic (topics: {listing})"
            )
        state = cands[0]
    if opts.command_topic:
        cmd = topics[opts.command_topic]
        if cmd.msgtype not in COMMAND_TYPES:
            raise DatasetError(
                f"{fn}: command topic {cmd.name} is {cmd.msgtype}; use one of {list(COMMAND_TYPES)}"
            )
    else:
        cands = [
            t
            for t in topics.values()
            if t.name != state.name
            and t.msgtype in COMMAND_TYPES
            and (t.msgtype != JOINT_STATE or COMMAND_NAME.search(t.name))
        ]
        named = [t for t in cands if COMMAND_NAME.search(t.name)]
        cands = named if len(named) == 1 else cands
        if len(cands) != 1:
            why = "no" if not cands else f"{len(cands)}"
            raise DatasetError(
                f"{fn}: {why} candidate command topics (JointState named like a command, "
                f"JointTrajectory or Float64MultiArray); name it with --command-topic "
                f"(topics: {listing})"
            )
        cmd = cands[0]
    return state, cmd


def _stamp(msg: Any) -> tuple[int, int]:
    """(sec, nanosec) of a message's header stamp; (0, 0) without a header."""
    h = getattr(msg, "header", None)
    if h is None:
        return 0, 0
    s = h.stamp
    return int(s.sec), int(getattr(s, "nanosec", getattr(s, "nsec", 0)))


def _duration(d: Any) -> float:
    return float(d.sec) + 1e-9 * float(getattr(d, "nanosec", getattr(d, "nsec", 0)))


# --------------------------------------------------------------------------------------------- reading


def read_ros(src: Source, side: dict, opts: ReadOptions, kind: str) -> Recording:
    """Read a bag into a Recording: state and command topics merged by stamp onto the state's times."""
    fn = src.name
    bag = open_bag(src, kind)
    try:
        state_t, cmd_t = _choose(bag.topics, opts, fn)
        state = _Series(state_t.name, state_t.count or 1024)
        cmd = _Series(cmd_t.name, cmd_t.count or 1024)
        if cmd_t.msgtype == MULTI_ARRAY and opts.joint_names is None:
            raise DatasetError(
                f"{fn}: command topic {cmd_t.name} is a Float64MultiArray, which carries no joint "
                "names; give them in the array's order with --joint-names a,b,c"
            )
        use_log: dict[str, bool | None] = {state_t.name: None, cmd_t.name: None}
        origin: int | None = None  # whole seconds subtracted from every time, so float64 keeps nanoseconds
        for topic, log_ns, k, msg in bag.messages([state_t.name, cmd_t.name]):
            where = f"{fn}, topic {topic}, message {k}"
            series = state if topic == state_t.name else cmd
            mtype = state_t.msgtype if topic == state_t.name else cmd_t.msgtype
            sec, nsec = _stamp(msg)
            if use_log[topic] is None:
                use_log[topic] = sec == 0 and nsec == 0
            if use_log[topic]:
                sec, nsec = divmod(int(log_ns), 10**9)
            if origin is None:
                origin = sec
            t = float(sec - origin) + 1e-9 * nsec
            if mtype == JOINT_STATE:
                names = tuple(msg.name)
                arrays = {f: getattr(msg, f) for f in FIELDS}
                if not names:
                    if any(len(a) for a in arrays.values()):
                        raise DatasetError(f"{where}: values but no joint names; JointState needs name[]")
                    series.dropped += 1
                    continue
            elif mtype == TRAJECTORY:
                names = tuple(msg.joint_names)
                if len(msg.points) == 0:
                    series.dropped += 1
                    continue
                p = msg.points[0]
                t += _duration(p.time_from_start)
                arrays = {"position": p.positions, "velocity": p.velocities, "effort": p.effort}
            else:
                assert opts.joint_names is not None
                data = msg.data
                if len(data) != len(opts.joint_names):
                    raise DatasetError(
                        f"{where}: {len(data)} values but {len(opts.joint_names)} joint names were "
                        f"given ({', '.join(opts.joint_names)})"
                    )
                names = tuple(opts.joint_names)
                arrays = {"position": data}
            series.add(t, k, names, arrays, where)
    finally:
        bag.close()
    rec = _merge(state, cmd, use_log, side, opts, fn, kind)
    rec.metadata["time_origin_s"] += origin or 0
    return rec


def _paired_joints(
    state: _Series, cmd: _Series, use_log: dict, opts: ReadOptions, fn: str, warnings: list[str]
) -> list[str]:
    """Finish both series (warning on re-sorted or log-timed topics) and return the joints on both, in the
    state's (or the requested) order; joints without a command are left out with a warning."""
    for s in (state, cmd):
        if s.n == 0:
            raise DatasetError(f"{fn}: topic {s.topic} has no usable messages")
        s.finish()
        if s.out_of_order:
            warnings.append(f"{fn}: messages on {s.topic} were not in stamp order; sorted by stamp")
        if use_log.get(s.topic):
            warnings.append(f"{fn}: {s.topic} has no header stamps; timed by the bag's log time")
    if opts.joint_names is not None and cmd.topic and set(opts.joint_names) - set(state.columns):
        missing = sorted(set(opts.joint_names) - set(state.columns))
        raise DatasetError(
            f"{fn}: joint(s) {missing} are not on {state.topic} (it has {list(state.columns)})"
        )
    joints = [j for j in (opts.joint_names or list(state.columns)) if j in cmd.columns]
    lost = [j for j in (opts.joint_names or list(state.columns)) if j not in cmd.columns]
    if not joints:
        raise DatasetError(
            f"{fn}: no joint is on both {state.topic} ({list(state.columns)}) and {cmd.topic} "
            f"({list(cmd.columns)}); joints are matched by name"
        )
    if lost:
        warnings.append(f"{fn}: joint(s) {lost} have no command on {cmd.topic} and were left out")
    return joints


@dataclass
class _Grid:
    """The state topic's unique message times, onto which every joint's fields are resampled."""

    t: np.ndarray
    rows: np.ndarray  # the state message each grid time comes from
    step: float  # median grid period (s)
    unique: bool  # the state's stamps were already unique: its own arrays can be used as they are
    state: _Series
    joints: list[str]

    @classmethod
    def of(cls, state: _Series, joints: list[str]) -> _Grid:
        """Unique state times (several messages may share a stamp when joints are published separately)."""
        t_all = state.t
        keep = np.ones(t_all.size, dtype=bool)
        if t_all.size > 1:
            keep[1:] = np.diff(t_all) > 0
        unique = bool(keep.all())
        grid = t_all if unique else t_all[keep]
        rows = state.index if unique else state.index[keep]
        step = float(np.median(np.diff(grid))) if grid.size > 1 else 0.0
        return cls(grid, rows, step, unique, state, joints)

    def onto(self, series: _Series, name: str, f: str, ok: np.ndarray | None) -> np.ndarray | None:
        """One joint's field on the grid; marks grid times it does not cover in `ok` (when given)."""
        ts, vs = series.joint(name, f)
        if ts.size == 0:
            return None
        if ok is not None:
            own = float(np.median(np.diff(ts))) if ts.size > 1 else self.step
            limit = GAP_PERIODS * max(self.step, own)
            ok &= (self.t >= ts[0] - 1e-9) & (self.t <= ts[-1] + 1e-9)
            for g in np.flatnonzero(np.diff(ts) > limit):
                ok &= ~((self.t > ts[g]) & (self.t < ts[g + 1]))
        return np.interp(self.t, ts, vs)

    def whole(self, series: _Series, f: str) -> np.ndarray | None:
        """The state's own (n, J) array when it already is the answer: every joint, every time, in order."""
        v = series.values[f]
        if (
            v is not None
            and series is self.state
            and self.unique
            and list(self.state.columns) == self.joints
            and not np.isnan(v).any()
        ):
            return v
        return None

    def channel(self, series: _Series, f: str, ok: np.ndarray | None) -> np.ndarray | None:
        """A field of every joint on the grid, (n, J); None when some joint never has it."""
        direct = self.whole(series, f)
        if direct is not None:
            return direct
        out = np.empty((self.t.size, len(self.joints)))
        for j, name in enumerate(self.joints):
            col = self.onto(series, name, f, ok)
            if col is None:
                return None
            out[:, j] = col
        return out


def _positions(
    grid: _Grid, state: _Series, cmd: _Series, valid: np.ndarray, fn: str
) -> dict[str, np.ndarray]:
    """q and q_des on the grid (required: every joint needs a position on both topics); marks uncovered times."""
    data: dict[str, np.ndarray] = {}
    for ch, series in (("q", state), ("q_des", cmd)):
        arr = grid.channel(series, "position", valid)
        if arr is None:
            name = next(n for n in grid.joints if series.joint(n, "position")[0].size == 0)
            raise DatasetError(f"{fn}: joint '{name}' has no position on {series.topic}")
        data[ch] = arr
        if series is cmd:
            cmd.values["position"] = None  # resampled onto the grid: the raw samples can go
    return data


def _optional_channels(
    grid: _Grid, state: _Series, cmd: _Series, data: dict[str, np.ndarray], fn: str, warnings: list[str]
) -> None:
    """qd, tau, qd_des, tau_ff into `data` when nearly every message has them for every joint, else a warning."""
    optional = (
        ("qd", state, "velocity"),
        ("tau", state, "effort"),
        ("qd_des", cmd, "velocity"),
        ("tau_ff", cmd, "effort"),
    )
    for ch, series, f in optional:
        counts = [series.joint(n, f)[0].size for n in grid.joints]
        if min(counts) >= MIN_CHANNEL_COVERAGE * series.n:
            arr = grid.channel(series, f, None)
            if arr is not None:
                data[ch] = arr
            if series is cmd:
                cmd.values[f] = None
        elif max(counts) > 0:
            warnings.append(
                f"{fn}: {f} on {series.topic} is missing for most messages or some joints; not used"
            )


def _merge(
    state: _Series, cmd: _Series, use_log: dict, side: dict, opts: ReadOptions, fn: str, kind: str
) -> Recording:
    """State and command series -> one RawSegment on the state's times -> assemble."""
    warnings: list[str] = []
    joints = _paired_joints(state, cmd, use_log, opts, fn, warnings)
    grid = _Grid.of(state, joints)
    valid = np.ones(grid.t.size, dtype=bool)
    data = _positions(grid, state, cmd, valid, fn)
    late = {n: state.first_seen[n] for n in joints if state.first_seen.get(n, 0) > 0}
    if late:
        warnings.append(
            f"{fn}: joint(s) {sorted(late)} first appear on {state.topic} at message(s) "
            f"{sorted(late.values())}; earlier times were dropped"
        )
    _optional_channels(grid, state, cmd, data, fn, warnings)
    for s in (state, cmd):
        s.values = {}
    dropped = int(grid.t.size - valid.sum())
    if not valid.any():
        raise DatasetError(
            f"{fn}: {state.topic} and {cmd.topic} do not overlap in time with every joint present; "
            "no sample has both a measurement and a command"
        )
    times, rows = grid.t, grid.rows
    t0 = float(times[valid][0])
    if dropped:
        data = {ch: v[valid] for ch, v in data.items()}
        times, rows = times[valid], rows[valid]
        warnings.append(
            f"{fn}: {dropped} of {valid.size} state times were dropped (no command or no position "
            "for some joint within 5 periods: late joints, gaps, or empty arrays)"
        )
    present = {ch: [ch in data] * len(joints) for ch in TABLE_CHANNELS}
    raw = RawSegment("", times - t0, rows, data, present, split_by_gap=True, unit="message", dropped=dropped)
    rec = assemble(joints, [raw], side, fn, warnings, drop_short=True)
    rec.source_format = "mcap" if kind == "mcap" else "rosbag"
    rec.metadata.update(
        {
            "state_topic": state.topic,
            "command_topic": cmd.topic,
            "time_origin_s": t0,
            "empty_messages_dropped": state.dropped + cmd.dropped,
        }
    )
    return rec


register_reader(
    "mcap",
    lambda src, side, opts: read_ros(src, side, opts, "mcap"),
    sniff=lambda _src, head: head.startswith(MCAP_MAGIC),
    binary=True,
    rank=50,
    label="MCAP",
)
register_reader(
    "rosbag",
    lambda src, side, opts: read_ros(src, side, opts, "rosbag"),
    sniff=lambda _src, head: head.startswith((ROS1_MAGIC, SQLITE_MAGIC)),
    binary=True,
    rank=60,
    aliases=("bag", "db3", "ros1", "ros2"),
    label="ROS bag",
)
