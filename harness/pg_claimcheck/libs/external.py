"""Library adapters whose worker is a process in another language: the coordinator's side of the
external adapter protocol (docs/contracts.md, "External library adapters").

An external adapter is a :class:`ExternalAdapter`: its schema, its jobs and its worker loop are
driven by a script in the library's own language (`pg_claimcheck/libs/node/*.mjs` for Node), called
as `RUNTIME SCRIPT install|enqueue|work CONFIG_JSON`. The coordinator reads the library's tables
with SQL as for any adapter (sql/libs.sql); everything else crosses the protocol:

- `install` runs the library's own migrations; `enqueue` enqueues keys `first..last` through the
  library's own API and prints `{"event": "enqueued", "count": N}`;
- `work` runs the library's own worker loop and prints one JSON line per record on stdout (a file
  of the coordinator's): `hello` (library, version, protocol), then per execution `start` (key,
  the library's job id and attempt, `t`, `claimed_at`), `stall` and `end`; SIGTERM asks for the
  library's graceful stop. Diagnostics go to stderr, whose last line the report shows.

:func:`to_records` turns those lines into the recording task's lines (pg_claimcheck.libs.records),
so the same ledger judges a Node worker as a Python one. Times on the wire are seconds since the
epoch (the host's clock for `t`, the library's own, i.e. the server's, for `claimed_at`), since
every language has that clock; they become the coordinator's monotonic clock by one offset.

The runtime's packages are installed on first use with its own package manager (npm) into a
per-user cache, `~/.cache/claimcheck/<runtime>/<package>-<version>` (or $CLAIMCHECK_CACHE), pinned
to the adapter's version, and reused after.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import psycopg

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs import npm
from pg_claimcheck.libs._adapter import WORKER_GRACE_S, ForgetsJobs, LibraryAdapter, WorkerConfig
from pg_claimcheck.settings import WorkTime

PROTOCOL = 1
"""The protocol version this coordinator reads; every worker's hello says the one it speaks."""
SCRIPTS = Path(__file__).parent / "node"
STEP_TIMEOUT_S = 300
"""install and enqueue: the library's migrations, or its inserts of a large run."""


def node_url(dsn: str) -> str:
    """A libpq DSN as the URL node-postgres (pg-connection-string) reads: host (a socket directory
    too, percent-encoded), port, user, database, and the rest as query parameters (application_name,
    which names the worker's connections as every run's are). Never the password: it travels in
    PGPASSWORD (:func:`runtime_env`), as pgbench's does, not on a command line."""
    from urllib.parse import quote, urlencode

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params.pop("password", None)
    user = quote(str(params.pop("user", "")), safe="")
    host = quote(str(params.pop("host", "localhost")), safe="")
    port = params.pop("port", None)
    database = quote(str(params.pop("dbname", "")), safe="")
    query = urlencode({k: str(v) for k, v in params.items()})
    return (f"postgresql://{user + '@' if user else ''}{host}{':' + str(port) if port else ''}/{database}"
            f"{'?' + query if query else ''}")


def runtime_env(dsn: str) -> dict[str, str]:
    """The environment of a script: ours, with the DSN's password (if any) in PGPASSWORD."""
    password = psycopg.conninfo.conninfo_to_dict(dsn).get("password") if dsn else None
    return {**os.environ, **({"PGPASSWORD": str(password)} if password is not None else {})}


