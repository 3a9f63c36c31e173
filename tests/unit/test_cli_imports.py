"""The CLI imports what it runs: `import pg_claimcheck.cli` (and `claimcheck --help`, `--version`) loads no
verb, no database driver and no report; a verb's command line loads that verb's module alone."""
from __future__ import annotations

import json
import re
import subprocess
import sys

from pg_claimcheck.commands import VERBS

PROBE = """
import json, sys
{setup}
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("pg_claimcheck", "psycopg", "rich")))))
"""


def loaded(setup: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], capture_output=True, text=True,
                          timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_importing_the_cli_loads_no_verb_driver_or_report() -> None:
    names = loaded("import pg_claimcheck.cli")
    assert not {n for n in names if n.startswith(("pg_claimcheck.commands.", "psycopg", "rich", "pg_claimcheck.report",
                                                  "pg_claimcheck.engine"))}, names


def test_help_and_version_load_no_verb() -> None:
    for flag in ("--help", "--version"):
        names = loaded("from pg_claimcheck.cli import main\ntry:\n    main([%r])\nexcept SystemExit:\n    pass" % flag)
        assert not {n for n in names if n.startswith(("pg_claimcheck.commands.", "psycopg"))}, (flag, names)


def test_a_verb_loads_its_own_module_alone() -> None:
    names = loaded("from pg_claimcheck.cli import build_parser\nbuild_parser(['compare', 'a.json', 'b.json'])")
    verbs = {n.removeprefix("pg_claimcheck.commands.") for n in names if n.startswith("pg_claimcheck.commands.")}
    assert "compare" in verbs and not verbs & (set(VERBS) - {"compare"}), verbs


def test_every_verb_parses_and_lists_its_help_line(capsys) -> None:
    from pg_claimcheck.cli import build_parser

    parser = build_parser()  # every verb's options
    for verb, line in VERBS.items():
        assert parser.parse_args([verb, *_minimal(verb)]).verb == verb
    parser.print_help()
    def words(text: str) -> str:  # argparse wraps at spaces and after hyphens ("graphile-" / "worker")
        return re.sub(r"-\s+", "-", " ".join(text.split()))

    listing = words(capsys.readouterr().out)
    assert all(words(line) in listing for line in VERBS.values())


def _minimal(verb: str) -> list[str]:
    """The fewest arguments each verb parses with."""
    return {"check": ["skip-locked"], "compare": ["a.json", "b.json"], "interleave": ["x.spec"],
            "lib": ["procrastinate"], "explain": ["skip-locked"]}.get(verb, [])
