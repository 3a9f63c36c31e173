"""What the CLI shows while a verb runs, on stderr: the server, a live line per run (label, bar, jobs
done and the current rate, elapsed time) and one line per finished run or planner condition.

:class:`ProgressEvents` listens to a use case's events (pg_claimcheck.app.events.RunEvents, which it
matches structurally: this layer sits below `app`).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

from pg_claimcheck.report.render import print_server
from pg_claimcheck.server.provision import Server
from pg_claimcheck.settings import RunSettings
from pg_claimcheck.verdict.liveness import HELD, NO_PROGRESS, VIOLATED, WORDS
from pg_claimcheck.verdict.result import RunResult

RATE_WINDOW_S = 1.0
"""The progress line's "now" rate is over this trailing window: the average hides a stall."""


def progress_bar(err: Console) -> Progress:
    """The live line of a run: label, bar, jobs done and the current rate, elapsed time. It fits 80
    columns: the description gives way (with an ellipsis) before the figures do."""
    return Progress(TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=2)),
                    BarColumn(bar_width=None, table_column=Column(ratio=1)),
                    TextColumn("{task.fields[status]}", table_column=Column(no_wrap=True)),
                    TimeElapsedColumn(), console=err, transient=True, auto_refresh=False, expand=True)


class ProgressEvents:
    """The use cases' events on a console (stderr for the CLI)."""

    def __init__(self, err: Console) -> None:
        self.err = err
        self._sweep: Progress | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._jobs = 0
        self._window: deque[tuple[float, int]] = deque()

    def server_ready(self, server: Server) -> None:
        print_server(self.err, server)

    def note(self, text: str) -> None:
        self.err.print(text, highlight=False)

    @contextmanager
    def sweeping(self) -> Iterator[None]:
        """One live display for a sweep's runs, each run a line of it while it runs."""
        with progress_bar(self.err) as self._sweep:
            try:
                yield
            finally:
                self._sweep = None

    @contextmanager
    def running(self, label: str, settings: RunSettings, status: str) -> Iterator[None]:
        """The run's live line, from its start to its end (however it ends): transient, it leaves
        nothing behind on a terminal. In a sweep, a line of the sweep's display; else a display of its own."""
        if status == "enqueuing":  # a library's run: what it is about to do, before the live line
            self.err.print(f"  {label}: enqueuing {settings.jobs:,} jobs, then {settings.workers} worker(s)",
                           highlight=False)
        self._jobs = settings.jobs
        self._window.clear()
        with nullcontext(self._sweep) if self._sweep is not None else progress_bar(self.err) as bar:
            self._bar, self._task = bar, bar.add_task(label, total=settings.jobs, status=status)
            bar.refresh()
            try:
                yield
            finally:
                bar.remove_task(self._task)
                self._bar = self._task = None

    def progress(self, claims: int, elapsed: float) -> None:
        """Jobs drained (claims, capped at the seeded count), the current rate and, via the elapsed
        column, the time: what someone watching a long run needs to see it is still moving."""
        if self._bar is None or self._task is None:
            return
        window, jobs = self._window, self._jobs
        window.append((elapsed, claims))
        while len(window) > 2 and elapsed - window[0][0] > RATE_WINDOW_S:
            window.popleft()
        then, before = window[0]
        rate = (claims - before) / (elapsed - then) if elapsed > then else 0.0
        self._bar.update(self._task, completed=min(claims, jobs),
                         status=f"{min(claims, jobs):,}/{jobs:,} jobs · {rate:,.0f}/s")
        self._bar.refresh()

    def run_status(self, status: str) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, status=status)
            self._bar.refresh()

    def run_finished(self, label: str, result: RunResult) -> None:
        self.err.print(f"  {label}: {result_line(result)}")

    def conditions_started(self, label: str, count: int) -> None:
        self.err.print(f"  {label}: {count} planner conditions (docs/plans.md)", highlight=False)

    def condition_finished(self, outcome) -> None:
        """`outcome`: a pg_claimcheck.plans.explore.ConditionOutcome (a layer above this one)."""
        self.err.print(f"    {outcome.condition.name}: {condition_line(outcome)}", highlight=False, soft_wrap=True)


def result_line(result: RunResult) -> str:
    """A finished run in one line: jobs, time, rate, pgbench's parity and the verdict."""
    figures = f"{result.jobs_done:,} done in {result.elapsed_s:.2f}s ({result.throughput_jobs_per_s:,.0f} jobs/s)"
    if result.library is not None:
        parity = "" if result.pgbench is None else (
            f" · its SQL through pgbench {result.pgbench.jobs_per_s:,.0f} jobs/s "
            f"({result.pgbench.jobs_done:,} done), ratio {result.pgbench_ratio or 0:.2f}")
        status = "[green]exactly-once[/]" if result.exactly_once else "[red]violated[/]"
        return f"{figures}, {result.verdict.redeliveries} redeliveries{parity} {status}"
    status = {HELD: "[green]exactly-once[/]", VIOLATED: "[red]violated[/]",
              NO_PROGRESS: "[yellow]no progress[/]"}[result.outcome]
    parity = "" if result.pgbench is None else (
        f" · pgbench {result.pgbench.jobs_per_s:,.0f} jobs/s, ratio {result.pgbench_ratio:.2f}"
        + _client_cpu(result))
    return f"{figures}{parity} {status}"


def _client_cpu(result: RunResult) -> str:
    """What each job cost the client's CPU, ours against pgbench's: says whether a low ratio is our
    driver's cost (a 2-core machine gives the server what the clients do not take)."""
    workers, jobs = result.cpu_s.get("workers"), result.jobs_done
    if workers is None or not jobs or not result.pgbench or not result.pgbench.jobs_done:
        return ""
    return (f" (client CPU per job: {workers / jobs * 1e6:.0f} us, pgbench's "
            f"{result.pgbench.cpu_s / result.pgbench.jobs_done * 1e6:.0f} us)")


def condition_line(outcome) -> str:
    """A planner condition's outcome after its name: its run's figures and verdict, or why it had none."""
    r = outcome.result
    if r is None:
        return outcome.verdict + (f" (same plan as {outcome.same_as})" if outcome.same_as else "") + \
            (f": {outcome.note}" if outcome.note else "")
    return (f"{r.jobs_done:,} done in {r.elapsed_s:.2f}s, {WORDS[r.outcome]} "
            f"({outcome.seconds:.1f}s with its tables and plan)")
