"""The package's layering, read from its source (ast, nothing imported): no module below the front
ends imports one of them, and no module grows past 500 lines unnoticed.

The front ends are what users call: the `claimcheck` command (`cli`, `__main__`, one module per
verb in `commands/`) and the pytest plugin. What a lower layer needs from them (the report's
console width, the JSON's `settings`, printing a verb's runs) lives below them, in
`claimcheck.report.publish`, and the front ends call it.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "harness" / "claimcheck"
FRONT_ENDS = ("claimcheck.cli", "claimcheck.__main__", "claimcheck.commands", "claimcheck.pytest_plugin")
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
            out.update(f"{base}.{alias.name}" for alias in node.names)  # `from claimcheck import cli`
    return out


def is_front_end(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FRONT_ENDS)


def test_nothing_below_the_front_ends_imports_them() -> None:
    found = modules()
    assert "claimcheck.engine.worker" in found and "claimcheck.commands.check" in found  # the walk sees the tree
    wrong = {name: sorted(i for i in imported(name, path) if is_front_end(i))
             for name, path in found.items() if not is_front_end(name)}
    assert not {k: v for k, v in wrong.items() if v}


def test_the_walk_catches_every_form_of_import(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text("import claimcheck.cli\nfrom claimcheck.commands._options import x\n"
                      "from claimcheck import pytest_plugin\nfrom .. import commands\n")
    got = imported("claimcheck.engine.mod", source)
    assert {"claimcheck.cli", "claimcheck.commands._options", "claimcheck.pytest_plugin",
            "claimcheck.commands"} <= got
    assert all(is_front_end(i) for i in ("claimcheck.cli", "claimcheck.commands._options", "claimcheck.pytest_plugin"))
    assert not is_front_end("claimcheck.commandsx")


def test_no_module_over_500_lines_but_the_known_ones() -> None:
    long = {name for name, path in modules().items() if len(path.read_text().splitlines()) > MAX_LINES}
    assert long <= KNOWN_LONG, f"modules over {MAX_LINES} lines: {sorted(long - KNOWN_LONG)}"
