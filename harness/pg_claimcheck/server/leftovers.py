"""What killed runs leave on this host's disk, swept by the next run of any verb.

A SIGKILLed coordinator cannot clean up: an embedded cluster's directory, a PgBouncer's directory or
a library run's records stay in the temp directory. Each is made with its owner record
(:func:`pg_claimcheck.server.postmaster.owned_dir`) and deleted here only when that owner is proven dead
(:mod:`pg_claimcheck.server.ownership`), with what runs from it stopped first (a PgBouncer) or proven
stopped (a postmaster). A run of any verb sweeps all of them as it starts, so a `--dsn` run or one
without `--pooler` sweeps what an embedded or pooled run left.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pg_claimcheck.server import pgbouncer
from pg_claimcheck.server.postmaster import owned_dir, sweep_clusters

LIB_RECORDS_PREFIX = "claimcheck-lib-"
"""A `claimcheck lib` run's records directory: `claimcheck-lib-<run id>-*`."""


def temp_parents() -> list[Path]:
    """Where our directories go: the temp directory, or /tmp for a process run as another account
    (pg_claimcheck.server.postmaster.temp_parent)."""
    return sorted({Path(tempfile.gettempdir()), Path("/tmp")})


def sweep_local() -> list[str]:
    """Sweep every kind of directory a dead run of ours left; what was swept, in words."""
    notes = []
    for parent in temp_parents():
        notes += sweep_clusters(parent)
        notes += pgbouncer.sweep(parent)
        notes += sweep_clusters(parent, LIB_RECORDS_PREFIX)  # no postmaster runs on one: the owner decides
    return notes


@contextmanager
def records_dir(run_id: str) -> Iterator[Path]:
    """A library run's records directory, with its owner record, deleted however the run ends."""
    root = owned_dir(f"{LIB_RECORDS_PREFIX}{run_id}-", Path(tempfile.gettempdir()), None)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
