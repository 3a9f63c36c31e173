"""A throwaway PostgreSQL server run from a directory of binaries.

Used for the embedded wheel's servers and for `--pg system`. The cluster lives in a fresh
temporary directory, listens only on a Unix socket inside it, and is deleted when stopped.

Why we run `postgres` ourselves instead of `pg_ctl start`: pg_ctl detaches the server into
its own session, so a coordinator killed without a chance to clean up would leave it running
forever. Started as our child with a parent-death signal, the server shuts itself down (fast
mode) when the coordinator dies for any reason, and it sits in its own process group so a
Ctrl-C in the terminal reaches only us, and we stop it in order.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from pg_claimcheck.errors import ServerError
from pg_claimcheck.server import children
from pg_claimcheck.server.interrupts import deferred, done, shielded
from pg_claimcheck.server.ownership import abandoned_dirs, left_by, write_owner_file

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
READY_POLL_S = 0.05
# The socket's path (parent + "/claimcheck-pg-XXXXXXXX/.s.PGSQL.5432") must fit in 107 bytes.
MAX_PARENT_PATH = 70
SOCKET_PORT = 5432  # only names the socket file; nothing listens on TCP
CLUSTER_PREFIX = "claimcheck-pg-"
# Accounts we may run the server as when we are root (initdb refuses to run as root).
_SERVER_ACCOUNTS = ("postgres", "pgserver")


def server_account() -> str | None:
    """The unprivileged account to run the server as, or None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in _SERVER_ACCOUNTS:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "pgserver"], check=True, capture_output=True)
    return "pgserver"


def _traversable_by_others(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def temp_parent(account: str | None, max_length: int | None = None) -> Path:
    """Where a directory for a process run as `account` goes: the usual temp dir, unless that account
    could not reach it (a private TMPDIR when we are root) or its path is longer than `max_length`; then /tmp."""
    base = Path(tempfile.gettempdir())
    if (max_length is not None and len(str(base)) > max_length) or (account and not _traversable_by_others(base)):
        return Path("/tmp")
    return base


def owned_dir(prefix: str, parent: Path, account: str | None) -> Path:
    """A fresh directory `prefix*` in `parent` with our owner record (see pg_claimcheck.server.ownership),
    given to `account` (the unprivileged user a process of ours runs as when we are root)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    write_owner_file(root)
    if account:
        entry = pwd.getpwnam(account)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    return root


def run_as(account: str | None) -> dict:
    """subprocess's keywords that run a child of ours as `account` (see server_account), if any."""
    return {"user": account, "group": None} if account else {}


def remove_dir(root: Path, what: str, running: bool) -> None:
    """Delete the directory of the `what` we started (a process now stopped, if it was `running`), and
    say so; or warn that it is left, to be deleted by hand."""
    shutil.rmtree(root, ignore_errors=True)
    if not root.exists():
        done(f"the {what} we started stopped and its directory {root} deleted" if running
             else f"the directory of the {what} we were starting, {root}, deleted")
    else:
        print(f"claimcheck: warning: could not delete {root}; delete it by hand", file=sys.stderr)


class LocalPostmaster:
    """One postgres process over a temporary data directory; `start()` then `stop()`."""

    def __init__(self, bin_dir: Path, *, max_connections: int, label: str) -> None:
        if max_connections < 10:
            raise ValueError("max_connections must be at least 10")
        self.bin_dir = bin_dir
        self.label = label
        self.max_connections = max_connections
        self.account = server_account()
        self.root: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        assert self.root is not None
        return f"postgresql://postgres@/postgres?host={self.root}&port={SOCKET_PORT}"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "server.log"

    def start(self) -> None:
        for tool in ("initdb", "postgres"):
            if not (self.bin_dir / tool).exists():
                raise ServerError(f"{self.label}: no {tool} in {self.bin_dir}; is PostgreSQL installed there?")
        parent = temp_parent(self.account, MAX_PARENT_PATH)  # the Unix socket's path must stay short
        for note in sweep_clusters(parent):
            print(f"claimcheck: {note}", file=sys.stderr)
        self.root = owned_dir(CLUSTER_PREFIX, parent, self.account)
        data = self.root / "data"
        initdb = subprocess.run(
            [str(self.bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--no-locale", "--no-sync"],
            capture_output=True, text=True, **run_as(self.account),
        )
        if initdb.returncode != 0:
            self.stop()
            raise ServerError(f"{self.label}: initdb failed: {initdb.stderr.strip() or initdb.stdout.strip()}")
        self._launch()

    def _launch(self) -> None:
        assert self.root is not None
        log = open(self.log_path, "ab")
        if self.account:
            os.chown(self.log_path, pwd.getpwnam(self.account).pw_uid, -1)
        with deferred():  # kept before a Ctrl-C is raised (children.start)
            # SIGINT if we die: a fast shutdown.
            self.process = children.start(
                [str(self.bin_dir / "postgres"), "-D", str(self.root / "data"), "-k", str(self.root),
                 "-p", str(SOCKET_PORT), "-c", "listen_addresses=", "-c", f"max_connections={self.max_connections}"],
                dies_with=signal.SIGINT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                **run_as(self.account),
            )
        log.close()
        self._wait_until_ready()

    def restart(self) -> None:
        """Fast shutdown and start again on the same data: every client loses its connection."""
        self._shutdown()
        self._launch()

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                self.stop()
                raise ServerError(f"{self.label}: the server exited while starting. Its log ends:\n{tail}")
            try:
                psycopg.connect(self.dsn, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                time.sleep(READY_POLL_S)
        self.stop()
        raise ServerError(f"{self.label}: the server did not accept connections within {READY_TIMEOUT_S:.0f} s")

    def _shutdown(self) -> None:
        if self.process is not None:
            children.stop([self.process], ask=signal.SIGINT, within_s=STOP_TIMEOUT_S)  # SIGINT: PostgreSQL's fast shutdown
        self.process = None

    def stop(self) -> None:
        """Fast shutdown (clients disconnected, no recovery needed), then delete the cluster; a
        second Ctrl-C meanwhile waits until both are done (see pg_claimcheck.server.interrupts)."""
        with shielded():
            running = self.process is not None
            self._shutdown()
            if self.root is not None:
                remove_dir(self.root, "server", running)
                self.root = None


def sweep_clusters(parent: Path, prefix: str = CLUSTER_PREFIX) -> list[str]:
    """Delete directories named `prefix*` of earlier runs (clusters, pgbench scripts) whose owner is
    proven dead and on which no postmaster runs (see pg_claimcheck.server.ownership); return what was swept."""
    swept = []
    for directory, owner in abandoned_dirs(parent, prefix):
        if _postmaster_running(directory / "data"):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        if not directory.exists():
            swept.append(f"swept {directory}, {left_by(owner)}")
    return swept


def _postmaster_running(data: Path) -> bool:
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        return True  # unreadable or half-written: not proven stopped
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
