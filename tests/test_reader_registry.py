"""The log-reader registry (datasets/registry.py): one registration makes a format detected, named, read and
listed in the CLI help, the way docs/architecture.md's "Add a log reader" checklist says."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from conftest import raises_dataset_error

from actuator_sysid.cli import build_parser
from actuator_sysid.datasets import registry
from actuator_sysid.datasets.assemble import TABLE_CHANNELS, RawSegment, assemble
from actuator_sysid.datasets.readers import FORMATS, detect_format, normalize_format, read_upload
from actuator_sysid.datasets.recording import Recording
from actuator_sysid.datasets.sources import ReadOptions, Source, head_text

MAGIC = "#toylog"


def read_toy(src: Source, side: dict, opts: ReadOptions) -> Recording:
    """A toy text format: a '#toylog' line, then 't q q_des' rows of one joint."""
    rows = np.loadtxt(src.read_bytes().decode().splitlines()[1:], ndmin=2)
    present = {ch: [ch in ("q", "q_des")] for ch in TABLE_CHANNELS}
    raw = RawSegment(
        "run", rows[:, 0], np.arange(1, len(rows) + 1), {"q": rows[:, 1:2], "q_des": rows[:, 2:3]}, present
    )
    rec = assemble(["toy_joint"], [raw], side, src.name, [])
    rec.source_format = "toylog"
    return rec


@pytest.fixture
def toy() -> Iterator[registry.LogReader]:
    spec = registry.register_reader(
        "toylog",
        read_toy,
        sniff=lambda _s, head: head_text(head).startswith(MAGIC),
        binary=False,
        rank=65,
        aliases=("toy",),
        label="toy logs",
    )
    yield spec
    registry.unregister_reader("toylog")


def _toy_bytes(n: int = 40) -> bytes:
    t = np.arange(n) / 100.0
    return (
        MAGIC + "\n" + "\n".join(f"{a:.3f} {0.5 * np.sin(a):.6f} {0.6 * np.sin(a):.6f}" for a in t)
    ).encode()


def test_the_shipped_formats_come_from_the_registry() -> None:
    assert (
        FORMATS
        == registry.formats()
        == (
            "csv",
            "parquet",
            "bam",
            "pace",
            "mcap",
            "rosbag",
            "actuator-net",
            "actuator-net-pickle",
            "lerobot",
            "isaaclab-hdf5",
        )
    )
    assert registry.fallback() == "csv"
    assert normalize_format("ROS2") == "rosbag" and normalize_format("canonical") is None


def test_one_registration_is_detected_named_read_and_listed(
    toy: registry.LogReader, capsys: pytest.CaptureFixture[str]
) -> None:
    src = Source("run.toy", data=_toy_bytes())
    assert detect_format(src) == "toylog"
    assert normalize_format("toy") == "toylog"
    rec = read_upload(_toy_bytes(), "run.toy")
    assert rec.joint_names == ["toy_joint"] and rec.source_format == "toylog" and rec.segments[0].n == 40
    named = read_upload(_toy_bytes(), "run.txt", options=ReadOptions(fmt="toylog"))
    assert named.segments[0].q.shape == (40, 1)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["inspect", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert (
        "rosbag, toylog, actuator-net" in helptext
    )  # rank 65: between rosbag and actuator-net and "ROS bag, toy logs, actuator-net CSV" in helptext


def test_a_name_cannot_be_registered_twice(toy: registry.LogReader) -> None:
    with pytest.raises(ValueError, match="toy"):
        registry.register_reader("other", read_toy, sniff=None, binary=False, rank=66, aliases=("toy",))
    with pytest.raises(ValueError, match="rosbag"):
        registry.register_reader("rosbag", read_toy, sniff=None, binary=False, rank=67)


def test_without_it_the_file_is_not_that_format() -> None:
    assert detect_format(Source("run.toy", data=_toy_bytes())) == "csv"
    raises_dataset_error("unknown format 'toylog'", normalize_format, "toylog")
