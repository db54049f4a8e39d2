"""Structure check (issue 13): functions over 100 lines and import cycles between `actuator_sysid` modules.

What it measures, on the source alone (AST, nothing is imported):

- a function's length is the span of its `def` statement, from the `def` line to its last line (decorators
  not counted); nested functions and methods are measured on their own, named `outer.inner` / `Class.method`;
- the import graph has one node per module of the package and an edge for every `import` / `from … import`
  of another package module **anywhere in the file, function-level imports included** (only imports under
  `if TYPE_CHECKING:` are left out: they never run); `from pkg import name` points at `pkg.name` when that is
  a module, else at `pkg`. The implicit import of a parent package's `__init__` is not an edge. A cycle is a strongly connected component of two or more modules (Tarjan).

Allowed without a baseline: the fused Warp kernel `actuator_sysid/models/kernels.py:rollout_kernel`, which
mirrors the consumer maths line by line and is kept whole on purpose.

Modes:

- `python tools/check_structure.py` prints every violation and exits 1 if there is any.
- `python tools/check_structure.py --baseline tools/structure_baseline.txt` (what `make lint` runs) still
  prints every violation, but **fails only on violations that the baseline does not list**: a long function
  not in it, or a cycle that is not inside one of its cycles. The baseline records the tree as it was when
  the check was introduced and must only shrink: fix an entry, delete its line; never add one. Entries that
  no longer occur are reported as fixed (remove them) without failing.
- `--write-baseline FILE` writes today's violations as a baseline (only for introducing the check).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 100
ALLOWED = {"actuator_sysid/models/kernels.py:rollout_kernel"}


@dataclass(frozen=True)
class LongFunction:
    """A function whose def spans more than MAX_LINES lines."""

    where: str  # "actuator_sysid/x.py:Class.method"
    lines: int

    def key(self) -> str:
        """The baseline line for this violation (no length: editing the function keeps its key)."""
        return f"function {self.where}"


def module_name(path: Path, src_root: Path) -> str:
    """Dotted module name of a file under src_root (a package's __init__ is the package)."""
    parts = list(path.relative_to(src_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    src_root = package_dir.parent
    return {module_name(p, src_root): p for p in sorted(package_dir.rglob("*.py"))}


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, node
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def long_functions(files: dict[str, Path], rel_root: Path) -> list[LongFunction]:
    """Functions longer than MAX_LINES, allow-list excluded, in file order."""
    out = []
    for path in files.values():
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(rel_root).as_posix()
        for name, node in _functions(tree):
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            where = f"{rel}:{name}"
            if span > MAX_LINES and where not in ALLOWED:
                out.append(LongFunction(where, span))
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Absolute name of a (possibly relative) import target seen in `module`."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` / `if typing.TYPE_CHECKING:`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, function bodies included, except what sits under `if TYPE_CHECKING:` (never imported)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module → package modules it imports anywhere in its file (function-level imports included)."""
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # `import a.b.c` of a non-module attribute path
                    t = t.rpartition(".")[0]
                if t and t != module:
                    graph[module].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def cycle_key(component: list[str]) -> str:
    """The baseline line for one cycle."""
    return "cycle " + " ".join(component)


def read_baseline(path: Path) -> tuple[set[str], list[set[str]]]:
    """(function keys, cycle member sets) listed in a baseline file; '#' starts a comment."""
    functions: set[str] = set()
    cyc: list[set[str]] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("function "):
            functions.add(line)
        elif line.startswith("cycle "):
            cyc.append(set(line.split()[1:]))
    return functions, cyc


def check(package_dir: Path, baseline: Path | None, out=sys.stdout) -> int:
    """Print every violation; return the number that fail (all, or those the baseline does not list)."""
    files = package_files(package_dir)
    longs = long_functions(files, package_dir.parent)
    comps = cycles(import_graph(files))
    base_f, base_c = read_baseline(baseline) if baseline else (set(), [])
    new = 0
    print(f"functions over {MAX_LINES} lines: {len(longs)}", file=out)
    for f in longs:
        known = baseline is not None and f.key() in base_f
        new += not known
        print(f"  {'baseline' if known else 'NEW':8s} {f.where} ({f.lines} lines)", file=out)
    print(f"import cycles (function-level imports counted): {len(comps)}", file=out)
    for c in comps:
        known = baseline is not None and any(set(c) <= b for b in base_c)
        new += not known
        print(f"  {'baseline' if known else 'NEW':8s} {' <-> '.join(c)}", file=out)
    if baseline is not None:
        now_f = {f.key() for f in longs}
        fixed = sorted(k for k in base_f if k not in now_f)
        fixed += sorted(cycle_key(sorted(b)) for b in base_c if not any(set(c) & b for c in comps))
        for k in fixed:
            print(f"  fixed    {k} (delete this line from {baseline.name})", file=out)
    if new:
        print(
            f"{new} violation(s) {'not in the baseline' if baseline else ''}: split the function "
            f"(≤ {MAX_LINES} lines) or break the cycle (move the shared code down a layer)",
            file=out,
        )
    return new


def write_baseline(package_dir: Path, path: Path) -> None:
    """Write today's violations as a baseline file."""
    files = package_files(package_dir)
    lines = [
        "# tools/check_structure.py baseline: violations when the check was introduced (issue 13).",
        "# This list must only shrink: fix one, delete its line; never add a line.",
    ]
    lines += [f.key() for f in long_functions(files, package_dir.parent)]
    lines += [cycle_key(c) for c in cycles(import_graph(files))]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """CLI entry: exit 1 when a (new) violation is found."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--package", type=Path, default=ROOT / "actuator_sysid", help="package directory to check"
    )
    ap.add_argument("--baseline", type=Path, help="fail only on violations this file does not list")
    ap.add_argument("--write-baseline", type=Path, help="write today's violations to this file and exit")
    args = ap.parse_args(argv)
    if args.write_baseline:
        write_baseline(args.package, args.write_baseline)
        return 0
    return 1 if check(args.package, args.baseline) else 0


if __name__ == "__main__":
    sys.exit(main())
