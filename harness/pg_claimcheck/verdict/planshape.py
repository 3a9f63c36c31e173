"""What a claim's plan says about it: one EXPLAIN reduced to the shape that decides whether the
claim's limiting subquery runs once (pg_claimcheck.plans.shape reads it from the server), and the plan
guard's verdict on a strategy (pg_claimcheck.probes.explain), with their JSON objects (docs/plans.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MATERIALIZE_ADVICE = ("wrap the limiting subquery in a MATERIALIZED CTE (WITH picked AS MATERIALIZED "
                      "(SELECT … LIMIT n FOR UPDATE SKIP LOCKED) … WHERE id IN (SELECT id FROM picked)), "
                      "or pick the ids first and claim them with = ANY")
NO_LOCK_WHY = "no LockRows node: the claim picks its rows without a row lock, so two workers can pick the same rows"
NO_LOCK_ADVICE = "add FOR UPDATE SKIP LOCKED to the SELECT that picks the rows (the plan guard's fix, `claimcheck explain`)"


@dataclass(frozen=True)
class PlanShape:
    """One EXPLAIN of the claim's picking statement, reduced to what decides whether it is safe."""

    signature: str
    """The tree of node types (join types, relations, parent relationships), without costs or
    estimates: two plans with one signature run the claim the same way."""
    text: str
    """EXPLAIN (COSTS OFF) as psql prints it."""
    rerun_by: tuple[str, ...] = ()
    """For each limiting node that can run more than once in one statement, the node that reruns it,
    in words ("the inner side of a Nested Loop Semi"; none when it runs once): see `rescanned`."""
    loops: tuple[str, ...] = field(default=())
    """Under EXPLAIN ANALYZE: each limiting node whose actual loops exceeded 1."""
    opaque: bool = False
    """No Limit anywhere in the plan: the claim picks its rows out of sight (in a function, whose
    statements are planned when it runs), so the shape says nothing about how it picks them."""
    locks: bool = True
    """A LockRows node in the plan: the claim locks the rows it picks. Without one, a limit that runs
    once is no safety: two workers read the same ready rows."""

    @property
    def unlocked(self) -> bool:
        return not self.locks and not self.opaque

    @property
    def rescanned(self) -> tuple[str, ...]:
        """Each limiting node that can run more than once in one statement, in a sentence."""
        return tuple(rescan_sentence(by) for by in self.rerun_by)

    @property
    def runs_once(self) -> bool:
        return not self.rescanned and not self.loops

    @property
    def why(self) -> tuple[str, ...]:
        """Why the limiting subquery can run more than once, in words: the plan's reasons, then the loops measured."""
        return (*self.rescanned, *self.loops, *((NO_LOCK_WHY,) if self.unlocked else ()))

    @property
    def advice(self) -> str | None:
        """What to change in the claim, or None when its limiting subquery runs once and locks its rows."""
        return MATERIALIZE_ADVICE if not self.runs_once else NO_LOCK_ADVICE if self.unlocked else None

    def as_dict(self) -> dict[str, Any]:
        return {"shape": self.signature, "plan": self.text.splitlines(), "rescanned_limit": list(self.rescanned),
                "limit_loops": list(self.loops), "opaque": self.opaque, "row_lock": self.locks}


def rescan_sentence(rerun_by: str) -> str:
    """A rescanned limit in words, from the node that reruns it (rerun_nodes)."""
    return (f"Limit below {rerun_by}: the limiting subquery runs again for every row, and each run "
            "locks rows the earlier ones did not take")


@dataclass(frozen=True)
class PlanVerdict:
    """What the guard found in one strategy's plan."""

    strategy: str
    section: str
    """The statement planned: `pick` when the strategy has one (it chooses the rows), else `claim`."""
    shape_ok: bool
    reasons: list[str] = field(default_factory=list)
    """Why the shape holds or fails, one finding per line."""
    plan: str = ""
    """EXPLAIN (COSTS OFF) text, as psql prints it."""
    conditions: tuple[Any, ...] = ()
    """(condition name, pg_claimcheck.plans.shape.PlanShape): the plan under each planner condition,
    EXPLAIN ANALYZEd in a rolled-back transaction (see with_conditions)."""

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "section": self.section, "shape_ok": self.shape_ok,
                "reasons": self.reasons, "plan": self.plan.splitlines(),
                "conditions": [{"condition": name, **shape.as_dict()} for name, shape in self.conditions]}

    def rescanned(self) -> list[tuple[str, PlanShape]]:
        """The conditions under which the limiting subquery can run more than once per statement."""
        return [(name, shape) for name, shape in self.conditions if not shape.runs_once]
