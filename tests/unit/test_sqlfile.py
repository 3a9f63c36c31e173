from pathlib import Path

import pytest
from pg_claimcheck.scenarios import CATALOG, builtin_names

from pg_claimcheck.contract.sqlfile import parse_sql_text
from pg_claimcheck.contract.strategy import HEADER_KEYS, load_strategy, strategy_from_file
from pg_claimcheck.errors import SqlFileError, UsageError


def strategy(text: str):
    return strategy_from_file(parse_sql_text(text, Path("q.sql"), HEADER_KEYS), name="q")


def test_sections_headers_and_trailing_semicolons():
    s = strategy("""
-- isolation: Repeatable  Read
-- a comment that is prose, not a header
-- name: claim
UPDATE jobs SET status = 'running' WHERE id = 1 RETURNING id;
-- name: complete
UPDATE jobs SET status = 'done' WHERE id = %(id)s AND attempts = %(attempts)s;
-- trailing comment
""")
    assert s.isolation == "repeatable read"
    assert s.statements["claim"] == "UPDATE jobs SET status = 'running' WHERE id = 1 RETURNING id"
    assert s.statements["complete"].endswith("attempts = %(attempts)s")
    assert s.expected is None


def test_missing_claim_is_rejected_with_the_file():
    with pytest.raises(SqlFileError, match=r"q.sql: no '-- name: claim' section"):
        strategy("-- name: complete\nUPDATE jobs SET status = 'done'")


def test_unknown_section_names_its_line():
    with pytest.raises(SqlFileError, match=r"q.sql:3: unknown section 'finish'"):
        strategy("-- name: claim\nSELECT 1\n-- name: finish\nSELECT 2")


def test_unknown_parameter_is_named_with_the_allowed_ones():
    with pytest.raises(SqlFileError, match=r"q.sql:2: section 'claim' uses unknown parameter\(s\) %\(limit\)s"):
        strategy("-- name: claim\nUPDATE jobs SET status='running' WHERE id IN (SELECT id FROM jobs LIMIT %(limit)s) RETURNING id")


def test_ids_parameter_needs_a_pick_section():
    with pytest.raises(SqlFileError, match="unknown parameter"):
        strategy("-- name: claim\nUPDATE jobs SET status='running' WHERE id = ANY(%(ids)s) RETURNING id")


def test_positional_placeholder_is_rejected():
    with pytest.raises(SqlFileError, match="positional placeholder"):
        strategy("-- name: claim\nUPDATE jobs SET status='running' WHERE id = %s RETURNING id")


def test_literal_percent_written_twice_is_fine():
    s = strategy("-- name: claim\nUPDATE jobs SET last_error = '100%%' WHERE id = 1 RETURNING id")
    assert "%%" in s.statements["claim"]


def test_duplicate_and_empty_sections():
    with pytest.raises(SqlFileError, match="appears twice"):
        strategy("-- name: claim\nSELECT 1\n-- name: claim\nSELECT 2")
    with pytest.raises(SqlFileError, match="section 'claim' has no SQL"):
        strategy("-- name: claim\n\n-- name: complete\nSELECT 1")


def test_unknown_isolation_level():
    with pytest.raises(SqlFileError, match="isolation 'snapshot'"):
        strategy("-- isolation: snapshot\n-- name: claim\nSELECT 1")


def test_every_catalog_strategy_loads_with_its_metadata():
    assert set(CATALOG) <= set(builtin_names())
    for name in builtin_names():
        s = load_strategy(name)
        assert s.name == name
        assert s.expected in ("safe", "unsafe"), name
        assert s.seed, name
    assert load_strategy("serializable").isolation == "serializable"
    assert load_strategy("select-then-update").has_pick


def test_unknown_builtin_lists_the_known_ones():
    with pytest.raises(UsageError, match="skip-locked"):
        load_strategy("skip-lokced")


def test_missing_file():
    with pytest.raises(SqlFileError, match="no such file"):
        load_strategy("/nonexistent/claim.sql")


CLAIM = "UPDATE jobs SET status = 'running' WHERE id = 1 RETURNING id, attempts;"


