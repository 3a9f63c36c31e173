"""A claim's limit, read from its text: `%(batch)s`, a LIMIT written as a number, or unknown
(issue 22, item 4: a claim that took what it asked for is never an over-claim)."""
import math

import pytest

from pg_claimcheck.contract.claimrows import ClaimRows
from pg_claimcheck.contract.limit import BATCH, LITERAL, UNKNOWN, ClaimLimit, claim_limit, literal_limits
from pg_claimcheck.contract.strategy import DEFAULT_SHAPE

HASURA = """UPDATE hdb_catalog.event_log SET locked = 't'
WHERE id IN ( SELECT l.id FROM hdb_catalog.event_log l
              WHERE l.delivered ='f' and l.error = 'f' and l.locked = 'f'
              LIMIT 100 )
RETURNING id, tries"""


@pytest.mark.parametrize("statements, expected", [
    ({"claim": HASURA}, ClaimLimit(100, LITERAL)),
    ({"claim": "UPDATE jobs SET s = 1 WHERE id IN (SELECT id FROM jobs LIMIT %(batch)s) RETURNING id"},
     ClaimLimit(7, BATCH)),
    # The pick holds the limit of a claim that takes `= ANY(%(ids)s)`.
    ({"pick": "SELECT id FROM jobs LIMIT 3 FOR UPDATE SKIP LOCKED",
      "claim": "UPDATE jobs SET s = 1 WHERE id = ANY(%(ids)s) RETURNING id"}, ClaimLimit(3, LITERAL)),
    ({"pick": "SELECT id FROM jobs LIMIT %(batch)s", "claim": "UPDATE jobs SET s = 1 WHERE id = ANY(%(ids)s)"},
     ClaimLimit(7, BATCH)),
    # A scalar subquery's LIMIT 1 beside the claim's own: judged against the larger.
    ({"claim": "UPDATE q SET s = 1 WHERE id IN (SELECT id FROM q WHERE g = (SELECT g FROM r LIMIT 1) LIMIT 5)"},
     ClaimLimit(5, LITERAL)),
    ({"claim": "SELECT id FROM q ORDER BY id FETCH FIRST 4 ROWS ONLY FOR UPDATE"}, ClaimLimit(4, LITERAL)),
    ({"claim": "SELECT id FROM q FETCH FIRST ROW ONLY"}, ClaimLimit(1, LITERAL)),
    # Nothing to read the limit from: a function call, LIMIT ALL, a computed limit.
    ({"claim": "SELECT * FROM lock_head('default', 9)"}, ClaimLimit(None, UNKNOWN)),
    ({"claim": "SELECT id FROM q LIMIT ALL"}, ClaimLimit(None, UNKNOWN)),
    ({"claim": "SELECT id FROM q LIMIT (SELECT n FROM conf)"}, ClaimLimit(None, UNKNOWN)),
    ({"claim": "SELECT id FROM q LIMIT 2 UNION ALL SELECT id FROM r LIMIT ALL"}, ClaimLimit(None, UNKNOWN)),
])
def test_claim_limit(statements, expected):
    assert claim_limit(statements, batch=7) == expected


def test_limits_in_comments_quotes_and_dollar_bodies_are_not_the_claims():
    sql = """-- LIMIT 50 in a comment
    SELECT id, 'LIMIT 60' AS "LIMIT 70" FROM q /* LIMIT 80 */ WHERE f($$ SELECT 1 LIMIT 90 $$) LIMIT 2"""
    assert literal_limits(sql) == [2]


def test_a_claim_that_took_what_it_asked_for_is_no_over_claim():
    rows = [(n, 1) for n in range(1, 101)]
    _, notes = ClaimRows(DEFAULT_SHAPE, None, 100).read(rows, 0.0)
    assert not notes.over_claims
    _, notes = ClaimRows(DEFAULT_SHAPE, None, 99).read(rows, 0.0)
    assert [(n, jobs[:2]) for _, n, jobs in notes.over_claims] == [(100, [1, 2])]
    # An unknown limit: nothing is an over-claim.
    reader = ClaimRows(DEFAULT_SHAPE, None, None)
    assert reader.limit == math.inf and not reader.read(rows, 0.0)[1].over_claims
