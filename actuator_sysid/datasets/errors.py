"""The user-input error every reader, check and fit raises, and how its messages name a place in a file; its own
module so the name rule, the readers, the quality report and the recording all use it without importing each
other."""

DATA_ROW = "data row"
"""The unit of a record in a table without lines (Parquet, LeRobot): counted from 1, header-free."""


class DatasetError(ValueError):
    """A problem with user-supplied data; the message says what, where and how to fix it."""


def cite(unit: str, first: int, last: int | None = None) -> str:
    """A place in a file as messages name it: "line 139" (a text table's own line, header and blank lines
    counted, as an editor shows it), "entry 12", a range "lines 20–29", or "data row 138 (0-based 137)" for a
    record of a table that has no lines, so neither base is guessed."""
    if unit == DATA_ROW:
        if last is None:
            return f"data row {first} (0-based {first - 1})"
        return f"data rows {first}–{last} (0-based {first - 1}–{last - 1})"
    return f"{unit} {first}" if last is None else f"{unit}s {first}–{last}"
