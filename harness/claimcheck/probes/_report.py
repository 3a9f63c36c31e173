"""The probes' JSON document: `bench`'s conventions (tool, machine, `postgres`, `settings`),
with the probe's own figures in place of `runs`."""
from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from claimcheck.server.provision import Server
from claimcheck.report.render import document, write_json


def probe_document(server: Server, settings: dict, probe: str, figures: dict) -> dict:
    """`settings`: the probe's options, as the JSON's `settings` (claimcheck.report.publish.plain_settings)."""
    doc = document(server, [], command=" ".join(["claimcheck", *sys.argv[1:]]), settings=settings)
    del doc["runs"]  # a probe has no strategy runs; its figures follow
    doc["probe"] = probe
    doc.update(figures)
    return doc


def maybe_write(doc: dict, path: Path | None, verb: str, console: Console) -> None:
    """Write the JSON report when --json was given (probes print; they do not fill reports/)."""
    if path is not None:
        console.print(f"JSON report: {write_json(doc, path, verb)}")
