"""Run the real CLI in a subprocess, and check that nothing of it is left behind."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest

from sample_reports import assert_valid_report

CLI_TIMEOUT_S = 180


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str


class Cli:
    """The claimcheck command with a private TMPDIR and run id, so leftovers can be found."""

    def __init__(self, server, scratch: Path) -> None:
        self.server = server
        self.scratch = scratch
        self.run_id = "t" + secrets.token_hex(5)

    def env(self, dsn: bool) -> dict:
        env = dict(os.environ, TMPDIR=str(self.scratch), CLAIMCHECK_RUN_ID=self.run_id, COLUMNS="200")
        env.pop("CLAIMCHECK_DSN", None)
        if dsn:
            env["CLAIMCHECK_DSN"] = self.server.dsn
        return env

    def start(self, *args: str, dsn: bool = True) -> subprocess.Popen:
        # A session of its own, like a terminal job: Ctrl-C goes to its whole process group.
        return subprocess.Popen([sys.executable, "-m", "pg_claimcheck", *args], env=self.env(dsn), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                cwd=self.scratch)

    def __call__(self, *args: str, dsn: bool = True) -> Finished:
        before = self._json_files()
        proc = self.start(*args, dsn=dsn)
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
        # Every report the CLI wrote must follow the published schema (report.schema.json).
        for path, stamp in self._json_files().items():
            if before.get(path) != stamp:
                assert_valid_report(json.loads(path.read_text()), str(path))
        return Finished(proc.returncode, out, err)

    def _json_files(self) -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in self.scratch.rglob("*.json")}

    def leftovers(self) -> list[str]:
        """Processes, server directories and schemas of this CLI run that still exist."""
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if str(self.scratch) in cmdline:
                found.append(f"process {proc.info['pid']}: {cmdline[:120]}")
        found += [f"directory {p}" for p in self.scratch.glob("claimcheck-pg*")]
        with psycopg.connect(self.server.dsn, autocommit=True) as conn:
            schemas = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = %s",
                                   (f"claimcheck_{self.run_id}",)).fetchall()
        found += [f"schema {s}" for (s,) in schemas]
        return found

    def assert_nothing_left(self, grace_s: float = 5.0) -> None:
        deadline = time.monotonic() + grace_s
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, left


@pytest.fixture
def cli(server):
    # Short on purpose: the embedded server's Unix socket path must fit in 107 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="cc-", dir="/tmp"))
    scratch.chmod(0o755)  # when we are root, the server runs as another account and must reach it
    yield Cli(server, scratch)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if str(scratch) in " ".join(proc.info["cmdline"] or []):
            proc.send_signal(signal.SIGKILL)
    shutil.rmtree(scratch, ignore_errors=True)
