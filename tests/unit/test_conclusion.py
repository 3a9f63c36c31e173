"""The conclusion `bench`, `check` and `lib` end with, and the HTML summary shows: golden text at 80 columns."""
from io import StringIO

from rich.console import Console

from pg_claimcheck.report.conclusion import as_html, as_text, conclude
from sample_reports import run_object


def rendered(runs, knees=None) -> str:
    out = StringIO()
    Console(file=out, width=80, color_system=None).print(as_text(conclude(runs, knees)))
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


BENCH = [run_object("naive-subquery", 8, 4100.0, ok=False), run_object("for-update", 8, 1200.0),
         run_object("skip-locked", 8, 3900.0), run_object("naive-subquery", 8, 2000.0, ok=False, mode="lock"),
         run_object("skip-locked", 8, 900.0, mode="lock")]


def test_bench_ends_with_what_to_pick_and_why_in_80_columns():
    assert rendered(BENCH) == """\
3 of 5 runs held exactly-once. Violated: naive-subquery (2 runs; 10 jobs handed
to more than one worker): do not use it as run, however fast.
- lease mode: pick skip-locked · b10, the fastest that held: 3,900 jobs/s at 8
  workers. The others that held, at their best: for-update · b10 1,200 jobs/s at
  8 (-69 %). Faster but violated: naive-subquery · b10 (does not count).
- lock mode: pick skip-locked · b10, the fastest that held: 900 jobs/s at 8
  workers. Faster but violated: naive-subquery · b10 (does not count)."""


def test_a_check_under_planner_conditions_says_it_held_in_each():
    runs = [run_object("skip-locked", 4, 800.0, condition="stale-stats"),
            run_object("skip-locked", 16, 3900.0, condition="as-seeded")]
    assert rendered(runs) == """\
2 of 2 runs held exactly-once.
- lease mode: skip-locked · b10 held in every run (2 planner conditions): 3,900
  jobs/s at 16 workers."""


def test_a_broken_claim_is_not_offered_as_a_pick():
    assert rendered([run_object("naive-subquery", 16, 5000.0, ok=False)]) == """\
0 of 1 run held exactly-once. Violated: naive-subquery (1 run; 5 jobs handed to
more than one worker): do not use it as run, however fast.
- lease mode: naive-subquery · b10 did not hold exactly-once in every run;
  nothing here is safe to pick as run (the evidence says how it broke)."""


def test_the_html_summary_is_green_only_when_most_runs_held():
    mostly_broken = [run_object("naive-subquery", w, 100.0, ok=False) for w in (1, 2, 4)] + [run_object()]
    assert as_html(conclude(mostly_broken)).startswith('<div class="conclusion none">')
    assert as_html(conclude(BENCH)).startswith('<div class="conclusion">')


STUCK = ("no job was finished for 30s while workers kept claiming")


def test_a_run_that_made_no_progress_names_its_cause_and_is_not_called_unsafe():
    runs = [run_object("procrastinate", 4, 1400.0, condition="nested-loop"),
            run_object("procrastinate", 16, 0.3, ok=True, condition="as-seeded", exactly_once=False,
                       outcome="no-progress", liveness=STUCK)]
    assert rendered(runs) == """\
1 of 2 runs held exactly-once. No progress: procrastinate (1 run; no job handed
out twice or lost): no job was finished for 30s while workers kept claiming. A
liveness failure, not a double claim: it shows the design neither unsafe nor
safe at these settings.
- lease mode: procrastinate · b10 made no progress in a run (a liveness failure:
  no double claim was seen, and none was ruled out). Nothing here is shown safe
  to pick as run: the cause is named above."""
    assert "do not use" not in rendered(runs) and "Violated" not in rendered(runs)


def test_a_violation_and_a_stall_in_one_report_keep_their_own_words():
    runs = [run_object("naive-subquery", 8, 4100.0, ok=False, outcome="violated"),
            run_object("procrastinate", 8, 0.5, exactly_once=False, outcome="no-progress", liveness=STUCK),
            run_object("skip-locked", 8, 3900.0, outcome="held")]
    text = " ".join(rendered(runs).split())  # unwrapped
    assert "Violated: naive-subquery (1 run; 5 jobs handed to more than one worker): do not use it" in text
    assert "No progress: procrastinate (1 run; no job handed" in text
    assert "pick skip-locked · b10" in text and "Faster but violated: naive-subquery · b10" in text
    assert "procrastinate · b10" not in text.split("Faster but violated")[1]  # slower than the pick: not listed
