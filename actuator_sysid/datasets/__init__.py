"""Datasets: the canonical Recording and the readers/writers that produce it."""

from .canonical import load_sidecar, read_log, read_table, sidecar_for, write_table
from .recording import CHANNELS, DatasetError, JointInfo, Recording, Segment

__all__ = [
    "CHANNELS",
    "DatasetError",
    "JointInfo",
    "Recording",
    "Segment",
    "load_sidecar",
    "read_log",
    "read_table",
    "sidecar_for",
    "write_table",
]
