"""`claimcheck notify`: LISTEN/NOTIFY delivery at commit, folding, the payload limit, and the
wake-up latency of a LISTEN-driven worker against polling workers."""
from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import add_json_option, add_server_options, int_list, provide
from pg_claimcheck.contract.strategy import load_strategy
from pg_claimcheck.probes._report import maybe_write, probe_document
from pg_claimcheck.probes._work import PROBE_STRATEGY
from pg_claimcheck.probes.notify import NotifyFacts, notify_facts
from pg_claimcheck.probes.wakeup import Variant, WakeResult, run_wakeup
from pg_claimcheck.report.render import print_server, server_title
from pg_claimcheck.server.session import run_schema
from pg_claimcheck.server.topology import refuse_blocks
from pg_claimcheck.settings import positive

DEFAULT_ENQUEUES = 50
MAX_ENQUEUES = 10_000
DEFAULT_POLL_MS = "10,100,1000"
DEFAULT_FALLBACK_MS = 1_000
MAX_INTERVAL_MS = 60_000


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("notify", help=VERBS["notify"])
    p.add_argument("--enqueues", type=int, default=DEFAULT_ENQUEUES,
                   help=f"jobs enqueued per wake-up variant (default {DEFAULT_ENQUEUES})")
    p.add_argument("--poll-ms", type=int_list, default=int_list(DEFAULT_POLL_MS),
                   help=f"poll intervals of the polling workers, comma-separated (default {DEFAULT_POLL_MS})")
    p.add_argument("--fallback-ms", type=int, default=DEFAULT_FALLBACK_MS,
                   help=f"the LISTEN worker's fallback poll (default {DEFAULT_FALLBACK_MS})")
    add_json_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


def variants(args: argparse.Namespace) -> list[Variant]:
    positive("--enqueues", args.enqueues, maximum=MAX_ENQUEUES)
    positive("--fallback-ms", args.fallback_ms, maximum=MAX_INTERVAL_MS)
    for ms in args.poll_ms:
        positive("--poll-ms", ms, maximum=MAX_INTERVAL_MS)
    return [Variant("listen", args.fallback_ms), *(Variant("poll", ms) for ms in args.poll_ms)]


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    chosen = variants(args)
    strategy = load_strategy(PROBE_STRATEGY)
    with provide(args) as server:
        print_server(err, server)
        refuse_blocks(
            server.topology, "notify cannot run behind a pooler in statement mode",
            "its producer holds a transaction open across statements (the INSERT whose NOTIFY must wait for the "
            "COMMIT, the inserts that fold into one notification, a rolled-back payload)",
            "use a transaction pool (--pooler pgbouncer:transaction), where notify shows the LISTEN lost "
            "(docs/poolers.md)", worker=True)
        with run_schema(server) as (conn, run):
            err.print("  delivery at commit, folding, payload limit", highlight=False)
            facts = notify_facts(conn, run)
            err.print(f"  wake-up latency: {len(chosen)} variants x {args.enqueues} enqueues", highlight=False)
            wake = run_wakeup(conn, run, strategy, chosen, args.enqueues)
        where = server_title(server)
        for table in facts_tables(facts, where):
            console.print(table)
        console.print(wakeup_table(wake, f"wake-up latency, enqueue commit -> claim ({args.enqueues} jobs each)"))
        doc = probe_document(server, args, "notify", {**facts.as_dict(), "wakeup": [w.as_dict() for w in wake]})
        maybe_write(doc, args.json, "notify", console)
    held = facts.holds and all(w.claimed == w.enqueued for w in wake)
    return 0 if held else 1


def _ok(flag: bool, yes: str, no: str) -> Text:
    return Text(yes, style="bold green") if flag else Text(no, style="bold red")


def facts_tables(facts: NotifyFacts, where: str) -> list[Table]:
    d = facts.delivery
    timeline = Table(title=f"claimcheck notify: delivery happens at commit: {where}", header_style="bold",
                     title_justify="left")
    for name, justify in (("time (UTC)", "left"), ("+ms", "right"), ("who", "left"), ("what", "left")):
        timeline.add_column(name, justify=justify)
    for e in d.events:
        row = e.as_dict()
        style = "red" if e.who == "listener" and e.seen and e.offset_ms < d.events[-2].offset_ms else ""
        timeline.add_row(row["at"], f"{e.offset_ms:,.1f}", e.who, Text(e.what, style=style))
    after = "never" if d.after_commit_ms is None else f"{d.after_commit_ms:.2f} ms after the commit returned"
    timeline.caption = Text.assemble(_ok(d.holds, "holds", "FAILS"), f": {d.seen_before_commit} seen before the "
                                     f"commit; delivered {after}")
    folding = Table(title="folding: identical notifications in one transaction arrive once", header_style="bold",
                    title_justify="left")
    for name in ("case", "sent", "received", "as documented"):
        folding.add_column(name)
    for f in facts.folding:
        folding.add_row(f.case, ", ".join(f.sent), ", ".join(f.received) or "-", _ok(f.holds, "yes", "NO"))
    if not facts.folding:
        folding.caption = ("not measured: the listener heard nothing after the commit above "
                           "(a LISTEN lost behind a pooler)")
    p = facts.payload
    payload = Table(title="payload limit: shorter than 8000 bytes", header_style="bold", title_justify="left")
    for name in ("payload", "result"):
        payload.add_column(name)
    payload.add_row(f"{p.rejected_bytes - 1:,} bytes", _ok(p.accepted_bytes is not None, "accepted", "rejected"))
    payload.add_row(f"{p.rejected_bytes:,} bytes", Text(f"rejected: ERROR {p.sqlstate}: {p.message}", style="red")
                    if p.message else Text("accepted (a server built with a larger page?)", style="yellow"))
    return [timeline, folding, payload]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def wakeup_table(results: list[WakeResult], title: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    for name in ("worker waits by", "claimed", "p50 ms", "p99 ms", "max ms", "claim\nqueries", "empty\nclaims",
                 "claimed after\nnotify/fallback/poll"):
        table.add_column(name, justify="left" if name.startswith("worker") else "right")
    for r in results:
        s, w = r.summary(), r.woken_by
        claimed = Text(f"{r.claimed}/{r.enqueued}", style="" if r.claimed == r.enqueued else "bold red")
        table.add_row(r.variant.label, claimed, _ms(s["p50"]), _ms(s["p99"]), _ms(s["max"]), f"{r.claim_queries:,}",
                      f"{r.empty_claims:,}", f"{w['notify']}/{w['fallback']}/{w['poll']}")
    return table
