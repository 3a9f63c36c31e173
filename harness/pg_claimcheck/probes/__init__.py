"""Database-side probes: what a worker design does to the server.

`vacuum` (dead tuples kept by held transactions, the archive step), `notify` (LISTEN/NOTIFY
delivery, folding, payload limit, wake-up latency) and `explain` (the claim's plan shape).
Each works inside the run's schema (:func:`pg_claimcheck.server.session.run_schema`) and returns plain
results that `pg_claimcheck.probes._report` turns into tables and JSON.
"""
from pathlib import Path

from pg_claimcheck.contract.sqlfile import load_queries

PROBE_QUERIES: dict[str, str] = load_queries(Path(__file__).parents[1] / "sql" / "probes.sql")
"""The probes' SQL, by name, from `harness/pg_claimcheck/sql/probes.sql`."""
