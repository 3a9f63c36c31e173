"""`claimcheck idle`: what a worker design does to a serverless compute while the queue is empty."""
from __future__ import annotations

import argparse
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import (
    add_json_option,
    add_server_options,
    int_list,
    provide,
    refuse_combined,
    refuse_pooler,
    str_list,
)
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.engine.driver import seed, validate
from pg_claimcheck.engine.wakeup import check_wakeup
from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import load_adapter
from pg_claimcheck.libs.idle_probe import run_library_idle
from pg_claimcheck.probes._report import maybe_write, probe_document
from pg_claimcheck.probes._work import PROBE_STRATEGY
from pg_claimcheck.probes.idle import WAKEUPS, Design, run_design
from pg_claimcheck.report.idle_html import write_idle_html
from pg_claimcheck.report.render import print_server, server_title
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.settings import positive
from pg_claimcheck.verdict.activity import SAMPLE_INTERVAL_S, Footprint

DEFAULT_WINDOW_S = 10.0
MAX_WINDOW_S = 24 * 3600.0
DEFAULT_WAKEUPS = "poll,drain,notify"
DEFAULT_INTERVAL_MS = {"poll": 1_000, "drain": 900_000, "notify": 900_000}
"""Seed 003's three options: poll every second; drain every 15 min; LISTEN with a 15-min fallback poll."""
MAX_INTERVAL_MS = 24 * 3600 * 1000
DEFAULT_SUSPEND_AFTER_S = 600.0
COMMON_SUSPEND_AFTER_S = 300.0
"""Always shown beside --suspend-after: a common shorter setting of serverless computes."""
STRIP_WIDTH = 48
LETTERS = {"claim poll": "P", "LISTEN fallback poll": "F", "LISTEN": "L", "scheduled drain": "D", "connect": "C",
           "reconnect": "R", "heartbeat": "H", "pool health check": "K", "NOTIFY": "N", "maintenance": "M",
           "transaction": "T",
           "autovacuum": "V"}
"""The timeline strip's letter for each cause (`?` for a query of no known cause)."""
SCOPE = ("reads pg_stat_activity for this run's own sessions only (application_name claimcheck/<run>/...), "
         "the autovacuum workers on its own tables, and counts the server's replication connections; the "
         "sampler and the coordinator, claimcheck's own sessions, are left out")


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("idle", help=VERBS["idle"])
    p.add_argument("strategy", nargs="?", default=PROBE_STRATEGY,
                   help=f"the claim the workers run: a built-in or a .sql file (default {PROBE_STRATEGY})")
    add_idle_options(p)
    p.add_argument("--wakeup", type=str_list, default=str_list(DEFAULT_WAKEUPS),
                   help=f"how a worker waits on an empty queue, a comma list compared side by side: poll (sleep "
                        f"--poll-ms, claim again), notify (LISTEN, with a fallback poll of --poll-ms), drain (a "
                        f"scheduled run every --poll-ms that claims until empty and disconnects); default "
                        f"{DEFAULT_WAKEUPS}")
    p.add_argument("--poll-ms", type=int_list,
                   help="the interval of each --wakeup (one for all, or one each): poll's sleep, notify's fallback "
                        "poll, drain's schedule (default: poll 1000, drain and notify 900000)")
    add_json_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


def add_idle_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", type=float, default=DEFAULT_WINDOW_S, metavar="SECONDS",
                   help=f"how long each design is sampled (default {DEFAULT_WINDOW_S:g}); periodic activity needs "
                        "only a few periods, not the threshold")
    p.add_argument("--suspend-after", type=float, default=DEFAULT_SUSPEND_AFTER_S, metavar="SECONDS",
                   help=f"the compute's suspend-after-idle threshold (default {DEFAULT_SUSPEND_AFTER_S:g}; "
                        f"{COMMON_SUSPEND_AFTER_S:g} is shown too)")