class ExternalAdapter(LibraryAdapter):
    """A library whose worker runs in another runtime (Node, here). Subclasses set the class
    attributes, `options()` (what the script is told besides the worker's config) and the SQL
    reads (`outcome`, `unfinished`, `final_status` as for any adapter)."""

    runtime: ClassVar[str] = "node"
    package_manager: ClassVar[str] = "npm"
    package: ClassVar[str]
    """The package in the runtime's registry."""
    registry: ClassVar[str] = "npm"
    """Where the package comes from, as the report names it beside the package."""
    pinned: ClassVar[str]
    """The version installed and run (one that runs on the machine's runtime: see each adapter)."""
    script: ClassVar[str]
    """The worker script, in pg_claimcheck/libs/node/."""
    runtime_floor: ClassVar[int] = 0
    """The runtime's lowest major version the pinned package declares (its `engines`): a Node older
    than that on PATH is replaced by Node of that major from npm (pg_claimcheck.libs.npm)."""
    peers: ClassVar[tuple[str, ...]] = ()
    """Packages (`name@version`) installed beside it that it loads but does not install itself (an
    optional peer dependency, e.g. BullMQ's `pg`)."""
    scripts: ClassVar[Path] = SCRIPTS
    """The directory of the worker script (pg_claimcheck/libs/node/ for Node)."""

    @property
    def distribution(self) -> str:  # shown with every result, as a Python library's distribution
        return f"{self.package} ({self.registry})"

    def options(self) -> dict:
        """The adapter's settings the script reads as `config.options`: these, shared by every
        script, and what an adapter adds to them."""
        return {"pool_size": 4, "enqueue_batch": 1000, "stop_grace_s": WORKER_GRACE_S}

    def version(self) -> str:
        return self.pinned

    def prepare(self) -> None:
        """The runtime and the library, installed now if they are not yet."""
        self.modules()

    # -- the runtime and the library, installed on first use --------------------------------------

    _modules: Path | None = None
    _library_sql: dict | None = None
    """What modules() and library_sql() found, kept by the instance: both run processes (the
    runtime's --version, npm; the script's `sql`), and they are asked on every spawn, step and cycle."""

    def modules(self) -> Path:
        """The cache directory holding the pinned library (installed now if it is not yet); a
        UsageError saying what is missing when the runtime, its package manager or the registry is.
        Found once per instance."""
        if self._modules is None:
            self._modules = self._find_modules()
        return self._modules

    _runtime: str | None = None

    def runtime_path(self) -> str:
        """The runtime's executable the scripts run on (found, or installed, once per instance)."""
        if self._runtime is None:
            self._runtime = self._find_runtime()
        return self._runtime

    def _find_runtime(self) -> str:
        """Node: the one on PATH when it is new enough for the pinned package's `engines`, else the
        Node npm serves as a package, in the cache (pg_claimcheck.libs.npm)."""
        return npm.node_for(self.runtime_floor, self.name, f"{self.package} {self.pinned}")

    def _find_modules(self) -> Path:
        self.runtime_path()
        return npm.install(self.package, self.pinned, self.name, also=self.peers)

    def _argv(self, command: str, config: dict) -> list[str]:
        return [self.runtime_path(), str(self.scripts / self.script), command, json.dumps(config)]

    def _step(self, command: str, dsn: str, **extra) -> list[dict]:
        config = {"dsn": node_url(dsn), "modules": str(self.modules()), "options": self.options(), **extra}
        try:
            done = subprocess.run(self._argv(command, config), stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=STEP_TIMEOUT_S, env=runtime_env(dsn))
        except subprocess.TimeoutExpired:
            raise UsageError(f"{self.package} {command} did not finish in {STEP_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise UsageError(f"{self.package} {command} failed (exit {done.returncode}): "
                             f"{done.stderr.strip()[-600:] or 'no output'}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    # -- the adapter interface ---------------------------------------------------------------------

    def spawn(self, config: WorkerConfig, stderr) -> subprocess.Popen:
        """Start one external worker: its stdout is its records file, `config.records`."""
        from pg_claimcheck.server import children

        # A process group of its own, as a Python worker's: what the library forks (sidequest's engine process)
        # goes with it when the coordinator stops a worker, dead or alive (children.stop).
        with open(config.records, "ab") as out:
            return children.start(self.worker_argv(config), stdin=subprocess.DEVNULL, stdout=out, stderr=stderr,
                                  env=runtime_env(config.dsn))

    def worker_records(self, directory: Path) -> tuple[dict[int, str], str]:
        """Every worker's protocol lines in the recording task's lines (worker -> text), and the
        version the workers said they ran (their hellos), else the pinned one."""
        from pg_claimcheck.libs.records import read_worker_files

        offset = time.time() - time.monotonic()
        files, hellos = {}, []
        for worker, said in read_worker_files(directory).items():
            files[worker], hello = to_records(said, offset)
            if hello:
                hellos.append(hello)
        spoken = sorted({str(h.get("protocol")) for h in hellos} - {str(PROTOCOL)})
        if spoken:
            raise UsageError(f"claimcheck lib {self.name}: its worker script ({self.script}) speaks protocol "
                             f"{', '.join(spoken)} of the external adapter protocol, and this claimcheck reads "
                             f"protocol {PROTOCOL} (docs/contracts.md): the script and claimcheck are of different versions")
        said = sorted({str(h.get("version")) for h in hellos if h.get("version")})
        return files, ", ".join(said) if said else self.pinned

    def said_hello(self, records: Path) -> bool:
        """The hello is a worker's first line (docs/contracts.md)."""
        try:
            with open(records, "rb") as lines:
                return b'"hello"' in lines.readline()
        except FileNotFoundError:
            return False

    def install(self, dsn: str) -> None:
        self._step("install", dsn)

    def enqueue(self, dsn: str, keys: range) -> list:
        said = self._step("enqueue", dsn, first=keys.start, last=keys.stop - 1)
        count = next((r["count"] for r in said if r.get("event") == "enqueued"), None)
        if count != len(keys):
            raise UsageError(f"{self.package} enqueue reported {count} jobs enqueued, not {len(keys)}")
        return list(keys)  # the SQL reads find a job by its key (in the payload)

    feeds = True

    @contextlib.asynccontextmanager
    async def feeder(self, dsn: str):
        """The script's `feed`: one long-lived process, sent each key on its stdin when it is due; it says
        `{"event": "ready"}` once its library can enqueue, then one `{"event": "enqueued", "key": K}` line per
        job once the library's enqueue returned."""
        config = {"dsn": node_url(dsn), "modules": str(self.modules()), "options": self.options()}
        process = await asyncio.create_subprocess_exec(*self._argv("feed", config), stdin=asyncio.subprocess.PIPE,
                                                       stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                       env=runtime_env(dsn))

        async def said(event: str, key: int | None = None) -> dict:
            while True:
                line = await process.stdout.readline()
                if not line:
                    said = (await process.stderr.read()).decode(errors="replace").strip()
                    raise UsageError(f"{self.package} feed ended (exit {await process.wait()}): {said[-600:] or 'no output'}")
                if line.startswith(b"{"):
                    record = json.loads(line)
                    if record.get("event") == event and record.get("key") == key:
                        return record

        async def defer(key: int) -> object:
            process.stdin.write(f"{key}\n".encode())
            await process.stdin.drain()
            return (await said("enqueued", key)).get("job")

        try:
            await said("ready")  # the runtime and the library started: the schedule may begin
            yield defer
        finally:
            if process.returncode is None:
                process.stdin.close()
                try:
                    await asyncio.wait_for(process.wait(), STEP_TIMEOUT_S)
                except asyncio.TimeoutError:
                    process.kill()
                    await process.wait()

    def library_sql(self) -> dict:
        """The statements the installed library's worker sends, as its script's `sql` prints them (asked once)."""
        if self._library_sql is None:
            self._library_sql = next(r for r in self._step("sql", "") if r.get("event") == "sql")
        return self._library_sql

    def worker_argv(self, config: WorkerConfig) -> list[str]:
        """The command line of one worker process (`work`); its stdout is its records file. The
        config's work time goes as the `work` object the script draws from (kind, a_ms, b_ms)."""
        work = WorkTime.parse(config.work_ms)
        said = {k: v for k, v in asdict(config).items() if k != "work_ms"}
        return self._argv("work", {**said, "dsn": node_url(config.dsn), "modules": str(self.modules()),
                                   "work": {"kind": work.kind, "a_ms": work.a_ms, "b_ms": work.b_ms},
                                   "options": self.options()})


class DeletesFinished(ForgetsJobs, ExternalAdapter):
    """An external library that deletes a job when it succeeds (graphile-worker, delayed_job): what its
    table shows done is the jobs enqueued less those left (pg_claimcheck.libs._adapter.ForgetsJobs)."""

    def enqueue(self, dsn: str, keys: range) -> list:
        found = super().enqueue(dsn, keys)
        self.seeded_now(len(keys))
        return found


def to_records(text: str, offset_s: float) -> tuple[str, dict | None]:
    """One worker's protocol lines -> the recording task's lines (pg_claimcheck.libs.records), with
    the epoch times moved to the coordinator's monotonic clock (`offset_s` = epoch - monotonic),
    and the worker's hello. A torn or unknown line is skipped, as a torn records line is."""
    lines, hello = [], None
    ordinal: dict[object, int] = {}  # the worker's `run` number -> its start's place among the S lines
    for raw in text.splitlines():
        try:
            r = json.loads(raw)
            event = r["event"]
            if event == "hello":
                hello = r
            elif event == "start":
                t = float(r["t"])
                claimed = r.get("claimed_at")
                waited = max(t - float(claimed), 0.0) if claimed is not None else 0.0
                attempt = "" if r.get("attempt") is None else int(r["attempt"])
                lines.append(f"S\t{int(r['key'])}\t{r.get('job', '')}\t{attempt}\t{t - offset_s:.6f}\t{waited:.6f}")
                ordinal[r.get("run")] = len(ordinal)
            elif event in ("stall", "end"):
                start = ordinal.get(r.get("run"), "") if r.get("run") is not None else ""
                lines.append(f"{'P' if event == 'stall' else 'E'}\t{int(r['key'])}\t{float(r['t']) - offset_s:.6f}"
                             + (f"\t{start}" if start != "" else ""))
        except (ValueError, KeyError, TypeError):
            continue
    return "".join(line + "\n" for line in lines), hello


def hello(records: Path) -> dict | None:
    """The hello of the worker whose records file is `records` (None before it said it)."""
    try:
        with open(records, errors="replace") as lines:
            for raw in lines:
                if '"hello"' in raw:
                    return to_records(raw, 0.0)[1]
    except FileNotFoundError:
        pass
    return None
