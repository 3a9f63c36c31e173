"""The CLI and SQL-file fuzzes of issue 25, out of band: thousands of examples where `make test`
runs a few hundred (run: .venv/bin/python tests/benchmarks/fuzz_cli.py [OPTIONS_EXAMPLES [FILES
[RUNS]]]; defaults 5000, 5000, 40). The properties are those of tests/cli_fuzz.py and
tests/sqlfile_fuzz.py; a failure raises with hypothesis's shrunk example. The runs use
$CLAIMCHECK_DSN when set, else one embedded server. Counts are printed, never asserted beyond the
properties."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/: the shared generators

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cli_fuzz import check_example, examples  # noqa: E402
from pg_claimcheck.contract.strategy import load_strategy  # noqa: E402
from pg_claimcheck.errors import SqlFileError, UsageError  # noqa: E402
from pg_claimcheck.server.provision import DSN_ENV, provide_server  # noqa: E402
from sqlfile_fuzz import files  # noqa: E402

OPTIONS, FILES, RUNS = (int(a) for a in (sys.argv[1:] + ["5000", "5000", "40"][len(sys.argv) - 1:])[:3])
SCRATCH = Path(tempfile.mkdtemp(prefix="cc-fuzz-"))
seen: Counter = Counter()


def quick(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@quick(OPTIONS)
@given(examples())
def options(example):
    seen[f"options {check_example(*example)}"] += 1


@quick(FILES)
@given(files())
def read_files(example):
    text, defects, _ = example
    path = SCRATCH / "fuzz.sql"
    path.write_text(text)
    try:
        load_strategy(str(path))
        refused = False
    except (SqlFileError, UsageError) as exc:
        refused = str(exc).startswith(str(path))
        assert refused, exc
    assert refused == bool(defects), (text, defects)
    seen[f"files {'refused' if refused else 'read'}"] += 1


def run_files(dsn: str) -> None:
    from pg_claimcheck.cli import main

    @quick(RUNS)
    @given(files().filter(lambda f: not f[1]), st.sampled_from(["lease", "lock"]), st.integers(1, 4))
    def run(example, mode, workers):
        text, _, server_bad = example
        path = SCRATCH / "run.sql"
        path.write_text(text)
        err = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["check", str(path), "--jobs", "50", "--workers", str(workers), "--mode", mode, "--dsn", dsn])
        took = time.monotonic() - started
        assert took < 60 and "Traceback" not in err.getvalue(), (text, took, err.getvalue())
        assert code in ((2,) if server_bad else (0, 1)), (text, code, err.getvalue())
        seen[f"runs exit {code}"] += 1
        seen["runs seconds"] = max(seen["runs seconds"], round(took))

    run()


if __name__ == "__main__":
    for name, step in (("options", options), ("files", read_files)):
        started = time.monotonic()
        step()
        print(f"{name}: {time.monotonic() - started:.0f}s", flush=True)
    with provide_server(os.environ.get(DSN_ENV)) as server:
        started = time.monotonic()
        run_files(server.dsn)
        print(f"runs: {time.monotonic() - started:.0f}s")
    print(dict(sorted(seen.items())))