@pytest.mark.parametrize("text,message", [
    # A misspelled header was ignored: the run went on at READ COMMITTED and judged the wrong thing.
    (f"-- isolaton: serializable\n-- name: claim\n{CLAIM}", r"q.sql:1: unknown header 'isolaton': did you mean 'isolation'\?"),
    (f"-- expected: safe\n-- lifecycel: shared\n-- name: claim\n{CLAIM}", r"q.sql:2: .*did you mean 'lifecycle'\?"),
    (f"-- a note\n--\n-- islation: serializable\n-- name: claim\n{CLAIM}", r"q.sql:3: .*did you mean 'isolation'"),
    (f"-- name: claim\n-- isolation: serializable\n{CLAIM}", r"q.sql:2: the header 'isolation' is inside a section"),
    (f"-- name: claim\n{CLAIM}\n-- nmae: complete\nUPDATE jobs SET status = 'done' WHERE id = %(id)s",
     r"q.sql:3: unknown header 'nmae': did you mean 'name'\?"),
    # The README's example copied with its remark: the section was not recognised, and the error
    # blamed the claim for the completion's parameters.
    (f"-- name: claim\n{CLAIM}\n-- name: complete  (optional)\nUPDATE jobs SET status = 'done' WHERE id = %(id)s",
     r"q.sql:3: a section line is `-- name: SECTION` and nothing else; this one has 'complete \(optional\)'"),
    (f"-- name:\n{CLAIM}", r"q.sql:1: a section line is `-- name: SECTION`"),
])
def test_a_header_or_section_line_that_would_be_misread_is_refused_where_it_stands(text, message):
    with pytest.raises(SqlFileError, match=message):
        strategy(text)


def test_prose_below_the_headers_stays_prose():
    s = strategy(f"-- expected: safe\n--\n-- Translation: as written; timeout: none\n-- timeout: 5s\n-- name: claim\n{CLAIM}")
    assert s.expected == "safe" and s.isolation == "read committed"


@pytest.mark.parametrize("opening", ["-- Author: Jane Doe", "-- why: the fenced completion", "-- priority: high",
                                     "-- Copyright: 2024 ACME", "-- expected: safe\n-- Author: Jane"])
def test_a_word_and_colon_in_the_opening_comments_is_prose(opening):
    # Since the misspelled-header check, a file starting `-- Author: ...` was refused ("unknown header").
    s = strategy(f"{opening}\n-- name: claim\n{CLAIM}")
    assert s.isolation == "read committed"


@pytest.mark.parametrize("char,what", [("\x00", "a NUL byte"), ("\x01", "the control character '\\\\x01'"),
                                       ("\x1b", "the control character '\\\\x1b'")])
def test_a_control_character_is_refused_with_its_line_and_column(char, what):
    # A `complete` ending `... %(attempts)s<NUL> AND false;` was judged as if it ended at the NUL:
    # libpq sends the statement as a C string.
    text = (f"-- name: claim\n{CLAIM}\n-- name: complete\n"
            f"UPDATE jobs SET status = 'done' WHERE id = %(id)s AND attempts = %(attempts)s{char} AND false;")
    with pytest.raises(SqlFileError, match=rf"q.sql:4:78: {what}"):
        strategy(text)


def test_tabs_form_feeds_and_carriage_returns_are_whitespace():
    s = strategy(f"-- name: claim\r\n{CLAIM.replace(' ', chr(9))}\f\r\n")
    assert s.statements["claim"].startswith("UPDATE\tjobs")


OWN = ("-- name: schema\nCREATE TABLE q (id bigint PRIMARY KEY, note text);\n"
       "-- name: seed\nINSERT INTO q SELECT %(key_base)s + g, '{note}'\nFROM generate_series(0, %(jobs)s - 1) g\n"
       "RETURNING id;\n-- name: remaining\nSELECT count(*) FROM q;\n"
       f"-- name: claim\n{CLAIM}\n")


def test_a_lone_percent_is_refused_at_its_line_in_psycopgs_words():
    # It was reported as "section 'seed' returns no rows" (psycopg's refusal swallowed), on no line.
    with pytest.raises(SqlFileError, match=r"q.sql:4: section 'seed' has a lone '%'.*incomplete placeholder"):
        strategy(OWN.format(note="100%"))
    assert strategy(OWN.format(note="100%%")).own_schema


def test_a_misspelled_placeholder_is_placed_on_its_own_line():
    # It was placed on the section's `-- name:` line (3), not the line that has it (5).
    text = (f"-- name: claim\n{CLAIM}\n-- name: complete\nUPDATE jobs SET status = 'done'\n"
            "WHERE id = %(id)s AND attempts = %(attempt)s;")
    with pytest.raises(SqlFileError, match=r"q.sql:5: section 'complete' uses unknown parameter\(s\) %\(attempt\)s"):
        strategy(text)
