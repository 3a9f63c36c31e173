"""What a use case says while it runs, as events: the server it got, each run's start, progress and end,
each planner condition's outcome. The use case only reports them; who listens decides what is shown.

The CLI listens with `pg_claimcheck.report.progress.ProgressEvents` (a live line on stderr, one line per
finished run); `api.run` and the pytest plugin with :class:`Silent`. A listener is any object with
these methods (a structural type: the one in `report/` does not import this module, which sits above it).
"""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pg_claimcheck.plans.explore import ConditionOutcome
    from pg_claimcheck.server.provision import Server
    from pg_claimcheck.settings import RunSettings
    from pg_claimcheck.verdict.result import RunResult


class RunEvents(Protocol):
    """The events of a use case, in the order they come."""

    def server_ready(self, server: Server) -> None:
        """The server is provided (started, or found at the DSN), before anything is made on it."""

    def note(self, text: str) -> None:
        """A line about what comes next (a repetition of a sweep, a planning pass)."""

    def sweeping(self) -> AbstractContextManager[None]:
        """A sweep of runs in one schema (pg_claimcheck.app.runs.run_all), from its first run to its last."""

    def running(self, label: str, settings: RunSettings, status: str) -> AbstractContextManager[None]:
        """A run, from its start to its end however it ends (then `run_finished`, if it was judged);
        `status` is its first step (`seeding`, or `enqueuing` for a library's)."""

    def progress(self, claims: int, elapsed: float) -> None:
        """The running run's claims so far, `elapsed` seconds after its workers were released."""

    def run_status(self, status: str) -> None:
        """The running run moved to another step (pgbench's pass after it)."""

    def run_finished(self, label: str, result: RunResult) -> None:
        """A run is judged."""

    def conditions_started(self, label: str, count: int) -> None:
        """A setting is about to be tried under `count` planner conditions (docs/plans.md)."""

    def condition_finished(self, outcome: ConditionOutcome) -> None:
        """One planner condition tried: its run's verdict, or why it had none."""


class Silent:
    """Listens to nothing: what `api.run` and the pytest plugin report is the result itself."""

    def server_ready(self, server: Server) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def sweeping(self) -> AbstractContextManager[None]:
        return nullcontext()

    def running(self, label: str, settings: RunSettings, status: str) -> AbstractContextManager[None]:
        return nullcontext()

    def progress(self, claims: int, elapsed: float) -> None:
        pass

    def run_status(self, status: str) -> None:
        pass

    def run_finished(self, label: str, result: RunResult) -> None:
        pass

    def conditions_started(self, label: str, count: int) -> None:
        pass

    def condition_finished(self, outcome: ConditionOutcome) -> None:
        pass
