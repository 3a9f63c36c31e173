"""The reading of a claim's rows: the `map` reading of the common claim (`ClaimRows.plain`)
must say exactly what the general reading says, notes included, for any rows a claim can return."""
import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pg_claimcheck.contract.claimrows import ClaimRows
from pg_claimcheck.contract.keys import KeySpace
from pg_claimcheck.contract.strategy import DEFAULT_SHAPE, shape_of

BATCH = 3


def general(reader: ClaimRows) -> ClaimRows:
    out = ClaimRows(reader.shape, reader.keys, reader.limit)
    out.plain = False
    return out


def reading(reader: ClaimRows, rows):
    try:
        return reader.read(rows, 1.5)
    except ValueError as exc:
        return str(exc)


# A value as libpq's text (bytes) or psycopg's int; None is SQL NULL.
number = st.one_of(st.integers(-3, 30), st.integers(0, 10**12))
text = number.map(lambda n: str(n).encode())
value = st.one_of(number, text, number, text, st.none())  # NULL in one draw of five


@settings(max_examples=300)
@example(rows=[(b"-1", b"1")], keys=None)  # a key never seeded
@example(rows=[(b"2", None)], keys=None)  # a NULL attempt
@example(rows=[(None, b"1")], keys=None)  # a NULL key
@example(rows=[(b"1", b"1")] * (BATCH + 1), keys=None)  # an over-claim
@given(rows=st.lists(st.tuples(value, value), max_size=BATCH + 2),
       keys=st.sampled_from([None, KeySpace(1, 1000)]))
def test_the_plain_reading_is_the_general_reading(rows, keys):
    reader = ClaimRows(DEFAULT_SHAPE, keys, BATCH)
    assert reader.plain
    plain, general_reading = reading(reader, rows), reading(general(reader), rows)
    if isinstance(plain, tuple):
        jobs, notes = plain
        # Notes say which reading it was: the plain one only for numbers, no NULL, nothing to note
        # (then a completion may send the claim's own values back, see fastpath.Binder).
        assert notes.plain == (None not in {v for row in rows for v in row} and not any(
            (notes.unknown_keys, notes.over_claims)) and len(rows) <= BATCH)
        plain = jobs, dataclasses.replace(notes, plain=False)
    assert plain == general_reading


@pytest.mark.parametrize("shape, keys", [
    (dataclasses.replace(DEFAULT_SHAPE, key_is_int=False), None),
    (dataclasses.replace(DEFAULT_SHAPE, attempt_index=None), None),
    (dataclasses.replace(DEFAULT_SHAPE, columns=("id", "attempts", "max_attempts"), max_attempts_index=2), None),
    (dataclasses.replace(DEFAULT_SHAPE, columns=("id", "attempts", "lease_until"), lease_index=2), None),
    (DEFAULT_SHAPE, KeySpace.of([5, 7, 9], key_is_int=True)),
])
def test_claims_with_more_to_read_take_the_general_reading(shape, keys):
    assert not ClaimRows(shape, keys, BATCH).plain


def test_what_the_plain_reading_hands_on():
    reader = ClaimRows(DEFAULT_SHAPE, None, BATCH)
    jobs, notes = reader.read([(b"7", b"1"), (b"8", None)], 0.0)
    assert jobs == [(7, 1), (8, 0)]  # a NULL attempt reads as 0, through the general reading
    assert not notes.plain
    assert reader.read([(b"7", b"1")], 0.0)[1].plain
    jobs, notes = reader.read([(b"-4", b"2")], 0.0)
    assert jobs == [(-4, 2)] and notes.unknown_keys == {-4: "-4"}
    jobs, notes = reader.read([(b"1", b"1")] * (BATCH + 1), 2.0)
    assert notes.over_claims == [(2.0, BATCH + 1, [1] * (BATCH + 1))]


class Column:
    def __init__(self, name: str, type_code: int) -> None:
        self.name, self.type_code = name, type_code


@pytest.mark.parametrize("attempt_type, is_int", [(23, True), (21, True), (20, True), (25, False), (1700, False)])
def test_only_an_integer_attempt_column_is_read_as_its_own_text(attempt_type, is_int):
    # int4, int2, int8: the server's text is the number's own, so a completion may send it back as it
    # came (fastpath.Binder); text and numeric are bound from the number read.
    shape = shape_of([Column("id", 20), Column("attempts", attempt_type)])
    assert shape.attempt_index == 1 and shape.attempt_is_int is is_int
    assert not shape_of([Column("id", 20)]).attempt_is_int


def test_a_reader_of_a_run_that_stops_at_its_proof_reads_only_the_rows_an_over_claim_asked_for():
    # The count proves the over-claim; the rest would be read, recorded and judged row by row (issue 35).
    rows = [(str(n).encode(), b"1") for n in range(1, 1001)]
    jobs, notes = ClaimRows(DEFAULT_SHAPE, None, BATCH, cut=True).read(rows, 2.0)
    assert jobs == [(n, 1) for n in range(1, BATCH + 1)]
    assert notes.over_claims == [(2.0, 1000, list(range(1, BATCH + 1))[:20])]
    assert len(ClaimRows(DEFAULT_SHAPE, None, BATCH).read(rows, 2.0)[0]) == 1000  # bench, --drain: every row
