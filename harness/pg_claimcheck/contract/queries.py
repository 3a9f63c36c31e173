"""The harness's own SQL, loaded once from `harness/pg_claimcheck/sql/queries.sql` and used by name."""
from __future__ import annotations

from pathlib import Path

from pg_claimcheck.contract.sqlfile import load_queries

QUERIES: dict[str, str] = load_queries(Path(__file__).parents[1] / "sql" / "queries.sql")
