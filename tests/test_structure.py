"""tools/check_structure.py: the tree has no new long function or import cycle, and the check catches both."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import check_structure as cs  # noqa: E402

BASELINE = ROOT / "tools" / "structure_baseline.txt"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A throwaway package `pkg` under tmp_path with the given module sources."""
    pkg = tmp_path / "pkg"
    for rel, src in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(textwrap.dedent(src))
    return pkg


def _function(name: str, body_lines: int) -> str:
    """Source of a function whose def spans 1 + body_lines lines."""
    return f"def {name}():\n" + "".join(f"    x{i} = {i}\n" for i in range(body_lines))


def test_the_tree_has_no_violation_beyond_the_baseline() -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_structure.py"), "--baseline", str(BASELINE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "NEW" not in r.stdout


def test_a_function_over_100_lines_fails_and_100_passes(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "a.py": _function("ok", 99)
            + "\n\nclass C:\n"
            + textwrap.indent(_function("too_long", 100), "    ")
        },
    )
    out = io.StringIO()
    assert cs.check(pkg, None, out) == 1
    assert "pkg/a.py:C.too_long (101 lines)" in out.getvalue() and "pkg/a.py:ok" not in out.getvalue()


def test_a_cycle_through_a_function_level_import_fails(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "sub/__init__.py": "",
            "sub/x.py": "from ..y import f\n",
            "y.py": "def f():\n    from .sub import x\n    return x\n",
            "z.py": "from . import y\n",  # imports into the cycle, not part of it
        },
    )
    assert cs.cycles(cs.import_graph(cs.package_files(pkg))) == [["pkg.sub.x", "pkg.y"]]
    out = io.StringIO()
    assert cs.check(pkg, None, out) == 1
    assert "NEW      pkg.sub.x <-> pkg.y" in out.getvalue()


def test_the_baseline_forgives_only_what_it_lists(tmp_path: Path) -> None:
    pkg = _package(
        tmp_path,
        {
            "a.py": _function("long_a", 120),
            "b.py": _function("long_b", 120),
            "c.py": "import pkg.d\n",
            "d.py": "from pkg import c\n",
        },
    )
    baseline = tmp_path / "baseline.txt"
    cs.write_baseline(pkg, baseline)
    assert cs.check(pkg, baseline, io.StringIO()) == 0
    (pkg / "e.py").write_text(_function("long_e", 150))  # a new long function is not forgiven
    baseline.write_text(baseline.read_text().replace("function pkg/b.py:long_b\n", ""))  # nor one taken out
    out = io.StringIO()
    assert cs.check(pkg, baseline, out) == 2
    assert "NEW      pkg/e.py:long_e" in out.getvalue() and "NEW      pkg/b.py:long_b" in out.getvalue()
    (pkg / "a.py").write_text("")  # fixed: reported, not failed
    out = io.StringIO()
    assert cs.check(pkg, baseline, out) == 2 and "fixed    function pkg/a.py:long_a" in out.getvalue()


def test_the_marker_table_names_real_test_files_and_tests() -> None:
    """A misspelt MARKERS key would silently leave a slow test in `make test-fast`."""
    from conftest import MARKERS

    allowed = {"unit", "conformance", "service", "slow"}
    for key, markers in MARKERS.items():
        file, _, test = key.partition("::")
        path = ROOT / "tests" / file
        assert path.is_file(), key
        assert not test or f"def {test}(" in path.read_text(), key
        assert markers and set(markers) <= allowed, key


def test_the_long_first_list_names_real_test_files_once() -> None:
    """A misspelt or repeated LONG_FIRST name would silently hand a long file out last."""
    from conftest import LONG_FIRST

    assert len(set(LONG_FIRST)) == len(LONG_FIRST)
    missing = [name for name in LONG_FIRST if not (ROOT / "tests" / name).is_file()]
    assert not missing, missing


def test_the_cli_local_fit_imports_no_web_framework_or_database(tmp_path: Path) -> None:
    """`actuator-sysid fit` runs the local pipeline (actuator_sysid/pipeline.py) and writes its report without
    importing SQLAlchemy or FastAPI: a real tiny fit in a fresh interpreter, then its loaded modules."""
    code = textwrap.dedent(f"""
        import sys
        from actuator_sysid.cli import main
        rc = main(["demo", "--out", {str(tmp_path / "demo")!r}, "--generations", "2", "--population", "4"])
        assert rc == 0, rc
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & {{"sqlalchemy", "fastapi", "starlette", "alembic"}})
        print("LOADED", loaded)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LOADED []" in out.stdout, out.stdout[-500:]
    assert (tmp_path / "demo" / "report.html").is_file() and (tmp_path / "demo" / "fit.json").is_file()
