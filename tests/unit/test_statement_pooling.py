"""Which designs a worker can run behind statement pooling, where every transaction is one statement
(pg_claimcheck.server.pooling.transaction_blocks), and the refusal of the others: pure, no server."""
from __future__ import annotations

import pytest

from pg_claimcheck.contract.strategy import Strategy, load_strategy
from pg_claimcheck.errors import UsageError
from pg_claimcheck.plans.conditions import AS_SEEDED, CHOICES, STALE
from pg_claimcheck.server.pooling import Pooler, refuse_transaction_blocks, transaction_blocks

STATEMENT = Pooler(mode="statement", started=True, evidence="pool_mode = statement", kind="pgbouncer",
                   version="1.18.0", pool_size=2)
CLAIM = "UPDATE jobs SET status = 'running' WHERE id = 1 RETURNING id"


def _strategy(**sections: str) -> Strategy:
    return Strategy(name="design", statements={"claim": CLAIM, **sections})


def test_a_lone_claim_and_lone_completions_need_no_transaction_block_in_lease_mode():
    assert transaction_blocks(load_strategy("skip-locked"), "lease") == []
    assert transaction_blocks(_strategy(complete="UPDATE jobs SET status = 'done' WHERE id = %(id)s"), "lease") == []


@pytest.mark.parametrize("strategy, mode, why", [
    (_strategy(), "lock", "lock mode holds one transaction across the claim, the work and the completions"),
    (_strategy(pick="SELECT id FROM jobs LIMIT 1"), "lease", "its pick and its claim run in one transaction"),
    (Strategy(name="design", statements={"claim": f"SET LOCAL lock_timeout = '1s';\n{CLAIM}"}), "lease",
     "its claim is 2 statements in one transaction"),
    (_strategy(complete="DELETE FROM jobs WHERE id = %(id)s;\nSELECT 1"), "lease",
     "its complete is 2 statements in one transaction"),
])
def test_what_needs_a_transaction_block_is_named(strategy, mode, why):
    assert why in transaction_blocks(strategy, mode)


def test_the_refusal_says_why_and_what_to_do_and_only_behind_statement_pooling():
    with pytest.raises(UsageError) as refused:
        refuse_transaction_blocks(STATEMENT, [load_strategy("skip-locked")], ["lease", "lock"])
    words = " ".join(str(refused.value).split())
    assert words.startswith("skip-locked in lock mode cannot run behind PgBouncer 1.18.0 in statement mode")
    assert "SQLSTATE 08P01" in words and "--mode lease" in words and "Nothing was run" in words
    refuse_transaction_blocks(STATEMENT, [load_strategy("skip-locked")], ["lease"])
    for mode in ("transaction", "session"):
        refuse_transaction_blocks(Pooler(mode=mode, started=True, evidence=""), [_strategy()], ["lock"])
    refuse_transaction_blocks(None, [_strategy(pick="SELECT 1")], ["lock"])


def test_a_sweep_is_refused_once_naming_every_run_that_needs_a_transaction_block():
    catalog = [load_strategy(name) for name in ("skip-locked", "select-then-update")]
    with pytest.raises(UsageError) as refused:
        refuse_transaction_blocks(STATEMENT, catalog, ["lease", "lock"])
    words = " ".join(str(refused.value).split())
    assert words.startswith("3 of the runs cannot run behind PgBouncer 1.18.0 in statement mode"), words
    assert "the pick and its claim run in one transaction (select-then-update)" in words
    assert "the completions (skip-locked, select-then-update)" in words


def test_planner_conditions_that_set_local_are_not_applicable_behind_statement_pooling():
    with_settings = [c for c in CHOICES["all"] if c.settings]
    assert with_settings and all("SET LOCAL" in c.unavailable(True, statement_pooled=True) for c in with_settings)
    assert STALE.unavailable(True, statement_pooled=True) is None
    assert AS_SEEDED.unavailable(True, statement_pooled=True) is None
