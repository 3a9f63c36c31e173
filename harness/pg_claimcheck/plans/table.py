"""The planner conditions in the terminal: each condition tried, its plan shape and its verdict,
and for a violation the plan itself, the evidence and what to change (docs/plans.md)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from pg_claimcheck.plans.explore import ConditionOutcome

VERDICT_STYLES = {"held": "bold green", "VIOLATED": "bold red", "no progress": "bold yellow", "skipped": "dim",
                  "not applicable": "dim",
                  "not run": "dim"}


def plan_words(outcome: "ConditionOutcome") -> str:
    """The plan's shape in a few words: how the limiting subquery runs."""
    shape = outcome.shape
    if shape is None:
        return "-"
    if shape.rerun_by:
        return f"Limit below {shape.rerun_by[0]}: runs per row"
    join = next((part for part in ("Hash Join", "Merge Join", "Nested Loop") if part in shape.signature), None)
    return ("no row lock" if shape.unlocked else "limit runs once") + (f" ({join})" if join else "")


def overlap_words(outcome: ConditionOutcome) -> str:
    """A condition's run's claims that overlapped another claim, of its claims (pg_claimcheck.verdict.power)."""
    power = outcome.result.power if outcome.result is not None else None
    return "-" if power is None else f"{power.overlapping:,} of {power.claims:,}"


def conditions_table(outcomes: list["ConditionOutcome"], title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    several = len({o.setting for o in outcomes}) > 1
    if several:
        table.add_column("setting")
    for name in ("condition", "plan", "verdict", "overlapping claims", "evidence"):
        table.add_column(name, no_wrap=name == "verdict")
    for o in outcomes:
        verdict = Text(o.verdict, style=VERDICT_STYLES[o.verdict])
        if o.same_as:
            verdict.append(f" (plan of {o.same_as})", style="dim")
        cells = [Text(o.condition.name), Text(plan_words(o)), verdict, Text(overlap_words(o)),
                 Text("\n".join(o.evidence() or ([o.note] if o.note else [])))]
        if several:
            cells.insert(0, Text(o.setting))
        table.add_row(*cells)
    return table


def print_conditions(console: Console, outcomes: list["ConditionOutcome"], strategy: str) -> None:
    """The table, then the plan of each violated condition with what to change."""
    console.print(conditions_table(outcomes, f"{strategy} under planner and timing conditions (docs/plans.md)"))
    for o in outcomes:
        if not o.failed or o.shape is None:
            continue
        body = Text(o.shape.text + "\n\n")
        body.append("\n".join(o.evidence()) + "\n", style="red")
        body.append(o.condition.summary + "\n", style="dim")
        if o.shape.advice:
            body.append("\n".join(o.shape.why) + "\nFix: " + o.shape.advice, style="yellow")
        console.print(Panel(body, title=f"{strategy}: VIOLATED under {o.condition.name}: the claim's plan",
                            title_align="left", expand=False))
