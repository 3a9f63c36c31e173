"""What a plain install carries: every folder of the package is listed in pyproject.toml's packages.

The list is explicit (the built-in strategies in scenarios/ are mapped into `pg_claimcheck.scenarios`, which
setuptools' package finder cannot express beside the harness/ source root), so a new subpackage is easy to
forget: the editable install of `make test` still finds it, and only a wheel lacks it (the plain-install step
of .ci/run failed so once, on `pg_claimcheck.plans`).
"""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_of_the_package_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    package = ROOT / "harness" / "pg_claimcheck"
    folders = {".".join(("pg_claimcheck", *d.relative_to(package).parts)).rstrip(".")
               for d in [package, *package.rglob("*")] if d.is_dir() and d.name != "__pycache__"}
    folders |= {"pg_claimcheck.scenarios", "pg_claimcheck.scenarios.specs"}
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_every_install_hint_names_the_distribution_on_pypi():
    """PyPI's `claimcheck` is an unrelated project: installing that name (or its extras) installs
    that one, and the pytest plugin is then missing. Every doc, hint and error says the name pyproject.toml
    publishes, which is the one `pg_claimcheck.install_command` writes."""
    import re

    from pg_claimcheck import DISTRIBUTION, install_command

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DISTRIBUTION
    assert install_command("locust") == f"pip install '{DISTRIBUTION}[locust]'"
    wrong = re.compile(r"pip\s+install\s+'?claimcheck\b|`claimcheck\[")
    files = [ROOT / "README.md", ROOT / ".ci" / "run", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "harness").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    found = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in files for m in wrong.finditer(f.read_text())]
    assert found == []
