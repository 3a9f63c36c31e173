"""Interleavings on the real server: the seeds' demonstrations as golden traces, and the
hypothesis search finding (and shrinking) double claims of the unsafe strategies only."""
from pathlib import Path

import pytest

from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.interleave.search import search
from pg_claimcheck.interleave.spec import parse_spec
from pg_claimcheck.interleave.specs import SPEC_DIR, load_spec, run_spec
from pg_claimcheck.interleave.trace import normalize, render

GOLDEN = Path(__file__).parents[1] / "golden"
SEARCH_SEED = 20261129


def trace(results) -> str:
    return normalize("".join("\n".join(render(r)) + "\n" for r in results))


@pytest.mark.parametrize("spec", sorted(p.stem for p in SPEC_DIR.glob("*.spec")))
def test_builtin_spec_matches_its_golden_trace(server, spec):
    expected = (GOLDEN / f"{spec}.out").read_text()
    assert trace(run_spec(server, load_spec(spec))) == expected


def test_seed_000_both_sessions_own_jobs_1_2_3(server):
    (result,) = run_spec(server, load_spec("seed000_naive_subquery"))
    assert result.blocked_steps == ["b_claim"]
    assert result.double_claims == {job: [("A", 1), ("B", 2)] for job in (1, 2, 3)}


def test_seed_003_for_update_waits_and_skip_locked_does_not(server):
    (for_update,) = run_spec(server, load_spec("seed003_for_update"))
    (skip_locked,) = run_spec(server, load_spec("seed003_skip_locked"))
    assert for_update.blocked_steps == ["b_claim"] and skip_locked.blocked_steps == []
    (waited,) = [r for kind, r in for_update.events if kind == "completed"]
    # B waited for the whole of A's work (pg_sleep(0.2)), then took job 2.
    assert waited.waited_ms >= 200 and waited.rows == [(2, 1)]
    assert {j: o for j, o in skip_locked.owned.items()} == {1: [("A", 1)], 2: [("B", 1)]}


def test_every_interleaving_runs_when_no_permutation_is_given(server):
    spec = parse_spec("""
jobs 3
session A
step a1 { BEGIN }
claim a2 { UPDATE jobs SET status = 'running' WHERE id = (SELECT min(id) FROM jobs WHERE status = 'queued') RETURNING id }
step a3 { COMMIT }
session B
step b1 { BEGIN }
claim b2 { UPDATE jobs SET status = 'running' WHERE id = (SELECT min(id) FROM jobs WHERE status = 'queued') RETURNING id }
step b3 { COMMIT }
""")
    results = run_spec(server, spec)
    assert len(results) == 20  # 6 choose 3 orders
    invalid = [r for r in results if r.invalid]
    doubled = [r for r in results if r.double_claims]
    # B blocked behind A's uncommitted claim, then A committing: the double claim of seed 003.
    assert doubled and all(r.blocked_steps for r in doubled)
    # A permutation that asks a waiting session for its next step is reported, not hung.
    assert invalid and all("still waiting" in r.invalid for r in invalid)


@pytest.mark.parametrize("name", ["naive-subquery", "naive-single", "cte-no-lock", "select-then-update"])
def test_search_finds_and_shrinks_a_double_claim(server, name, tmp_path):
    result = search(server, load_strategy(name), max_examples=200, seed=SEARCH_SEED, database=tmp_path / "db")
    assert result.counterexample is not None, f"no counterexample for {name}"
    cx = result.counterexample
    assert cx.double_claims
    sessions = {step.split("_")[0] for step in cx.permutation}
    assert sessions == {"a", "b"}, cx.permutation
    if name != "select-then-update":
        # The heart of the story: one session's claim blocked on the other's row lock.
        assert len(cx.blocked_steps) == 1
    # The printed spec replays to the same double claim.
    replayed = run_spec(server, parse_spec(result.spec_text))
    assert replayed[0].double_claims == cx.double_claims
    # And the database replays the counterexample first next time.
    again = search(server, load_strategy(name), max_examples=200, seed=SEARCH_SEED + 1, database=tmp_path / "db")
    assert again.counterexample is not None and again.counterexample.permutation == cx.permutation


@pytest.mark.parametrize("name", ["skip-locked", "for-update", "serializable"])
def test_search_finds_nothing_for_safe_strategies(server, name):
    result = search(server, load_strategy(name), max_examples=150, seed=SEARCH_SEED)
    assert result.counterexample is None
    assert result.examples_run >= 150


def test_failing_sql_names_the_line_and_leaves_no_connection(server, monkeypatch):
    import psycopg

    from pg_claimcheck.interleave.spec import SpecError

    monkeypatch.setenv("CLAIMCHECK_RUN_ID", "ilv_bad_sql")
    spec = parse_spec("session A\nstep a1 { BEGIN }\nstep a2 { SELEC 1 }\nstep a3 { COMMIT }\n", "bad.spec")
    with pytest.raises(SpecError, match=r"bad.spec:3: step a2 fails on the server: syntax error"):
        run_spec(server, spec)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'claimcheck/ilv_bad_sql/%'"
                            ).fetchone()[0]
        schema = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'claimcheck_ilv_bad_sql'").fetchone()[0]
    assert (left, schema) == (0, 0)
