"""The harness's own SQL, loaded once from `harness/sql/queries.sql` and used by name."""
from __future__ import annotations

from pathlib import Path

from claimcheck.sqlfile import load_queries

QUERIES: dict[str, str] = load_queries(Path(__file__).parent / "sql" / "queries.sql")
