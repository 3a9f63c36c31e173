"""What a verb prints and writes for its runs: the table, the evidence, the JSON and HTML reports.

The CLI's verbs and the Locust master (which is not the CLI) end their runs the same way, so this
lives below both: it takes the settings and the output choices as plain values, never the command
line's `argparse.Namespace`.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping

from rich.console import Console

from pg_claimcheck.report.conclusion import as_text, conclude
from pg_claimcheck.report.html import write_html
from pg_claimcheck.report.render import document, faults_table, knee_table, print_evidence, results_table, write_json
from pg_claimcheck.report.tableafter import print_tables_after
from pg_claimcheck.server.provision import Server
from pg_claimcheck.verdict.result import RunResult

REPORT_WIDTH_WHEN_PIPED = 400
"""Tables take their natural width when output is not a terminal: a CI log does not wrap."""


def report_console() -> Console:
    """stdout for tables: a terminal's width, else (a pipe, a CI log) unsqueezed."""
    console = Console()
    return console if console.is_terminal else Console(width=REPORT_WIDTH_WHEN_PIPED)


def plain_settings(options: Mapping[str, object]) -> dict:
    """A run's options as the JSON report's `settings`: the plain values (no function, no path)."""
    return {k: v for k, v in options.items()
            if k not in ("func", "json") and isinstance(v, (str, int, float, list, type(None)))}


def report_runs(server: Server, results: list[RunResult], console: Console, *, verb: str, title: str,
                settings: dict, json_path: Path | None, wide: bool, always_write: bool, evidence: int,
                command: str | None = None, plans=None, knees=None, budget=None,
                scoreboard: dict | None = None) -> dict:
    """Print the runs' table (the columns that decide on a terminal, all of them in a pipe or with
    `wide`), each run's evidence and faults; write the JSON report and the HTML next to it when
    `json_path` is given or `always_write` (then under reports/). `plans`: the planner conditions a
    check tried (pg_claimcheck.plans.explore.ConditionOutcome), for the JSON's `conditions`; `knees`: a rate
    sweep's (pg_claimcheck.verdict.knee.Knee), printed under the table and in the JSON's `knees`; `budget`: a
    check's time budget (pg_claimcheck.engine.budget.Budget), its footer under the table and the JSON's `budget`;
    `scoreboard`: `bench --scoreboard`'s table (pg_claimcheck.libs.scoreboard.as_dict), the JSON's `scoreboard`.
    Returns the JSON document."""
    console.print(results_table(results, title, wide=wide or not console.is_terminal))
    if budget is not None:  # how a check's time budget was spent (pg_claimcheck.engine.budget)
        console.print(budget.footer(), highlight=False, markup=False, style="dim")
    if knees:
        console.print(knee_table(knees))
    for result in results:
        print_tables_after(console, result)
        print_evidence(console, result, evidence)
        if result.faults:
            console.print(faults_table(result))
    command = command or " ".join(["claimcheck", *sys.argv[1:]])
    doc = document(server, results, command=command, settings=settings, plans=plans, knees=knees,
                   looked=budget.looked if budget is not None else ())
    if budget is not None:
        doc["budget"] = budget.as_dict()
    if scoreboard is not None:
        doc["scoreboard"] = scoreboard
    if json_path or always_write:
        path = write_json(doc, json_path, verb)
        where = "" if json_path else f" (in {Path.cwd()}; --json PATH writes elsewhere)"
        console.print(f"JSON report: {path}{where}", highlight=False)
        console.print(f"HTML report: {write_html(doc, path)}", highlight=False)
    return doc


def print_conclusion(console: Console, doc: dict) -> None:
    """A verb's last lines: what held, what to pick and why, as the HTML report's summary says it."""
    console.print(as_text(conclude(doc["runs"], doc.get("knees"))))
