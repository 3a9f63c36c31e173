"""Built-in strategies: one `.sql` file each, in the same contract as a user's file.

A file's name (dashes for underscores) is the strategy's name. The headers `expected` and
`seed` are metadata for people and for tests that compare a measured verdict with the
expectation; no verdict is ever computed from them.
"""
from pathlib import Path

SCENARIO_DIR = Path(__file__).parent

# The catalog (README, "What it answers"), in the order `claimcheck bench` shows it.
CATALOG = (
    "naive-subquery",
    "naive-single",
    "select-then-update",
    "cte-no-lock",
    "advisory-lock",
    "for-update",
    "skip-locked",
    "serializable",
)


def scenario_path(name: str) -> Path:
    return SCENARIO_DIR / f"{name.replace('-', '_')}.sql"


SHARED_LIFECYCLE = SCENARIO_DIR / "_lifecycle.sql"
"""complete / fail / extend for files with the header `-- lifecycle: shared`."""


def builtin_names() -> list[str]:
    return sorted(p.stem.replace("_", "-") for p in SCENARIO_DIR.glob("*.sql") if not p.stem.startswith("_"))
