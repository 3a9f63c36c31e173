"""`claimcheck interleave SPEC`: run an interleaving spec and print its trace."""
from __future__ import annotations

import argparse

from rich.console import Console

from pg_claimcheck.commands import VERBS
from pg_claimcheck.commands._options import add_json_option, add_server_options, refuse_pooler
from pg_claimcheck.interleave.spec import DEFAULT_MAX_PERMUTATIONS
from pg_claimcheck.interleave.specs import load_spec, run_spec
from pg_claimcheck.interleave.trace import render
from pg_claimcheck.report.render import print_server, write_json
from pg_claimcheck.server.provision import provide_server
from pg_claimcheck.settings import positive


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("interleave", help=VERBS["interleave"])
    p.add_argument("spec", help="a .spec file, or a built-in (e.g. seed000_naive_subquery)")
    p.add_argument("--max-permutations", type=int, default=DEFAULT_MAX_PERMUTATIONS,
                   help=f"refuse a spec with more permutations than this (default {DEFAULT_MAX_PERMUTATIONS:,}); "
                        "without a permutation line every interleaving runs, and they multiply fast")
    add_json_option(p)
    add_server_options(p)
    p.set_defaults(func=run)


ONE_BACKEND = "runs each session's steps on a backend of its own"
"""Each session's steps must run on one backend, in order, blocking where it blocks: behind a pooler a
session's next step may reach another backend, or wait for one."""


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    positive("--max-permutations", args.max_permutations)
    refuse_pooler(args, "interleave", ONE_BACKEND)
    spec = load_spec(args.spec)
    err.print(f"Parsed spec with {len(spec.sessions)} sessions, {spec.permutation_count():,} permutation(s)")
    spec.check_permutation_cap(args.max_permutations)
    with provide_server(args.dsn, args.pg) as server:
        refuse_pooler(args, "interleave", ONE_BACKEND, server)
        print_server(err, server)
        results = run_spec(server, spec, args.max_permutations)
    for result in results:
        for line in render(result):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    doubled = [r for r in results if r.double_claims]
    if args.json:
        write_json({
            "postgres": {"version": server.version, "source": server.source},
            "spec": spec.path,
            "permutations": [{"steps": list(r.permutation), "trace": render(r),
                              "double_claimed_jobs": sorted(r.double_claims), "invalid": r.invalid,
                              "blocked_steps": r.blocked_steps} for r in results],
        }, args.json, "interleave")  # every file sink scrubs passwords
    console.print(f"{len(doubled)} of {len(results)} permutation(s) hand a job to two sessions", highlight=False)
    return 1 if doubled else 0
