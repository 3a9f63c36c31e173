"""`claimcheck lib NAME --idle WINDOW`: a queue library's own worker on its empty queue, with its documented
defaults, sampled as `claimcheck idle` samples a built-in design (pg_claimcheck.engine.monitor).

The library is installed in a database of the run's own (pg_claimcheck.libs.database), one worker process runs
its loop with `WorkerConfig.idle` set (the adapter passes none of its own knobs: the library's defaults), and
the sampler reads that database's sessions of the run. The worker's connections all carry one role (`w00`), so
causes come from the query text (pg_claimcheck.verdict.activity.cause_of). When the library would let the compute
suspend while holding sessions, the suspend is simulated as for a built-in: its sessions are terminated, one
job is enqueued through the library's own API, and the probe watches for a reconnect and the job's execution.
"""
from __future__ import annotations

import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

from pg_claimcheck.engine.monitor import Sampler, suspend
from pg_claimcheck.errors import ServerError
from pg_claimcheck.libs._adapter import STOP_GRACE_S, LibraryAdapter, WorkerConfig
from pg_claimcheck.libs.database import run_database
from pg_claimcheck.server import children, interrupts
from pg_claimcheck.server.leftovers import records_dir
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.session import run_id_from_env
from pg_claimcheck.verdict.activity import Footprint, Sample, footprint

ROLE = "w00"
START_TIMEOUT_S = 60.0
"""How long the library's worker may take to open its first connection (a Node runtime starts slowly)."""
SETTLE_S = 2.0
"""After its first connection: the library's start-up (schema checks, registration) before the window opens."""
STDERR_SHOWN = 400


def run_library_idle(server: Server, adapter: LibraryAdapter, window_s: float, thresholds: list[float],
                     setting: str = "defaults") -> Footprint:
    """One worker of the library with `setting` (`defaults`, or `suspendable`: WorkerConfig.idle) on its empty queue."""
    run_id = run_id_from_env()
    with run_database(server, run_id, adapter.name) as run, records_dir(run_id) as tmp, ExitStack() as stack:
        dsn = run.role_dsn("coordinator")
        adapter.install(dsn)
        config = WorkerConfig(library=adapter.name, dsn=run.role_dsn(ROLE, worker=True), worker=0,
                              records=str(Path(tmp) / "w00.tsv"), stall_flag=str(Path(tmp) / "stall-w00"),
                              work_ms="0", stall_s=0.0, faults=False, idle=setting)
        err_path = Path(tmp) / "w00.err"
        with open(err_path, "wb") as err, interrupts.deferred():  # kept before a Ctrl-C is raised
            proc = adapter.spawn(config, err)
            stack.callback(children.stop, [proc], within_s=STOP_GRACE_S)
        sampler = Sampler(run, stack, database=run.schema)
        samples: list[Sample] = []
        sampler.sample_for(START_TIMEOUT_S, samples, until=lambda seen: bool(seen[-1].sessions) or not children.running(proc))
        _alive(proc, adapter, err_path, samples)
        time.sleep(SETTLE_S)
        samples = [sampler.take()]
        window_start = samples[0].at
        sampler.sample_for(window_s, samples)
        _alive(proc, adapter, err_path, samples)
        label = f"{adapter.name} {adapter.version()}" + (" suspendable" if setting == "suspendable" else "")
        fp = footprint(label, samples, window_start, thresholds)
        if fp.verdicts[0].would_suspend and samples[-1].sessions:
            with run.connect("coordinator", in_schema=False) as conn:
                def send() -> float:
                    adapter.enqueue(dsn, range(1, 2))
                    return time.monotonic()

                def taken() -> tuple[float, str] | None:
                    seen = adapter.outcome(conn)
                    return (time.monotonic(), "executed") if seen.done + seen.running + seen.failed else None

                resume = suspend(sampler, run, [ROLE], samples[:], send, taken, gone=lambda: not children.running(proc))
            fp = footprint(label, samples, window_start, thresholds, resume=resume)
        if resume_exited(fp):
            fp.notes.append(f"its worker process exited when its connections were closed: {_tail(err_path)}")
        return fp


def resume_exited(fp: Footprint) -> bool:
    return fp.resume is not None and fp.resume.exited


def _alive(proc: subprocess.Popen, adapter: LibraryAdapter, err_path: Path, samples: list[Sample]) -> None:
    if not children.running(proc):
        children.stop([proc], ask=None, within_s=0)  # what its library started goes with it; its exit code known
        raise ServerError(f"{adapter.name}'s worker exited (code {proc.returncode}) before its idle window ended: "
                          f"{_tail(err_path) or 'it said nothing'}")
    if not any(s.sessions for s in samples):
        raise ServerError(f"{adapter.name}'s worker opened no connection within {START_TIMEOUT_S:g}s")


def _tail(path: Path) -> str:
    text = path.read_text(errors="replace").strip() if path.exists() else ""
    return " ".join(text.splitlines()[-2:])[-STDERR_SHOWN:]
