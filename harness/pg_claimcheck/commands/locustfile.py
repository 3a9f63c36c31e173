"""`claimcheck locustfile`: the path of the locustfile shipped in the package, for
`locust -f "$(claimcheck locustfile)" ...` (see docs/locust.md)."""
from __future__ import annotations

import argparse

from rich.console import Console

from pg_claimcheck.commands import VERBS
from pg_claimcheck.locust.engine import LOCUSTFILE, require_locust


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("locustfile", help=VERBS["locustfile"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    require_locust()
    print(LOCUSTFILE)
    return 0
