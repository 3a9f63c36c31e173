"""Running a spec (every permutation) on a server, in the run's own schema."""
from __future__ import annotations

import asyncio
from pathlib import Path

from pg_claimcheck.interleave.spec import DEFAULT_MAX_PERMUTATIONS, Spec, SpecError, read_spec
from pg_claimcheck.interleave.stepper import InterleavingRunner, PermutationResult
from pg_claimcheck.scenarios import SCENARIO_DIR
from pg_claimcheck.server.provision import Server
from pg_claimcheck.server.runcontext import RunContext
from pg_claimcheck.server.session import run_schema

SPEC_DIR = SCENARIO_DIR / "specs"


def load_spec(name_or_path: str) -> Spec:
    """A spec file, or a built-in by name (`seed000_naive_subquery`)."""
    path = Path(name_or_path)
    if not path.exists() and not name_or_path.endswith(".spec"):
        builtin = SPEC_DIR / f"{name_or_path.replace('-', '_')}.spec"
        if not builtin.exists():
            known = ", ".join(sorted(p.stem for p in SPEC_DIR.glob("*.spec")))
            raise SpecError(f"no spec named {name_or_path!r} and no such file; built-ins are: {known}")
        path = builtin
    return read_spec(path)


def run_spec(server: Server, spec: Spec, max_permutations: int = DEFAULT_MAX_PERMUTATIONS) -> list[PermutationResult]:
    spec.check_permutation_cap(max_permutations)
    with run_schema(server) as (_, run):
        return asyncio.run(_run_permutations(run, spec))


async def _run_permutations(run: RunContext, spec: Spec) -> list[PermutationResult]:
    async with InterleavingRunner(run, list(spec.sessions)) as runner:
        return [await runner.run(spec, permutation) for permutation in spec.iter_permutations()]
