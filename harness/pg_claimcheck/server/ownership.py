"""Who owns a run's leftovers, and the proof that the owner is dead before anything is swept.

A coordinator killed with SIGKILL cannot clean up: its embedded cluster directory or its schema on
a shared server stays. Each run therefore records its owner: process id, host and the process's
start time (so a recycled pid is not mistaken for the owner), in `owner.json` inside the cluster
directory and as `COMMENT ON SCHEMA`. The next run sweeps a leftover only when

- the owner ran on this host and that process no longer exists (or the pid now names another
  process, told apart by its start time), and
- for a schema, no connection of that run is left in `pg_stat_activity` (the live coordinator keeps
  its named connection open for the whole run: that connection is the run's heartbeat), and
- for a cluster directory, no postmaster still runs on it.

Anything else (no owner record, another host, a live owner) is left alone: never touch a live run.
"""
from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.server.runcontext import SCHEMA_PREFIX, app_pattern

OWNER_FILE = "owner.json"
COMMENT_TAG = "claimcheck run owner: "


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux /proc), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return -1  # exists but unreadable: treat as alive
    return int(stat.rsplit(")", 1)[1].split()[19])


def this_owner() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "started": _start_time(pid)}


def owner_dead(owner: dict | None) -> bool:
    """True only when it is proven that the owning process is gone."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid, started = owner.get("pid"), owner.get("started")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    now = _start_time(pid)
    if now is None:
        return True
    return now != -1 and started is not None and now != started


def write_owner_file(directory: Path) -> None:
    (directory / OWNER_FILE).write_text(json.dumps(this_owner()))


def read_owner_file(directory: Path) -> dict | None:
    try:
        return json.loads((directory / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None


def abandoned_dirs(parent: Path, prefix: str) -> Iterator[tuple[Path, dict]]:
    """(directory, owner) of each `prefix*` directory in `parent` whose owner record proves its owner
    dead: what a run may sweep from this host's disk, once what runs from it is proven stopped."""
    for directory in parent.glob(f"{prefix}*"):
        owner = read_owner_file(directory)
        if owner is not None and owner_dead(owner):
            yield directory, owner


def left_by(owner: dict) -> str:
    """Why a leftover was swept, in words."""
    return f"left by process {owner['pid']} on this host, which no longer runs"


def abandoned(conn: Any, query: str, ours: str, held: list[str] | None = None) -> list[tuple[str, dict]]:
    """(name, owner) of each `claimcheck_<run id>` leftover that `query` lists (its name and comment,
    other than `ours`) whose owner is proven dead and of whose run no connection is left: what a run
    may sweep (schemas on a shared server, library runs' databases). `held` collects, in words, the
    leftovers of a dead owner kept because connections of their run are still open."""
    found = []
    for name, comment in listed(conn, query, ours):
        owner = parse_comment(comment)
        if owner is None or not owner_dead(owner):
            continue  # no owner record, another host's, or a live run's
        left = run_connections(conn, name)
        if left:  # a connection of that run is still open: not proven dead
            if held is not None:
                shown = ", ".join(f"pid {pid} ({app.rsplit('/', 1)[-1]}, {state or '?'})"
                                  for pid, app, state in left[:3])
                held.append(f"left {name} alone: its owner, process {owner.get('pid')} on this host, is gone, but "
                            f"{len(left)} connection(s) of its run are still open ({shown}); it is swept once they "
                            "end (pg_terminate_backend them if nothing of that run should still run)")
            continue
        found.append((name, owner))
    return found


def listed(conn: Any, query: str, ours: str) -> list[tuple[str, str | None]]:
    """(name, comment) of every `claimcheck_<run id>` leftover `query` lists, other than `ours`."""
    return conn.execute(QUERIES[query], {"pattern": SCHEMA_PREFIX.replace("_", r"\_") + "%", "ours": ours}).fetchall()


def run_connections(conn: Any, name: str) -> list[tuple[int, str, str | None]]:
    """(pid, application_name, state) of the connections still open of the run that owns `name`."""
    return conn.execute(QUERIES["run_backends"], {"app_pattern": app_pattern(name[len(SCHEMA_PREFIX):])}).fetchall()


def schema_comment() -> str:
    return COMMENT_TAG + json.dumps(this_owner())


def parse_comment(comment: str | None) -> dict | None:
    if not comment or not comment.startswith(COMMENT_TAG):
        return None
    try:
        return json.loads(comment[len(COMMENT_TAG):])
    except ValueError:
        return None
