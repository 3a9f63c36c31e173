"""From the recording task's lines to the ledger's logs: pure functions of plain data.

Each worker process appends to its own file (see `pg_claimcheck.libs._adapter.Recorder`):

    S <key> <library job id> <library attempt> <monotonic start> <seconds since the library claimed it>
    P <key> <monotonic> [<start>]                                                it stalled (blocked its loop)
    E <key> <monotonic end> [<start>]                                            it returned

(`<start>`, when given, is the place of the execution's S line among the file's S lines, from 0:
an external worker names it, as its library may run one job twice at once in one process.)

The library judges itself by its own promise (at-least-once, see each adapter's docstring), and
this module states that promise in the ledger's terms, so the SAME ledger judges it:

- every execution is a claim, made when the library claimed the job (its own time, when it
  reports one: a library that fetches a batch starts some jobs well after it claimed them);
  the ledger's attempt is the execution's ordinal among its key's executions by claim time
  (libraries number attempts differently, some not at all; the library's own job id and
  attempt are recorded in the `S` line, and not judged);
- an execution is **released** (the ledger's reap), which makes a later execution of its job a
  redelivery, by a failure of its worker the library's promise covers:
  - the worker process died (a SIGKILL, or a crash of the library's loop) while the execution
    ran, or up to the adapter's `completion_lag_s` after it returned (the library may hold
    completions in a buffer): released when the coordinator last saw the worker alive;
  - the worker stalled (blocked its event loop) while the execution ran, after it was claimed
    but before it started, or up to `completion_lag_s` after it returned: released at the
    stall's start plus `stall_release_s`, the earliest the library's lease or heartbeat can
    have expired, or, for a library whose lease runs from the claim (`claim_lease_s`: delayed_job's
    `locked_at + max_run_time`; pgqueuer's until a job's first heartbeat is written), at its claim
    plus that lease if that is earlier (not before the stall);
  - the worker's backend was terminated (or the server restarted) while the execution ran,
    within `completion_lag_s` after it returned, or within one lease after the fault (jobs it
    had fetched but not started): like a stall from the fault on, as its heartbeats and
    completions could not be written.
  Any other re-execution is a double execution: `concurrent` while an earlier one ran,
  `after-done` after an earlier one returned;
- an execution that returned after it had been released is recorded as fenced (`STALE`): the
  library had given the job up, a failure in between, so its finishing twice is allowed.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from pg_claimcheck.verdict.ledger import DONE, LIVE, STALE, Reap, WorkerLog


@dataclass
class Execution:
    worker: int
    key: int
    started: float
    claimed: float
    ended: float = math.nan
    stalled_at: float = math.nan


def parse(worker: int, text: str) -> tuple[list[Execution], list[float]]:
    """One worker's file: its executions in start order, and the times it stalled.
    A torn last line (the worker was killed while writing it) is ignored."""
    executions: list[Execution] = []
    stalls: list[float] = []
    open_by_key: dict[int, Execution] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        try:
            if fields[0] == "S" and len(fields) == 6:
                started = float(fields[4])
                ex = Execution(worker, int(fields[1]), started, started - float(fields[5]))
                executions.append(ex)
                open_by_key[ex.key] = ex
            elif fields[0] in ("P", "E") and len(fields) in (3, 4):
                # the 4th field names the start (its place among the S lines) when one worker may
                # run a job twice at once (an external worker's `run`); else the key's latest start
                ex = executions[int(fields[3])] if len(fields) == 4 else open_by_key.get(int(fields[1]))
                if fields[0] == "P":
                    stalls.append(float(fields[2]))  # the worker stalled, whichever execution it was in
                if ex is None or ex.key != int(fields[1]):
                    continue
                if fields[0] == "P":
                    ex.stalled_at = float(fields[2])
                elif math.isnan(ex.ended):
                    ex.ended = float(fields[2])
                    if open_by_key.get(ex.key) is ex:
                        del open_by_key[ex.key]
        except (ValueError, IndexError):
            continue
    return executions, stalls


def read_worker_files(directory: Path) -> dict[int, str]:
    return {int(path.stem[1:]): path.read_text(errors="replace") for path in sorted(directory.glob("w*.tsv"))}


def to_ledger(files: dict[int, str], deaths: dict[int, float], stall_release_s: float,
              terminations: dict[int, list[float]] | None = None, completion_lag_s: float = 0.0,
              lease_s: float = 0.0, claim_lease_s: float = 0.0) -> tuple[list[WorkerLog], list[Reap], list[Execution]]:
    """The ledger's logs and reaps for a library run, and every execution (for reports).
    `deaths` maps a worker to the moment it was last seen alive before it died; `terminations`
    a worker to the moments its backend was terminated (or the server restarted)."""
    executions: list[Execution] = []
    # (worker, since, started_by, at, failed): the worker's executions claimed by `started_by` that
    # had not returned by `since` are released at `at` (or at their claim plus `claim_lease_s`, if
    # earlier, but not before the failure at `failed`).
    releases: list[tuple[int, float, float, float, float]] = []
    for worker, text in files.items():
        found, stalls = parse(worker, text)
        executions += found
        releases += [(worker, t - completion_lag_s, t, t + stall_release_s, t) for t in stalls]
        releases += [(worker, t - completion_lag_s, t + lease_s, t + stall_release_s, t)
                     for t in (terminations or {}).get(worker, [])]
        if worker in deaths:
            releases.append((worker, deaths[worker] - completion_lag_s, deaths[worker], deaths[worker], deaths[worker]))
    by_key: dict[int, list[Execution]] = defaultdict(list)
    for ex in executions:
        by_key[ex.key].append(ex)
    ordinal: dict[int, int] = {}
    for runs in by_key.values():
        runs.sort(key=lambda e: e.claimed)
        for n, ex in enumerate(runs, start=1):
            ordinal[id(ex)] = n
    released_at: dict[int, float] = {}
    by_worker: dict[int, list[Execution]] = defaultdict(list)
    for ex in executions:
        by_worker[ex.worker].append(ex)
    for worker, since, started_by, at, failed in releases:
        for ex in by_worker[worker]:
            if ex.claimed <= started_by and (math.isnan(ex.ended) or ex.ended > since):
                when = min(at, max(ex.claimed + claim_lease_s, failed)) if claim_lease_s else at
                released_at[id(ex)] = min(when, released_at.get(id(ex), math.inf))
    logs: dict[int, WorkerLog] = {}
    reaps: list[Reap] = []
    for ex in executions:
        log = logs.setdefault(ex.worker, WorkerLog(worker=ex.worker))
        release = released_at.get(id(ex))
        if math.isnan(ex.ended):
            outcome = LIVE
        elif release is not None and ex.ended > release:
            outcome = STALE
        else:
            outcome = DONE
        log.record(ex.key, ordinal[id(ex)], ex.claimed, ex.ended, outcome)
        if release is not None:
            reaps.append(Reap(ex.key, ordinal[id(ex)], release))
    return [logs[w] for w in sorted(logs)], reaps, executions
