"""The package's layering: the layer order of docs/architecture.md, checked by import-linter's layers
contract (`[tool.importlinter]` in pyproject.toml, imports under TYPE_CHECKING and inside functions
included); read from the source (ast, nothing imported): no module below the front ends imports one
of them, and no module grows past 500 lines unnoticed; and the verdict loads no database driver.

The front ends are what users call: the `claimcheck` command (`cli`, `__main__`, one module per
verb in `commands/`) and the pytest plugin. What a lower layer needs from them (the report's
console width, the JSON's `settings`, printing a verb's runs) lives below them, in
`pg_claimcheck.report.publish`, and the front ends call it.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness" / "pg_claimcheck"
FRONT_ENDS = ("pg_claimcheck.cli", "pg_claimcheck.__main__", "pg_claimcheck.commands", "pg_claimcheck.pytest_plugin")
MAX_LINES = 500
KNOWN_LONG: set[str] = set()
"""Over MAX_LINES, left to the claim cycle's backend seam (issue 27, item 1)."""


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imported(name: str, path: Path) -> set[str]:
    """Every module `path` imports, absolute (relative imports resolved against `name`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)  # `from pg_claimcheck import cli`
    return out


def is_front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def test_nothing_below_the_front_ends_imports_them() -> None:
    found = modules()
    assert "pg_claimcheck.engine.worker" in found and "pg_claimcheck.commands.check" in found  # the walk sees the tree
    wrong = {name: sorted(i for i in imported(name, path) if is_front_end(i))
             for name, path in found.items() if not is_front_end(name)}
    assert not {k: v for k, v in wrong.items() if v}


def test_the_walk_catches_every_form_of_import(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("import pg_claimcheck.cli\nfrom pg_claimcheck.commands._options import x\n"
                      "from pg_claimcheck import pytest_plugin\nfrom .. import commands\n")
    got = imported("pg_claimcheck.engine.mod", source)
    assert {"pg_claimcheck.cli", "pg_claimcheck.commands._options", "pg_claimcheck.pytest_plugin",
            "pg_claimcheck.commands"} <= got
    assert all(is_front_end(i) for i in ("pg_claimcheck.cli", "pg_claimcheck.commands._options", "pg_claimcheck.pytest_plugin"))
    assert not is_front_end("pg_claimcheck.commandsx")


def test_no_module_over_500_lines_but_the_known_ones() -> None:
    long = {name for name, path in modules().items() if len(path.read_text().splitlines()) > MAX_LINES}
    assert long <= KNOWN_LONG, f"modules over {MAX_LINES} lines: {sorted(long - KNOWN_LONG)}"


def lint_imports(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if tool is None:
        pytest.skip("import-linter is not installed (the test extra has it)")
    return subprocess.run([tool, "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_every_import_goes_down_the_layer_order() -> None:
    done = lint_imports()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_the_layer_contract_fails_on_an_upward_import(tmp_path: Path) -> None:
    """The same contract over a copy of the package with one upward import planted, under
    TYPE_CHECKING (the weakest form): import-linter reports it."""
    copy = tmp_path / "harness"
    shutil.copytree(PACKAGE, copy / "pg_claimcheck", ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "pg_claimcheck" / "verdict" / "ledger.py"
    planted.write_text(planted.read_text() + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from pg_claimcheck.engine.driver import run_strategy  # noqa: F401\n")
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if tool is None:
        pytest.skip("import-linter is not installed (the test extra has it)")
    done = subprocess.run([tool, "--no-cache", "--config", str(config)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "pg_claimcheck.verdict.ledger -> pg_claimcheck.engine.driver" in done.stdout


def test_the_verdict_loads_no_database_driver() -> None:
    """`pg_claimcheck.verdict` is pure: its result and ledger load neither psycopg nor the engine."""
    code = ("import sys, pg_claimcheck.verdict.result, pg_claimcheck.verdict.ledger; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg' or m.startswith('pg_claimcheck.engine')"
            " or m.startswith('pg_claimcheck.server')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