def thresholds(window_option: str, window_s: float, suspend_after_s: float) -> list[float]:
    """--suspend-after, then the common 300 s; the window and the threshold checked first."""
    positive(window_option, window_s, minimum=2 * SAMPLE_INTERVAL_S, maximum=MAX_WINDOW_S)
    positive("--suspend-after", suspend_after_s, minimum=SAMPLE_INTERVAL_S, maximum=MAX_WINDOW_S)
    return list(dict.fromkeys([suspend_after_s, COMMON_SUSPEND_AFTER_S]))


OWN_SESSIONS = ("reads the design's own sessions in pg_stat_activity, and behind a pooler the server sees the pooler's "
                "connections instead (shared, named by whichever client used them last, and checked by the pooler's "
                "own queries)")
"""Why idle refuses a pooler: the monitor's rule is about the server's sessions, which behind one are the pooler's."""


def designs(args: argparse.Namespace) -> list[Design]:
    unknown = [w for w in args.wakeup if w not in WAKEUPS]
    if unknown:
        raise UsageError(f"--wakeup {','.join(args.wakeup)!r}: choose from {', '.join(WAKEUPS)}")
    intervals = args.poll_ms or [DEFAULT_INTERVAL_MS[w] for w in args.wakeup]
    if len(intervals) == 1:
        intervals = intervals * len(args.wakeup)
    if len(intervals) != len(args.wakeup):
        raise UsageError(f"--poll-ms gives {len(intervals)} intervals for {len(args.wakeup)} --wakeup modes: "
                         "give one for all, or one each")
    for ms in intervals:
        positive("--poll-ms", ms, maximum=MAX_INTERVAL_MS)
    return list(dict.fromkeys(Design(w, ms) for w, ms in zip(args.wakeup, intervals)))


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    limits = thresholds("--window", args.window, args.suspend_after)
    chosen = designs(args)
    strategy = load_strategy(args.strategy)
    refuse_pooler(args, "idle", OWN_SESSIONS)
    with provide(args) as server:
        print_server(err, server)
        refuse_pooler(args, "idle", OWN_SESSIONS, server)
        if any(d.wakeup == "notify" for d in chosen):
            check_wakeup(strategy, SimpleNamespace(wakeup="notify"), server.topology)
        with run_schema(server) as (conn, run):
            seed(conn, run, strategy, 0)
            validate(run, strategy)  # a broken file is one clear error, before any window
            prints = []
            for design in chosen:
                err.print(f"  {design.label}: {args.window:g}s on an empty queue", highlight=False)
                prints.append(run_design(run, strategy, design, args.window, limits))
        title = f"claimcheck idle: {strategy.name}, {args.window:g}s per design: {server_title(server)}"
        print_idle(console, prints, title)
        doc = probe_document(server, args, "idle", {"strategy": strategy.name, "scope": SCOPE,
                                                    "idle": [f.as_dict() for f in prints]})
        _write(doc, args, console)
    return 0 if all(not lost(f) for f in prints) else 1


def run_idle(args: argparse.Namespace, console: Console, err: Console) -> int:
    """`claimcheck lib NAME --idle WINDOW`: the library's own worker at its defaults on its empty queue."""
    limits = thresholds("--idle", args.idle, args.suspend_after)
    refuse_combined(f"claimcheck lib {args.library} --idle runs the library's worker on an empty queue, with no jobs",
                    (("--faults", args.faults), ("--rate", args.rate is not None), ("--pgbench", args.pgbench),
                     ("--duration", args.duration is not None)))
    adapter = load_adapter(args.library)
    if args.idle_setting == "suspendable" and adapter.suspendable is None:
        raise UsageError(f"claimcheck lib {adapter.name} --idle-setting suspendable: no such setting is known for "
                         f"{adapter.name}; run --idle with its defaults")
    refuse_pooler(args, "idle", OWN_SESSIONS)
    with provide(args) as server:
        print_server(err, server)
        refuse_pooler(args, "idle", OWN_SESSIONS, server)
        err.print(f"  {adapter.name} {adapter.version()}: one worker, {args.idle_setting} settings, {args.idle:g}s on "
                  "an empty queue", highlight=False)
        found = run_library_idle(server, adapter, args.idle, limits, args.idle_setting)
        print_idle(console, [found], f"claimcheck lib {adapter.name} --idle {args.idle:g}: {server_title(server)}")
        if args.idle_setting == "suspendable":
            console.print(f"settings: {adapter.suspendable}", highlight=False, markup=False)
        doc = probe_document(server, args, "idle", {"library": adapter.name, "scope": SCOPE, "idle": [found.as_dict()],
                                                    "suspendable": adapter.suspendable})
        _write(doc, args, console)
    return 0


