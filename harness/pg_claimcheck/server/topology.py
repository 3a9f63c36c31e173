"""How a run's connections reach the server, and what they can do there: one value, decided once.

A run's connections reach the server directly (the default); or every one of them through a pooler
found in front of the DSN (pg_claimcheck.server.pooling.detect); or the workers through a PgBouncer we
started (`--pooler`, pg_claimcheck.server.pgbouncer), in front of the server or of such a pooler.
`provide_server` decides which once and carries the :class:`Topology` on the `Server`; every
`RunContext` on it carries the same value. What a connection may rely on follows from the poolers it
goes through, and is asked of the topology by name, never worked out again from a pooler's mode:

- :meth:`Topology.stateless`: through any pooler a connection keeps no session state, so it
  :meth:`~Topology.prepares` no statement by name and :meth:`~Topology.listens` to no channel;
- :meth:`Topology.opens_blocks`: behind statement pooling it opens no transaction block, so a
  design (or a step of ours) that holds a transaction across statements is refused before anything
  is made, by the refusals below, the one place that says so.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pg_claimcheck.errors import UsageError
from pg_claimcheck.server.pooling import Pooler, pooler_words
from pg_claimcheck.server.redaction import redact_dsn

if TYPE_CHECKING:
    from pg_claimcheck.contract.strategy import Strategy
    from pg_claimcheck.server.pgbouncer import PoolerSpec  # which imports the run's connections, and so this

STATEMENT = "statement"
"""The pool mode that refuses transaction blocks."""
REFUSES_BLOCKS = ("statement pooling refuses every transaction block (PgBouncer answers BEGIN with SQLSTATE 08P01 "
                  "and closes the connection)")
"""Why a transaction block cannot run there, in the words every refusal of one uses."""


@dataclass(frozen=True)
class Topology:
    """How the run's connections reach the server (see the module). It holds for every database on
    that server (a queue library's own)."""

    found: Pooler | None = None
    """A pooler found in front of the DSN by its behaviour: every connection of the run goes through it."""
    ours: Pooler | None = None
    """The PgBouncer we started (`--pooler`): the workers go through it, the others connect as they would."""
    workers: str | None = None
    """Where the workers connect instead (`ours`'s DSN, once it listens)."""

    @classmethod
    def asked(cls, spec: PoolerSpec | None) -> Topology:
        """What the options ask for, before the server is provided: our PgBouncer (`--pooler`) in front of
        the workers, or nothing (a pooler in front of the DSN is found only once it is reached)."""
        if spec is None:
            return DIRECT
        return cls(ours=Pooler(mode=spec.mode, started=True, kind="pgbouncer", pool_size=spec.pool_size,
                               evidence=f"pool_mode = {spec.mode} (asked for)"))

    @property
    def pooler(self) -> Pooler | None:
        """The pooler a report names: ours when we started one, else the one found, else None."""
        return self.ours or self.found

    def poolers(self, *, worker: bool = False) -> tuple[Pooler, ...]:
        """The poolers such a connection goes through, nearest first."""
        return tuple(p for p in ((self.ours if worker else None), self.found) if p is not None)

    def stateless(self, *, worker: bool = False) -> bool:
        """Does such a connection go through a pooler, so that it keeps no session state: no prepared
        statement, no LISTEN, no SET that outlives its transaction (see runcontext.StatelessConnection)?"""
        return bool(self.poolers(worker=worker))

    def prepares(self, *, worker: bool = False) -> bool:
        """May such a connection prepare a statement by name (and so plan it generically)? Not through a
        pooler, which may hand the next transaction to a backend that lacks it, or has another of that name."""
        return not self.stateless(worker=worker)

    def listens(self, *, worker: bool = False) -> bool:
        """Can such a connection LISTEN? Not through a pooler: a transaction pooler hands each transaction
        to any backend, which delivers a notification to nobody waiting."""
        return not self.stateless(worker=worker)

    def opens_blocks(self, *, worker: bool = False) -> bool:
        """May such a connection open a transaction block (BEGIN)? Not behind statement pooling."""
        return all(pooler.mode != STATEMENT for pooler in self.poolers(worker=worker))


DIRECT = Topology()


def refuse_blocks(topology: Topology, what: str, needs: str, fix: str, *, worker: bool = False) -> None:
    """A verb, or its setup, that holds a transaction across statements on connections of its own (or,
    with `worker`, on connections made as the workers' are), behind statement pooling: refused (exit 2)
    in one paragraph, `what` cannot run because it `needs`, and the `fix`. Behind --pooler
    pgbouncer:statement only the workers are pooled and the rest connect directly."""
    if not topology.opens_blocks(worker=worker):
        raise UsageError(f"{what}: {needs}, and {REFUSES_BLOCKS}. Nothing was run: {fix}")


def refuse_ours_in_front_of(dsn: str, found: Pooler) -> None:
    """`--pooler` in front of a pooler in statement mode: our PgBouncer's transactions (a worker's claim and
    its prelude, lock mode's BEGIN) would reach a pool that refuses them, so say so before anything is made."""
    if not Topology(found=found).opens_blocks():
        raise UsageError(f"{redact_dsn(dsn)} goes through a pooler in statement mode ({found.evidence}, and it "
                         "refuses transaction blocks); --pooler would put a PgBouncer of claimcheck's in front of "
                         "it for the workers. Leave --pooler out to run through that pool as it is, or point --dsn "
                         "at the server and give --pooler pgbouncer:statement")


PER_JOB_SECTIONS = ("complete", "fail", "extend")
"""A worker's per-job sections in lease mode: one of several statements is a transaction block of its own."""


def transaction_blocks(strategy: Strategy, mode: str) -> list[str]:
    """Why a worker of `strategy` in `mode` needs an explicit transaction block (statement pooling
    refuses every one), in words; empty when each of its statements is a transaction of its own."""
    needs = ["lock mode holds one transaction across the claim, the work and the completions"] \
        if mode == "lock" else []
    if strategy.has_pick:
        needs.append("its pick and its claim run in one transaction")
    elif len(strategy.steps("claim")) > 1:
        needs.append(f"its claim is {len(strategy.steps('claim'))} statements in one transaction")
    needs += [f"its {section} is {len(strategy.steps(section))} statements in one transaction"
              for section in PER_JOB_SECTIONS if strategy.has(section) and len(strategy.steps(section)) > 1]
    return needs


def refuse_transaction_blocks(topology: Topology, strategies: Sequence[Strategy], modes: Sequence[str]) -> None:
    """Workers behind statement pooling can run only a design whose every transaction is one statement.

    Refused (exit 2) rather than run: PgBouncer answers a BEGIN in statement mode with SQLSTATE 08P01
    and closes the client's connection, so every claim would fail before it claimed anything and the
    run would count errors instead of showing what the design does with its jobs. One paragraph names
    every strategy x mode of the run that needs a transaction block, and why."""
    if topology.opens_blocks(worker=True):
        return
    refused = [(strategy.name, mode, needs) for strategy in strategies for mode in dict.fromkeys(modes)
               if (needs := transaction_blocks(strategy, mode))]
    if not refused:
        return
    if len(refused) == 1:
        (name, mode, needs), = refused
        what = f"{name} in {mode} mode cannot run"
        fix = ("run it in lease mode (--mode lease), where a lone claim statement commits on its own"
               if mode == "lock" and len(needs) == 1 else
               "a design for statement pooling claims in one statement and finishes each job in one")
        why = "; ".join(needs)
    else:  # grouped by reason: a sweep's lock mode is one reason for every strategy
        what = f"{len(refused)} of the runs cannot run"
        fix = "leave them out (--strategies, --mode lease)"
        by_need: dict[str, dict[str, None]] = {}
        for name, _mode, needs in refused:
            for need in needs:
                by_need.setdefault(need, {})[name] = None
        why = "; ".join(f"{need.replace('its ', 'the ', 1)} ({', '.join(names)})" for need, names in by_need.items())
    pooler = next(p for p in topology.poolers(worker=True) if p.mode == STATEMENT)
    raise UsageError(f"{what} behind {pooler_words(pooler.as_dict(), False)}: {why}, and {REFUSES_BLOCKS}, so no "
                     f"claim could run. Nothing was run: {fix}, or put the workers behind a transaction or session "
                     "pool (--pooler pgbouncer:transaction)")
