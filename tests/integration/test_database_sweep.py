"""A library run's database killed between CREATE DATABASE and the comment that records its owner
(pg_claimcheck.server.databases): swept by a later run once the marker on this host proves its owner
dead, and left alone without one (nothing proves it ours)."""
import json
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql

from pg_claimcheck.server.databases import CREATING_PREFIX, sweep_databases
from pg_claimcheck.server.ownership import OWNER_FILE
from pg_claimcheck.server.postmaster import owned_dir


def _dead_owner() -> dict:
    """The owner record of a process of this host that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os, socket; print(os.getpid(), socket.gethostname())"],
                          capture_output=True, text=True, check=True)
    pid, host = done.stdout.split()
    return {"pid": int(pid), "host": host, "started": 1}


def test_an_uncommented_database_is_swept_only_when_its_marker_proves_its_owner_dead(server):
    killed, unproven = (f"claimcheck_{secrets.token_hex(6)}" for _ in range(2))
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        try:
            # What a run SIGKILLed between CREATE DATABASE and its COMMENT leaves: the database with no
            # owner comment, and its marker (libs.database's `creating`) with the dead run's owner record.
            marker = owned_dir(f"{CREATING_PREFIX}{killed}-", Path(tempfile.gettempdir()), None)
            (marker / OWNER_FILE).write_text(json.dumps(_dead_owner()))
            for name in (killed, unproven):  # the second with no marker: nothing says whose it is
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            notes = sweep_databases(conn, server, "claimcheck_not_these")
            names = {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname IN (%s, %s)",
                                                (killed, unproven)).fetchall()}
            assert any(f"swept database {killed}" in note for note in notes), notes
            assert names == {unproven} and not marker.exists()
        finally:
            for name in (killed, unproven):
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
