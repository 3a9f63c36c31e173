"""The npm cache (pg_claimcheck.libs.npm): an interrupted first-use install leaves nothing and says so;
one whose owner was SIGKILLed is swept by the next run of any verb, once its owner is proven dead."""
import json
import os
import socket
import subprocess
import sys

import pytest

from pg_claimcheck.libs import npm
from pg_claimcheck.server import interrupts
from pg_claimcheck.server.ownership import _start_time


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_dead_installs_partial_directory_is_swept_and_a_live_ones_is_kept(tmp_path):
    dead = tmp_path / f"pg-boss-12.38.0.partial-{dead_pid()}"
    dead.mkdir()
    (dead / "owner.json").write_text(json.dumps({"pid": int(dead.name.rsplit("-", 1)[1]),
                                                 "host": socket.gethostname(), "started": 1}))
    unrecorded = tmp_path / f"bullmq-6.7.0.partial-{dead_pid()}"  # an install of before the owner record
    unrecorded.mkdir()
    live = tmp_path / f"bullmq-6.7.0.partial-{os.getppid()}"
    live.mkdir()
    (live / "owner.json").write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname(),
                                                 "started": _start_time(os.getppid())}))
    finished = tmp_path / "bullmq-6.7.0"
    finished.mkdir()
    assert sorted(p.name for p in npm.sweep_partials(tmp_path)) == sorted([dead.name, unrecorded.name])
    assert live.exists() and finished.exists() and not dead.exists() and not unrecorded.exists()


def test_a_killed_installs_partial_directory_is_swept_by_the_next_run_of_any_verb(tmp_path, monkeypatch, capsys):
    # The signal fuzz: a SIGKILLed first `lib graphile-worker` left its `.partial-<pid>` until the next
    # npm install, which a user of `check` alone never runs.
    from pg_claimcheck import cli

    monkeypatch.setenv("CLAIMCHECK_CACHE", str(tmp_path))
    dead = tmp_path / "node" / f"graphile-worker-0.16.6.partial-{dead_pid()}"
    dead.mkdir(parents=True)
    assert cli.main(["compare", str(tmp_path / "no.json"), str(tmp_path / "no.json")]) == 2
    assert not dead.exists()
    assert f"removed {dead}, the unfinished npm install of a run that was killed" in capsys.readouterr().err


def test_an_interrupted_install_removes_its_partial_directory_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMCHECK_CACHE", str(tmp_path))
    monkeypatch.setattr(npm.shutil, "which", lambda name: "/usr/bin/npm")

    def interrupted(*args, **kwargs):
        assert (kwargs["cwd"] / "owner.json").exists()  # a SIGKILL now would leave it provably ours
        raise KeyboardInterrupt

    monkeypatch.setattr(npm.subprocess, "run", interrupted)
    interrupts.reset()
    with pytest.raises(KeyboardInterrupt):
        npm.install("bullmq", "6.7.0", "bullmq")
    assert list((tmp_path / "node").iterdir()) == []
    assert interrupts.cleaned_up() == ["the unfinished npm install of bullmq@6.7.0 removed"]
    interrupts.reset()


def test_node_is_the_machines_when_new_enough_and_otherwise_named_for_npm(monkeypatch):
    monkeypatch.setattr(npm.shutil, "which", lambda name: "/usr/bin/node")
    monkeypatch.setattr(npm, "node_major", lambda node: 22)
    assert npm.node_for(22, "pg-boss-12", "pg-boss 12.38.0") == "/usr/bin/node"
    monkeypatch.setattr(npm, "node_major", lambda node: 20)
    monkeypatch.setattr(npm, "install", lambda package, version, needed_by, also=(): npm.cache_root() / package)
    if npm.node_package() is None:
        pytest.skip("npm serves no Node binary for this machine's platform")
    said = npm.node_for(22, "pg-boss-12", "pg-boss 12.38.0")
    assert said.endswith(f"{npm.node_package()}/node_modules/{npm.node_package()}/bin/node")
