"""The probes' JSON document: `bench`'s conventions (tool, machine, `postgres`, `settings`),
with the probe's own figures in place of `runs`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from pg_claimcheck.report.publish import plain_settings
from pg_claimcheck.report.render import document, write_json
from pg_claimcheck.server.provision import Server


def probe_document(server: Server, args: argparse.Namespace, probe: str, figures: dict) -> dict:
    """The probe's options `args` become the JSON's `settings`, as a run's do."""
    doc = document(server, [], command=" ".join(["claimcheck", *sys.argv[1:]]), settings=plain_settings(vars(args)))
    del doc["runs"]  # a probe has no strategy runs; its figures follow
    doc["probe"] = probe
    doc.update(figures)
    return doc


def maybe_write(doc: dict, path: Path | None, verb: str, console: Console) -> None:
    """Write the JSON report when --json was given (probes print; they do not fill reports/)."""
    if path is not None:
        console.print(f"JSON report: {write_json(doc, path, verb)}")
