"""The completion's parameters as libpq takes them: text, in `$n` order, whichever way they are bound."""
from claimcheck.fastpath import Binder


def test_a_statement_of_exactly_the_two_varying_values_binds_them_as_one_with_fixed_values_does():
    rows = [(7, 1), (10**12 + 3, 2), (-1, 0)]
    pairs = Binder(("id", "attempts"), {}, ("id", "attempts"))
    assert pairs.each(rows) == [[b"7", b"1"], [b"1000000000003", b"2"], [b"-1", b"0"]]
    general = Binder(("id", "attempts", "worker"), {"worker": "w01"}, ("id", "attempts"))
    assert [bound[:2] for bound in general.each(rows)] == pairs.each(rows)
    assert general(7, 1) == [b"7", b"1", b"w01"]


def test_fixed_values_and_any_order_of_the_varying_ones():
    swapped = Binder(("attempts", "worker", "id"), {"worker": "w01", "batch": 10}, ("id", "attempts"))
    assert swapped.each([(7, 1)]) == [[b"1", b"w01", b"7"]]
