"""Which designs a worker can run behind statement pooling, where every transaction is one statement
(pg_claimcheck.server.topology.transaction_blocks), and the refusal of the others: pure, no server."""
from __future__ import annotations

import pytest

from pg_claimcheck.contract.strategy import Strategy, load_strategy
from pg_claimcheck.errors import UsageError
from pg_claimcheck.plans.conditions import AS_SEEDED, CHOICES, STALE
from pg_claimcheck.server.pgbouncer import PoolerSpec
from pg_claimcheck.server.pooling import Pooler
from pg_claimcheck.server.topology import DIRECT, Topology, refuse_transaction_blocks, transaction_blocks

STATEMENT = Topology(ours=Pooler(mode="statement", started=True, evidence="pool_mode = statement", kind="pgbouncer",
                                 version="1.18.0", pool_size=2))
FOUND_STATEMENT = Topology(found=Pooler(mode="statement", started=False, evidence="BEGIN refused"))
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
        refuse_transaction_blocks(Topology.asked(PoolerSpec(mode)), [_strategy()], ["lock"])
    refuse_transaction_blocks(DIRECT, [_strategy(pick="SELECT 1")], ["lock"])


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
    assert with_settings and all("SET LOCAL" in c.unavailable(STATEMENT) for c in with_settings)
    assert STALE.unavailable(STATEMENT) is None
    assert AS_SEEDED.unavailable(STATEMENT) is None


def test_what_a_connection_can_do_follows_from_the_poolers_it_goes_through():
    """Ours pools only the workers; one found in front of --dsn every connection; behind either, nothing
    is prepared by name and nothing LISTENs, and behind statement pooling no transaction block opens."""
    assert DIRECT.prepares(worker=True) and DIRECT.listens(worker=True) and DIRECT.opens_blocks(worker=True)
    assert DIRECT.pooler is None
    assert STATEMENT.opens_blocks() and STATEMENT.prepares() and STATEMENT.listens()  # the coordinator: direct
    assert not STATEMENT.opens_blocks(worker=True) and not STATEMENT.prepares(worker=True)
    assert not STATEMENT.listens(worker=True)
    assert not FOUND_STATEMENT.opens_blocks() and not FOUND_STATEMENT.opens_blocks(worker=True)
    transaction = Topology.asked(PoolerSpec("transaction"))
    assert transaction.opens_blocks(worker=True) and not transaction.prepares(worker=True)
    both = Topology(found=FOUND_STATEMENT.found, ours=transaction.ours)  # ours in front of a statement pool
    assert not both.opens_blocks(worker=True) and both.pooler is transaction.ours


def test_a_statement_pool_in_front_of_the_dsn_refuses_the_harness_s_own_blocks_and_ours_does_not():
    from pg_claimcheck.server.topology import refuse_blocks

    refuse_blocks(STATEMENT, "vacuum cannot run", "its holders keep a transaction open", "point --dsn at the server")
    with pytest.raises(UsageError, match="vacuum cannot run: its holders keep a transaction open, and statement "
                                         "pooling refuses every transaction block"):
        refuse_blocks(FOUND_STATEMENT, "vacuum cannot run", "its holders keep a transaction open", "point --dsn")
