"""The completion's parameters as libpq takes them: text, in `$n` order, whichever way they are bound."""
from hypothesis import given, settings
from hypothesis import strategies as st

from pg_claimcheck.engine.fastpath import Binder

PAIR = {"id": 0, "attempts": 1}  # a (key, attempt) row


def bound(binder: Binder, rows) -> list[list[bytes]]:
    return [list(parameters) for parameters in binder.pairs(rows)]


def test_a_statement_of_exactly_the_two_varying_values_binds_them_as_one_with_fixed_values_does():
    rows = [(7, 1), (10**12 + 3, 2), (-1, 0)]
    pairs = Binder(("id", "attempts"), {}, PAIR, 2)
    assert bound(pairs, rows) == [[b"7", b"1"], [b"1000000000003", b"2"], [b"-1", b"0"]]
    general = Binder(("id", "attempts", "worker"), {"worker": "w01"}, PAIR, 2)
    assert [parameters[:2] for parameters in bound(general, rows)] == bound(pairs, rows)
    assert bound(general, [(7, 1)])[0] == [b"7", b"1", b"w01"]


def test_fixed_values_and_any_order_of_the_varying_ones():
    swapped = Binder(("attempts", "worker", "id"), {"worker": "w01", "batch": 10}, PAIR, 2)
    assert bound(swapped, [(7, 1)]) == [[b"1", b"w01", b"7"]]


# A claim's rows as libpq returns them: integer keys and attempts in their text form, possibly with
# more columns after them; the completion's parameters in any order, repeated or not, with fixed ones.
integer_text = st.integers(-(2**63), 2**63 - 1).map(lambda n: str(n).encode())
claim_rows = st.integers(2, 4).flatmap(lambda width: st.tuples(
    st.just(width), st.integers(1, width - 1), st.lists(st.tuples(*[integer_text] * width), max_size=12)))
parameters = st.lists(st.sampled_from(["id", "attempts", "worker", "batch"]), max_size=5)


@settings(max_examples=200)
@given(claim=claim_rows, params=parameters)
def test_binding_a_claims_own_text_sends_what_binding_its_numbers_sends(claim, params):
    width, at, rows = claim  # `at`: the attempt's column
    fixed = {"worker": "w01", "batch": 10}
    from_numbers = Binder(tuple(params), fixed, PAIR, 2).pairs([(int(r[0]), int(r[at])) for r in rows])
    from_text = Binder(tuple(params), fixed, {"id": 0, "attempts": at}, width)(rows)
    assert from_text == from_numbers


def test_a_lone_parameter_is_bound_as_a_one_value_sequence():
    assert Binder(("id",), {}, PAIR, 2)([(b"7", b"1")]) == [(b"7",)]
