import pytest

from pg_claimcheck.interleave.spec import SpecError, interleavings, parse_spec, render_spec

GOOD = """
# two sessions
jobs 5
setup { UPDATE jobs SET status = 'done' WHERE id = 5 }
session A
step  a1 { BEGIN }
claim a2 { UPDATE jobs SET status = 'running' WHERE id = (SELECT min(id) FROM jobs WHERE status = 'queued')
           RETURNING id, attempts; }
step  a3 { COMMIT }
session B
pick  b1 { SELECT id FROM jobs WHERE status = 'queued' LIMIT 2 }
claim b2 { UPDATE jobs SET status = 'running' WHERE id = ANY(%(ids)s) RETURNING id }
permutation a1 b1 a2 b2 a3
"""


def test_parses_sessions_kinds_and_permutation():
    spec = parse_spec(GOOD, "good.spec")
    assert spec.jobs == 5 and len(spec.setup) == 1
    assert [s.name for s in spec.sessions["A"]] == ["a1", "a2", "a3"]
    assert spec.steps["a2"].kind == "claim" and spec.steps["b1"].kind == "pick"
    assert spec.steps["a2"].sql.endswith("RETURNING id, attempts")
    assert spec.steps["a2"].line == 7
    assert spec.permutations == (("a1", "b1", "a2", "b2", "a3"),)


def test_rendered_spec_parses_back_to_the_same_steps():
    spec = parse_spec(GOOD)
    again = parse_spec(render_spec(spec, header="a counterexample\nreplay me"))
    assert render_spec(again) == render_spec(spec)
    assert {n: (s.kind, s.session) for n, s in again.steps.items()} == {n: (s.kind, s.session) for n, s in spec.steps.items()}


def test_all_order_keeping_interleavings():
    merged = list(interleavings([["a1", "a2"], ["b1", "b2"]]))
    assert len(merged) == 6 and len(set(merged)) == 6
    assert all(m.index("a1") < m.index("a2") and m.index("b1") < m.index("b2") for m in merged)
    assert len(list(interleavings([["a", "b", "c"], ["d", "e", "f"]]))) == 20


@pytest.mark.parametrize("text,message", [
    ("session A\nstep a1 { BEGIN\n", "spec:2: '{' is never closed"),
    ("session A\nstep a1 BEGIN }\n", "spec:2: '}' without a matching '{'"),
    ("session A\nstep a1 BEGIN\n", "spec:2: expected a { SQL } block for step a1, found 'BEGIN'"),
    ("session A\nstep a1 { BEGIN }\npermutation a1 zz\n", "spec:3: permutation names unknown step 'zz'"),
    ("step a1 { BEGIN }\n", "spec:1: 'step' before any 'session'"),
    ("session A\nstep a1 { BEGIN }\nsesion B\n", "spec:3: unknown keyword 'sesion'"),
    ("jobs many\nsession A\nstep a1 { BEGIN }\n", "spec:1: jobs must be a number"),
    ("session A\nstep a1 { BEGIN }\nstep a1 { COMMIT }\n", "spec:3: step name 'a1' is invalid or used twice"),
    ("session A\nstep a1 { }\n", "spec:2: step a1 has no SQL"),
    ("# nothing\n", "needs at least one session"),
])
def test_errors_name_the_line(text, message):
    with pytest.raises(SpecError, match=message.replace("{", r"\{").replace("(", r"\(")):
        parse_spec(text, "spec")


def test_a_nul_byte_in_a_spec_is_refused_where_it_stands(tmp_path):
    from pg_claimcheck.interleave.spec import read_spec
    path = tmp_path / "s.spec"
    path.write_text("jobs 2\nsession a\nstep s1 { SELECT 1\x00; SELECT 2 }\n")
    with pytest.raises(SpecError, match=r"s.spec:3:19: a NUL byte"):
        read_spec(path)
