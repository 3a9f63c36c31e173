"""A real PgBouncer we start in front of the run's server (`--pooler pgbouncer[:MODE]`), and stop.

Production queues mostly reach PostgreSQL through a pooler, usually in transaction mode, where a
client's next transaction may run on another backend and a backend serves many clients in turn:
what a design keeps in the session (a session advisory lock, a LISTEN, a prepared statement) is
then shared or lost. To judge a queue that way, the workers connect through a PgBouncer of our own
(Debian's `pgbouncer` package, found on PATH or in /usr/sbin); the coordinator, the sampler and the
cleanup keep their direct connections.

Like the embedded server (see pg_claimcheck.server.postmaster), PgBouncer runs as our child in its own
process group, from a fresh directory `claimcheck-pgbouncer-*` in the temp directory (its config,
log and pid file, and our `owner.json`), listens only on a free loopback port, gets SIGTERM (an
immediate shutdown) if we die, and is stopped and its directory deleted however the run ends. A
SIGKILLed run's directory is swept by the next run once its owner is proven dead; a PgBouncer still
running from it (proven ours by its command line naming that directory's config) is stopped first.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pg_claimcheck.errors import ServerError, UsageError
from pg_claimcheck.server import children
from pg_claimcheck.server.interrupts import deferred, shielded
from pg_claimcheck.server.ownership import abandoned_dirs, left_by
from pg_claimcheck.server.postmaster import owned_dir, remove_dir, run_as, server_account, temp_parent

MODES = ("transaction", "session", "statement")
"""In statement mode only designs whose every transaction is one statement run (see
pg_claimcheck.server.topology.refuse_transaction_blocks): it refuses transaction blocks."""
DEFAULT_MODE = "transaction"
DIR_PREFIX = "claimcheck-pgbouncer-"
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
POLL_S = 0.05
PORT_ATTEMPTS = 3
MAX_CLIENTS = 1000
_SEARCH = ("/usr/sbin", "/usr/local/sbin", "/usr/bin")


@dataclass(frozen=True)
class PoolerSpec:
    """`--pooler pgbouncer[:MODE]` and `--pool-size N`."""

    mode: str
    pool_size: int | None = None

    @classmethod
    def parse(cls, text: str, pool_size: int | None = None) -> "PoolerSpec":
        kind, _, mode = text.partition(":")
        if kind != "pgbouncer":
            raise UsageError(f"--pooler {text!r}: the pooler claimcheck starts is pgbouncer "
                             "(pgbouncer:transaction, pgbouncer:session or pgbouncer:statement)")
        mode = mode or DEFAULT_MODE
        if mode not in MODES:
            raise UsageError(f"--pooler {text!r}: the mode is one of {', '.join(MODES)}")
        if pool_size is not None and pool_size < 1:
            raise UsageError(f"--pool-size must be at least 1, got {pool_size}")
        return cls(mode, pool_size)


def pgbouncer_path() -> Path:
    """The pgbouncer binary, or a one-paragraph ServerError saying how to get it."""
    found = shutil.which("pgbouncer") or next((str(Path(d) / "pgbouncer") for d in _SEARCH
                                               if (Path(d) / "pgbouncer").exists()), None)
    if found is None:
        raise ServerError("--pooler pgbouncer needs PgBouncer, which is not installed here: on Debian or Ubuntu, "
                          "`apt-get install pgbouncer` (claimcheck runs its own instance on a free loopback port; "
                          "the system service need not run)")
    return Path(found)


def version() -> str:
    out = subprocess.run([str(pgbouncer_path()), "--version"], capture_output=True, text=True)
    return out.stdout.split("\n", 1)[0].replace("PgBouncer ", "").strip() or "?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quote(value: str) -> str:
    """A value in PgBouncer's libpq-style connection string."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PgBouncer:
    """One pgbouncer process in front of `upstream` (a DSN); `start()` then `stop()`."""

    def __init__(self, upstream: str, spec: PoolerSpec, pool_size: int) -> None:
        self.upstream, self.mode, self.pool_size = upstream, spec.mode, pool_size
        self.binary = pgbouncer_path()
        self.account = server_account()  # PgBouncer refuses to run as root
        self.root: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.user = "postgres"

    @property
    def dsn(self) -> str:
        """Where clients connect: the upstream's database and user, on our port, no password (PgBouncer
        logs in upstream with the upstream's own credentials)."""
        given = psycopg.conninfo.conninfo_to_dict(self.upstream)
        return psycopg.conninfo.make_conninfo(host="127.0.0.1", port=str(self.port), dbname=given.get("dbname") or
                                              self.user, user=self.user, sslmode="disable")

    @property
    def admin_dsn(self) -> str:
        return psycopg.conninfo.make_conninfo(self.dsn, dbname="pgbouncer")

    def _config(self) -> str:
        with psycopg.connect(self.upstream, autocommit=True, connect_timeout=5) as conn:
            info = conn.info  # what libpq actually used: the socket directory or host, the port, the user
            host, port, self.user, password = info.host, info.port, info.user, info.password
        target = f"host={_quote(host)} port={port} user={_quote(self.user)}"
        if password:
            target += f" password={_quote(password)}"
        assert self.root is not None
        return "\n".join([
            "[databases]",
            f"* = {target}",  # every database of the server: a library run makes its own
            "[pgbouncer]",
            "listen_addr = 127.0.0.1", f"listen_port = {self.port}", "unix_socket_dir =",
            "auth_type = any",  # the upstream user is forced above; only we connect, on loopback
            f"pool_mode = {self.mode}", f"default_pool_size = {self.pool_size}", "min_pool_size = 0",
            "reserve_pool_size = 0", f"max_client_conn = {MAX_CLIENTS}",
            f"admin_users = {self.user}", "ignore_startup_parameters = extra_float_digits",
            f"logfile = {self.root / 'pgbouncer.log'}", f"pidfile = {self.root / 'pgbouncer.pid'}", "",
        ])

    def start(self) -> None:
        parent = temp_parent(self.account)
        for note in sweep(parent):
            print(f"claimcheck: {note}", file=sys.stderr)
        self.root = owned_dir(DIR_PREFIX, parent, self.account)
        try:
            for attempt in range(PORT_ATTEMPTS):
                self.port = _free_port()
                (self.root / "pgbouncer.ini").write_text(self._config())
                os.chmod(self.root / "pgbouncer.ini", 0o600)  # it may hold the upstream's password
                if self.account:
                    os.chown(self.root / "pgbouncer.ini", pwd.getpwnam(self.account).pw_uid, -1)
                if self._launch(last=attempt == PORT_ATTEMPTS - 1):
                    return
        except BaseException:
            self.stop()
            raise

    def _launch(self, last: bool) -> bool:
        """Start pgbouncer and wait until its admin console answers; False if the port was taken."""
        assert self.root is not None
        with deferred():  # kept before a Ctrl-C is raised (children.start)
            self.process = children.start(
                [str(self.binary), str(self.root / "pgbouncer.ini")], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, **run_as(self.account))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self._log_tail()
                self.process = None
                if "Address already in use" in log and not last:
                    return False
                raise ServerError(f"PgBouncer exited while starting. Its log ends:\n{log}")
            try:
                psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(POLL_S)
        raise ServerError(f"PgBouncer did not accept connections within {READY_TIMEOUT_S:.0f} s. Its log ends:\n"
                          f"{self._log_tail()}")

    def _log_tail(self) -> str:
        assert self.root is not None
        try:
            return (self.root / "pgbouncer.log").read_text(errors="replace")[-1500:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Immediate shutdown (SIGTERM: clients disconnected), then delete the directory; a second
        Ctrl-C meanwhile waits until both are done."""
        with shielded():
            running = self.process is not None and children.running(self.process)
            if self.process is not None:
                # SIGTERM: PgBouncer's immediate shutdown
                children.stop([self.process], ask=signal.SIGTERM, within_s=STOP_TIMEOUT_S)
                self.process = None
            if self.root is not None:
                remove_dir(self.root, "PgBouncer", running)
                self.root = None


def sweep(parent: Path) -> list[str]:
    """Delete `claimcheck-pgbouncer-*` directories of earlier runs whose owner is proven dead (see
    pg_claimcheck.server.ownership), stopping a PgBouncer still running from one; return what was swept."""
    swept = []
    for directory, owner in abandoned_dirs(parent, DIR_PREFIX):
        pid = _running_from(directory)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while _running_from(directory) is not None and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if _running_from(directory) is not None:
                continue  # not proven stopped: leave it
        shutil.rmtree(directory, ignore_errors=True)
        if not directory.exists():
            swept.append(f"swept {directory}" + (f" and stopped its PgBouncer (pid {pid})" if pid else "")
                         + f", {left_by(owner)}")
    return swept


def _running_from(directory: Path) -> int | None:
    """The pid of a pgbouncer running with this directory's config, if any."""
    try:
        pid = int((directory / "pgbouncer.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    return pid if str(directory / "pgbouncer.ini").encode() in cmdline else None
