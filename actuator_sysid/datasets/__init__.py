"""Datasets: the canonical Recording, the readers that produce it from every log format, its data-quality
report, and excitation design."""

from .canonical import load_sidecar, sidecar_for, write_table
from .quality import quality_report
from .readers import FORMATS, read_log, read_paths, read_table, read_upload
from .recording import CHANNELS, DatasetError, JointInfo, Recording, Segment
from .sources import ReadOptions

__all__ = [
    "CHANNELS",
    "FORMATS",
    "DatasetError",
    "JointInfo",
    "ReadOptions",
    "Recording",
    "Segment",
    "load_sidecar",
    "quality_report",
    "read_log",
    "read_paths",
    "read_table",
    "read_upload",
    "sidecar_for",
    "write_table",
]
