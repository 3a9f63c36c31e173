"""Judging what happened: the exactly-once ledger, a run's result, statistics, and comparing reports."""
