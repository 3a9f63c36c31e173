"""A file's own tables, keys of any type and real statement shapes, judged on a real server."""
from __future__ import annotations

import asyncio
import textwrap
import time
from pathlib import Path

import pytest

from pg_claimcheck.contract.queries import QUERIES
from pg_claimcheck.contract.strategy import load_strategy, validate_on_server
from pg_claimcheck.engine.driver import seed
from pg_claimcheck.errors import SqlFileError
from pg_claimcheck.interleave.search import search
from pg_claimcheck.interleave.spec import parse_spec
from pg_claimcheck.interleave.stepper import InterleavingRunner
from pg_claimcheck.server.ownership import parse_comment
from pg_claimcheck.server.session import run_schema

FIELD = Path(__file__).parents[1] / "field"

UUID_TABLE = """
-- name: schema
CREATE TABLE q (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), token int NOT NULL DEFAULT 0,
                status text NOT NULL DEFAULT 'queued', attempts int NOT NULL DEFAULT 0,
                max_attempts int NOT NULL DEFAULT 3);
-- name: seed
INSERT INTO q SELECT FROM generate_series(1, %(jobs)s) RETURNING id;
-- name: remaining
SELECT count(*) FROM q WHERE status <> 'done';
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "claim.sql"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_nowait_conflicts_are_claim_outcomes_not_reconnects(run, tmp_path):
    path = write(tmp_path, """
        -- name: schema
        CREATE TABLE q (id bigint PRIMARY KEY, locked_at timestamptz);
        -- name: seed
        INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
        -- name: remaining
        SELECT count(*) FROM q;
        -- name: claim
        UPDATE q SET locked_at = now()
        WHERE id = (SELECT id FROM q WHERE locked_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE NOWAIT)
        RETURNING id;
        -- name: complete
        DELETE FROM q WHERE id = %(id)s;
        """)
    result = run(path, workers=4, jobs=300, batch=1)
    assert result.exactly_once
    assert result.claim_errors.get("55P03", 0) > 0, result.claim_errors
    assert result.reconnects == 0
    assert result.as_dict()["claim_errors"] == result.claim_errors


def test_uuid_pick_columns_reach_the_claim_and_double_claims_show_uuid_keys(run, tmp_path):
    path = write(tmp_path, UUID_TABLE + """
        -- name: pick
        SELECT id, token FROM q WHERE status = 'queued' ORDER BY id LIMIT %(batch)s;
        -- name: claim
        UPDATE q SET status = 'running', attempts = q.attempts + 1, token = q.token + 1
        FROM unnest(%(id)s::uuid[], %(token)s::int[]) AS p(id, token)
        WHERE q.id = p.id
        RETURNING q.id, q.attempts;
        -- name: complete
        UPDATE q SET status = 'done' WHERE id = %(id)s;
        """)
    result = run(path, workers=4, jobs=300, mode="lock")
    v = result.verdict
    assert not result.exactly_once and v.double_claimed_jobs > 0
    assert isinstance(v.violations[0].job, str) and len(v.violations[0].job) == 36


def test_over_claims_and_attempts_beyond_max_are_violations(run, tmp_path):
    # The claim takes %(batch)s and asks for 3 more: judged against --batch (a LIMIT written as a
    # number would be its own limit, see pg_claimcheck.contract.limit).
    path = write(tmp_path, UUID_TABLE + """
        -- name: claim
        WITH next AS (SELECT id FROM q WHERE status = 'queued' ORDER BY id LIMIT %(batch)s + 3 FOR UPDATE SKIP LOCKED)
        UPDATE q SET status = 'running', attempts = q.attempts + 4 FROM next WHERE q.id = next.id
        RETURNING q.id, q.attempts, q.max_attempts;
        -- name: complete
        UPDATE q SET status = 'done' WHERE id = %(id)s;
        """)
    result = run(path, workers=2, jobs=40, batch=2)
    v = result.verdict
    assert not result.exactly_once and v.double_claimed_jobs == 0
    assert v.over_claims > 0 and v.over_attempts == 40
    kinds = {e["kind"] for e in v.shape_evidence}
    assert kinds == {"over-claim", "over-attempt"}


def test_validation_holds_nothing_once_it_is_done(server):
    """The que family takes session advisory locks in the claim: validation must not keep one."""
    strategy = load_strategy(str(FIELD / "que_0_14_session_advisory.sql"))
    with run_schema(server) as (conn, run):
        run_id = run.run_id
        seeded = seed(conn, run, strategy, 5)
        with run.connect("validate") as throwaway:
            validate_on_server(throwaway, strategy)
        held = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND a.application_name LIKE %s", (f"claimcheck/{run_id}/%",)).fetchone()[0]
        # A closed connection's backend leaves pg_stat_activity a moment after the client is told:
        # on a busy machine the first look can still see it, so wait (bounded) for it to go.
        left = 1
        for _ in range(100):
            left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                (f"claimcheck/{run_id}/validate",)).fetchone()[0]
            if left == 0:
                break
            time.sleep(0.1)
        assert held == 0 and left == 0
        assert seeded.first_id > 1  # the run's own key range


def test_search_and_interleave_run_on_a_files_own_tables(server, tmp_path):
    path = write(tmp_path, UUID_TABLE + """
        -- name: pick
        SELECT id FROM q WHERE status = 'queued' ORDER BY id LIMIT %(batch)s;
        -- name: claim
        UPDATE q SET status = 'running', attempts = q.attempts + 1 WHERE id = ANY(%(ids)s::uuid[])
        RETURNING id, attempts;
        """)
    found = search(server, load_strategy(path), max_examples=60, seed=3)
    assert found.counterexample is not None and found.counterexample.double_claims
    assert f"tables {path}" in found.spec_text
    # A spec whose steps call a function of the file's schema.
    fn = write(tmp_path, """
        -- name: schema
        CREATE TABLE q (id bigint PRIMARY KEY, taken boolean NOT NULL DEFAULT false);
        CREATE FUNCTION take() RETURNS SETOF bigint LANGUAGE sql AS $$
          UPDATE q SET taken = true WHERE id = (SELECT id FROM q WHERE NOT taken ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING id $$;
        -- name: seed
        INSERT INTO q SELECT g FROM generate_series(1, %(jobs)s) g RETURNING id;
        -- name: remaining
        SELECT count(*) FROM q WHERE NOT taken;
        -- name: claim
        SELECT * FROM take();
        """)
    spec = parse_spec(f"jobs 2\ntables {fn}\nsession A\nstep a1 {{ BEGIN }}\nclaim a2 {{ SELECT * FROM take() }}\n"
                      "session B\nstep b1 { BEGIN }\nclaim b2 { SELECT * FROM take() }\nstep b3 { COMMIT }\n"
                      "permutation a1 a2 b1 b2 b3")

    async def go():
        with run_schema(server) as (conn, run):
            async with InterleavingRunner(run, ["A", "B"]) as runner:
                done = await runner.run(spec, spec.permutations[0])
            # The permutation rebuilt the file's tables in a new schema: its owner record came too.
            return done, conn.execute(QUERIES["schema_comment"], {"schema": run.schema}).fetchone()[0]

    result, comment = asyncio.run(go())
    assert result.owned == {2: [("B", 0)]}  # A's claim never committed; B skipped A's locked row
    assert parse_comment(comment) is not None


def test_a_remaining_section_of_several_statements_drains_the_run(run, tmp_path):
    # The workers' drain check runs the section as validation does: statement by statement.
    path = write(tmp_path, """
        -- name: schema
        CREATE TABLE q (id bigint PRIMARY KEY, done boolean NOT NULL DEFAULT false);
        -- name: seed
        INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, %(jobs)s - 1) g RETURNING id;
        -- name: remaining
        SET LOCAL statement_timeout = '5s';
        SELECT count(*) FROM q WHERE NOT done;
        -- name: claim
        UPDATE q SET done = true
        WHERE id IN (SELECT id FROM q WHERE NOT done ORDER BY id LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
        RETURNING id;
        """)
    result = run(path, workers=2, jobs=200)
    assert result.exactly_once and result.stopped_by == "drained"
    assert result.verdict.unique_jobs_claimed == 200 and not result.claim_errors, result.claim_errors



OWN_TABLE = """
-- name: schema
CREATE TABLE q (id bigint PRIMARY KEY, done boolean NOT NULL DEFAULT false);
-- name: seed
INSERT INTO q SELECT %(key_base)s + g FROM generate_series(0, {count} - 1) g
RETURNING {key};
-- name: remaining
{remaining};
-- name: claim
UPDATE q SET done = true WHERE id IN (SELECT id FROM q WHERE NOT done LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
RETURNING id;
"""


@pytest.mark.parametrize("count,key,remaining,message", [
    # Accepted silently: a run of 250 jobs judged as one of 500, duplicates folded into one job.
    ("%(jobs)s / 2", "id", "SELECT count(*) FROM q WHERE NOT done",
     r"claim.sql:5: section 'seed' returned 10 rows for --jobs 20; it must create %\(jobs\)s jobs"),
    ("%(jobs)s", "%(key_base)s::bigint", "SELECT count(*) FROM q WHERE NOT done",
     r"claim.sql:5: section 'seed' returned 19 duplicate keys among its 20 rows"),
    # -5 ran 30 s and ended "stalled" with exit 0.
    ("%(jobs)s", "id", "SELECT -5", r"claim.sql:8: section 'remaining' must return one row with the number of "
                                    r"unfinished jobs \(0 or more, at most the 20 seeded.*it returned -5"),
    ("%(jobs)s", "id", "SELECT 21", r"it returned 21"),
    ("%(jobs)s", "id * nosuch", "SELECT 0", r"claim.sql:6: section 'seed' fails on the server: column \"nosuch\""),
])
def test_a_seed_or_remaining_outside_the_contract_is_refused_in_its_words(run, tmp_path, count, key, remaining,
                                                                           message):
    path = write(tmp_path, OWN_TABLE.format(count=count, key=key, remaining=remaining))
    with pytest.raises(SqlFileError, match=message):
        run(path, workers=1, jobs=20)
