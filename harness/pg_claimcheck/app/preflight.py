"""Every refusal of a verb's runs that is known before anything is made, said at once.

A use case calls :func:`preflight` before it provides the server, with the topology its options ask
for, so bad input costs no server start; and again only when the server it got holds more than that
(a pooler found in front of the DSN, or statement pooling), which a strategy or a setting may not run behind.
The runs themselves (pg_claimcheck.engine.driver.run_strategy) check none of it again.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pg_claimcheck.contract.strategy import Strategy
from pg_claimcheck.engine.driver import check_fail_rate
from pg_claimcheck.engine.producer import check_feedable
from pg_claimcheck.engine.wakeup import check_wakeup
from pg_claimcheck.errors import UsageError
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.topology import Topology, refuse_blocks, refuse_transaction_blocks
from pg_claimcheck.settings import RunSettings

if TYPE_CHECKING:  # a check needs no library loaded
    from pg_claimcheck.libs._adapter import LibraryAdapter


def preflight(strategies: Sequence[Strategy], grid: Sequence[RunSettings], topology: Topology, *,
              provided: bool = False) -> None:
    """Refuse, in one paragraph naming every refusal, what no run of `strategies` x `grid` could run:
    a fail rate without a `fail` section, a rate a file cannot be fed at, `--wakeup notify` where
    workers cannot LISTEN (through a pooler), and once the server is `provided` a transaction block
    behind statement pooling (its words name the pooler as it was found or started)."""
    refusals = _Refusals()
    for strategy, settings in itertools.product(strategies, grid):
        refusals.ask(check_fail_rate, strategy, settings)
        refusals.ask(check_feedable, strategy, settings)
        refusals.ask(check_wakeup, strategy, settings, topology)
    if provided:
        refusals.ask(refuse_transaction_blocks, topology, strategies, [settings.mode for settings in grid])
    refusals.say()


def preflight_on(server: Server, strategies: Sequence[Strategy], grid: Sequence[RunSettings]) -> None:
    """The preflight again once the server is provided, only if it brought what the first could not
    know: a pooler found in front of the DSN (every connection stateless), or statement pooling (no
    transaction block)."""
    topology = server.topology
    if topology.found is not None or not topology.opens_blocks(worker=True):
        preflight(strategies, grid, topology, provided=True)


def preflight_libraries(server: Server, adapters: Sequence[LibraryAdapter]) -> None:
    """What no run of these libraries could do on `server`: be set up through a statement pool found in
    front of the DSN (behind our PgBouncer only the library's workers are pooled)."""
    refusals = _Refusals()
    for adapter in adapters:
        refusals.ask(refuse_blocks, server.topology,
                     f"{adapter.name} cannot be set up through a pooler in statement mode in front of --dsn",
                     "claimcheck makes the library's database, applies its schema and enqueues through the library's "
                     "own code there, which opens transaction blocks",
                     "point --dsn at the server and give --pooler pgbouncer:statement, which puts only the "
                     "library's workers behind a statement pool")
    refusals.say()


class _Refusals:
    """The refusals of the checks asked, in order, each said once (a sweep repeats a refusal per setting)."""

    def __init__(self) -> None:
        self.said: dict[str, None] = {}

    def ask(self, check: Callable[..., None], *args: object) -> None:
        try:
            check(*args)
        except UsageError as exc:
            self.said[str(exc)] = None

    def say(self) -> None:
        """One paragraph naming every refusal (one alone reads as its check wrote it)."""
        if self.said:
            raise UsageError(" ".join(self.said))