def _write(doc: dict, args: argparse.Namespace, console: Console) -> None:
    maybe_write(doc, args.json, "idle", console)
    if args.json is not None:
        console.print(f"HTML report: {write_idle_html(doc, args.json)}")


def lost(f: Footprint) -> bool:
    """A job notified after a simulated suspend that the design never claimed."""
    return f.resume is not None and f.design.startswith("LISTEN") and f.resume.job_claimed_after_s is None


def _yes(flag: bool | None) -> Text:
    return Text("?", style="yellow") if flag is None else Text("yes", style="green") if flag else Text("never",
                                                                                                      style="red")


def _wakes(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def strip(f: Footprint, width: int = STRIP_WIDTH) -> str:
    """The window as a line of characters, one per slice of time: the first letter of what happened there."""
    cells = ["·"] * width
    span = max(f.end - f.start, 1e-9)
    for a in f.activity:
        if f.start <= a.at <= f.end:
            cell = min(int((a.at - f.start) / span * width), width - 1)
            cells[cell] = LETTERS.get(a.cause, "?")
    return "".join(cells)


def idle_table(prints: list[Footprint], title: str) -> Table:
    limits = [v.suspend_after_s for v in prints[0].verdicts] if prints else []
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column("design")
    table.add_column("longest\nquiet s", justify="right")
    table.add_column("period\ns", justify="right")
    for t in limits:
        table.add_column(f"suspends\n@{t:g}s", justify="left")
        table.add_column("wakes\n/hour", justify="right")
    for f in prints:
        cells = [f.design, f"{f.quiet.longest_s:,.1f}", "-" if f.period_s is None else f"{f.period_s:,.1f}"]
        for v in f.verdicts:
            cells += [_yes(v.would_suspend), _wakes(v.wakes_per_hour)]
        table.add_row(*cells)
    return table


def print_idle(console: Console, prints: list[Footprint], title: str) -> None:
    console.print(idle_table(prints, title))
    for f in prints:
        console.print(f"[bold]{f.design}[/]: |{strip(f)}| {f.window_s:.1f}s", highlight=False)
        causes = ", ".join(f"{c} {n}" for c, n in f.causes().items()) or "none seen"
        console.print(f"  activity: {causes}", highlight=False, markup=False)
        for v in f.verdicts:
            asleep = "" if v.asleep_share is None else f"asleep {v.asleep_share:.0%} of the time; "
            console.print(f"  @{v.suspend_after_s:g}s ({v.basis}): {asleep}{v.reason}", highlight=False, markup=False)
        for note in f.notes:
            console.print(f"  note: {note}", highlight=False, markup=False)
        r = f.resume
        if r is not None:
            back = ("no reconnect" if r.reconnected_after_s is None else f"reconnected after {r.reconnected_after_s:.2f}s")
            line = f"  simulated suspend (its sessions terminated): {back} (watched {r.watched_s:.1f}s)"
            if r.job_sent:
                line += (f"; a job enqueued right after it was not taken within the watch{' (LOST)' if lost(f) else ''}"
                         if r.job_claimed_after_s is None else
                         f"; a job enqueued right after it was taken {r.job_claimed_after_s:.2f}s later "
                         f"({r.found_by})")
            console.print(line, highlight=False, markup=False)
        if f.replication_max:
            console.print(f"  note: {f.replication_max} replication connection(s) on the server would keep a compute "
                          "awake by themselves (not this run's)", highlight=False, markup=False)
    letters = ", ".join(f"{v} {k}" for k, v in LETTERS.items())
    console.print(f"[dim]timeline letters: {letters}, ? another query. The probe {SCOPE}.[/]", highlight=False)
