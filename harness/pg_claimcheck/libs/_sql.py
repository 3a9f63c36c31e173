"""The adapters' reads of the libraries' tables, loaded once from `harness/pg_claimcheck/sql/libs.sql`."""
from __future__ import annotations

from pathlib import Path

from pg_claimcheck.contract.sqlfile import load_queries

LIB_QUERIES: dict[str, str] = load_queries(Path(__file__).parent.parent / "sql" / "libs.sql")
