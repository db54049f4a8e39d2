"""Read a generated isaaclab.py as data: parse it, accept only the shapes our writers produce, never execute it.

The Isaac Lab exports (export/isaaclab.py, export/robot_isaaclab.py) write a docstring, imports of cfg classes
from Isaac Lab and from our consumer package, and top-level assignments of literals, containers and cfg-class
calls with keyword arguments. `load_source` evaluates exactly that tree itself; anything else (another import, a
call of any other name, an attribute, a comprehension, a class or function definition) is an ExportError that
names its line, so no text inside a file, tampered or not, ever runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from .isaaclab import CONSUMER_MODULE
from .selection import ExportError

ISAACLAB_MODULE = "isaaclab.actuators"
ALLOWED_MODULES = (ISAACLAB_MODULE, CONSUMER_MODULE)
"""The only modules an export may import from, and only cfg classes (names ending in Cfg)."""

MAX_SOURCE = 4_000_000
"""Characters a source may have: an export is a few kilobytes."""


def _cfg_class(module: str, name: str) -> type | None:
    """The cfg class `name` of an allowed module (imported here, by us), or None when it has none."""
    if not name.endswith("Cfg"):
        return None
    if module == ISAACLAB_MODULE:
        from isaaclab import actuators as ila

        obj = getattr(ila, name, None)
    else:
        from ..consumers.isaaclab import CFG_CLASSES

        obj = CFG_CLASSES.get(name)
    return obj if isinstance(obj, type) else None


class _Reader:
    """Evaluates the accepted shapes of one source; `classes` are the cfg classes its imports bound."""

    def __init__(self, filename: str, resolve: Callable[[str, str], type | None]) -> None:
        self.filename = filename
        self.resolve = resolve
        self.names: dict[str, Any] = {}
        self.classes: dict[str, type] = {}

    def refuse(self, node: ast.AST, what: str) -> ExportError:
        line = getattr(node, "lineno", "?")
        return ExportError(
            f"{self.filename} line {line}: {what}; an export holds only imports of cfg classes from "
            f"{' or '.join(ALLOWED_MODULES)} and assignments of literal values and cfg-class calls, "
            "and is never run"
        )

    def statement(self, node: ast.stmt, first: bool) -> None:
        if first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                return  # the module docstring
        if isinstance(node, ast.ImportFrom):
            self.import_from(node)
        elif isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise self.refuse(node, "an assignment to anything but one plain name")
            name = node.targets[0].id
            if name in self.classes:
                raise self.refuse(node, f"an assignment to the imported class name {name}")
            self.names[name] = self.value(node.value)
        else:
            raise self.refuse(node, f"a statement of kind {type(node).__name__}")

    def import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or module not in ALLOWED_MODULES:
            raise self.refuse(node, f"an import from {'.' * node.level}{module}")
        for alias in node.names:
            if alias.asname is not None and alias.asname != alias.name:
                raise self.refuse(node, f"an import of {alias.name} under another name")
            cls = self.resolve(module, alias.name)
            if cls is None:
                raise self.refuse(node, f"{alias.name} is not a cfg class of {module}")
            self.classes[alias.name] = cls

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            if node.value is None or isinstance(node.value, (bool, int, float, str)):
                return node.value
            raise self.refuse(node, f"a {type(node.value).__name__} constant")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(node.operand)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v if isinstance(node.op, ast.USub) else v
            raise self.refuse(node, "a sign before something that is not a number")
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.refuse(node, "a ** inside a dict")
            pairs = [(self.value(k), self.value(v)) for k, v in zip(node.keys, node.values, strict=True)]  # type: ignore[arg-type]
            try:
                return dict(pairs)
            except TypeError:
                raise self.refuse(node, "a dict key that cannot be a key (a list or a dict)") from None
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.refuse(node, f"an expression of kind {type(node).__name__}")

    def call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.func.id not in self.classes:
            shown = ast.unparse(node.func)
            shown = shown if len(shown) <= 60 else shown[:59] + "…"
            raise self.refuse(node, f"a call of {shown}, which is not an imported cfg class")
        if node.args or any(k.arg is None for k in node.keywords):
            raise self.refuse(node, f"a call of {node.func.id} with positional or ** arguments")
        kwargs = {str(k.arg): self.value(k.value) for k in node.keywords}
        try:
            return self.classes[node.func.id](**kwargs)
        except (TypeError, ValueError) as e:
            raise self.refuse(node, f"{node.func.id} refuses its arguments ({e})") from None


def load_source(
    text: str, filename: str = "isaaclab.py", resolve: Callable[[str, str], type | None] | None = None
) -> dict[str, Any]:
    """The names an export source binds ({name: value}, imported classes included), evaluated from its syntax
    tree without running it; `resolve(module, name)` gives the class an import binds (default: the real Isaac
    Lab and consumer-package cfg classes). ExportError names the line of anything else."""
    if len(text) > MAX_SOURCE:
        raise ExportError(f"{filename}: {len(text)} characters, over the {MAX_SOURCE} an export may have")
    try:
        tree = ast.parse(text, filename=filename, mode="exec")
    except SyntaxError as e:
        raise ExportError(f"{filename} line {e.lineno}: not valid Python ({e.msg})") from None
    except (RecursionError, MemoryError):
        raise ExportError(f"{filename}: nested too deeply to read") from None
    reader = _Reader(filename, resolve or _cfg_class)
    try:
        for i, node in enumerate(tree.body):
            reader.statement(node, first=i == 0)
    except RecursionError:
        raise ExportError(f"{filename}: nested too deeply to read") from None
    return {**reader.classes, **reader.names}
