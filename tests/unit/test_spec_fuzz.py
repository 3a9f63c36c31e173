"""The spec parser under hypothesis: any text either parses or raises SpecError (one clear line,
exit 2 in the CLI), never another exception; what parses renders back to the same spec; the
permutation count is computed without enumerating, and enumeration is lazy."""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pg_claimcheck.interleave.spec import Spec, SpecError, interleavings, parse_spec, render_spec

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYWORDS = ["jobs", "setup", "session", "step", "claim", "pick", "permutation"]
names = st.sampled_from(["A", "B", "C", "a1", "a2", "b1", "b2", "x_y", "1bad", "jobs", "-", "é"])
blocks = st.sampled_from(["{ SELECT 1 }", "{ BEGIN }", "{ COMMIT; }", "{ }", "{ {nested} }", "{", "}",
                          "{ UPDATE jobs SET x = 1\n RETURNING id }", "{ ; }"])
numbers = st.sampled_from(["0", "1", "20", "1000000", "1000001", "-3", "1e3", "٣", "²", "½", "99999999999999999999"])
token = st.one_of(st.sampled_from(KEYWORDS), names, blocks, numbers, st.sampled_from(["#c\n", "\n", "\t", " "]))
spec_like = st.lists(token, max_size=40).map(" ".join)


def _parses_or_spec_error(text: str) -> Spec | None:
    try:
        return parse_spec(text, "fuzz.spec")
    except SpecError as exc:
        message = str(exc)
        assert message.startswith("fuzz.spec:") and "\n" not in message.split(": ", 1)[0]
        return None


@FUZZ
@given(st.text(max_size=300))
def test_any_text_parses_or_is_a_spec_error(text):
    _parses_or_spec_error(text)


@FUZZ
@given(spec_like)
def test_keyword_soup_parses_or_is_a_spec_error(text):
    spec = _parses_or_spec_error(text)
    if spec is None:
        return
    again = parse_spec(render_spec(spec), "again.spec")
    assert again.jobs == spec.jobs and again.permutations == spec.permutations
    assert {k: [(s.name, s.kind) for s in v] for k, v in again.sessions.items()} == \
           {k: [(s.name, s.kind) for s in v] for k, v in spec.sessions.items()}
    assert spec.permutation_count() >= 1


@st.composite
def well_formed(draw):
    sessions = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
    if not any(sessions):
        sessions[0] = 1
    lines = [f"jobs {draw(st.integers(1, 50))}"]
    for i, n in enumerate(sessions):
        lines.append(f"session S{i}")
        lines += [f"{draw(st.sampled_from(['step', 'claim', 'pick']))} s{i}_{j} {{ SELECT {j} }}" for j in range(n)]
    return "\n".join(lines) + "\n", sessions


@FUZZ
@given(well_formed())
def test_count_matches_lazy_enumeration(case):
    text, sizes = case
    spec = parse_spec(text, "ok.spec")
    expected = math.factorial(sum(sizes)) // math.prod(math.factorial(n) for n in sizes)
    assert spec.permutation_count() == expected
    if expected <= 5000:
        perms = list(spec.iter_permutations())
        assert len(perms) == len(set(perms)) == expected
        for perm in perms:  # every session's steps keep their order
            for i, n in enumerate(sizes):
                assert [p for p in perm if p.startswith(f"s{i}_")] == [f"s{i}_{j}" for j in range(n)]


def test_a_huge_spec_is_counted_and_refused_without_enumerating():
    text = "".join(f"session S{i}\n" + "".join(f"step s{i}_{j} {{ SELECT 1 }}\n" for j in range(6))
                   for i in range(4))
    spec = parse_spec(text, "huge.spec")
    assert spec.permutation_count() == 2_308_743_493_056
    first = next(spec.iter_permutations())  # lazy: the first arrives at once
    assert first == tuple(f"s{i}_{j}" for i in range(4) for j in range(6))
    with pytest.raises(SpecError, match=r"huge.spec: 2,308,743,493,056 interleavings .* --max-permutations"):
        spec.check_permutation_cap(10_000)


def test_one_long_session_does_not_recurse():
    text = "session A\n" + "".join(f"step a{j} {{ SELECT 1 }}\n" for j in range(3000))
    (only,) = list(itertools.islice(parse_spec(text).iter_permutations(), 2))
    assert len(only) == 3000


def test_interleavings_of_nothing_is_one_empty_permutation():
    assert list(interleavings([[], []])) == [()]


@FUZZ
@given(well_formed(), st.lists(st.tuples(st.floats(0, 1), token), max_size=3), st.data())
def test_a_mutated_good_spec_parses_or_is_a_spec_error(case, edits, data):
    text, _ = case
    for where, inserted in edits:
        at = int(where * len(text))
        text = text[:at] + " " + inserted + " " + text[at:]
    if data.draw(st.booleans()):  # and sometimes a permutation line, right or wrong
        names = [w for w in text.split() if "_" in w and w[0] == "s"]
        text += "\npermutation " + " ".join(data.draw(st.lists(st.sampled_from(names or ["zz"]), max_size=6)))
    spec = _parses_or_spec_error(text)
    if spec is not None:
        assert spec.permutation_count() == sum(1 for _ in itertools.islice(spec.iter_permutations(), 10_001)) \
            or spec.permutation_count() > 10_000
