"""pg_claimcheck.server.children: every child stopped one way, nothing of it left, dying with us.

Real processes (sh, python), no server."""
import multiprocessing
import os
import signal
import threading
import subprocess
import sys
import time

import psutil
import pytest

from pg_claimcheck.server import children, interrupts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and PR_SET_PDEATHSIG")

# A command that ignores SIGTERM and has started a grandchild, which prints its pid.
STUBBORN = "trap '' TERM; sleep 600 & echo $!; wait"


def _gone(pid: int) -> bool:
    """Dead (a SIGKILL is delivered on its own time: waited for, as long as the test's timeout allows)."""
    try:
        process = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    _, alive = psutil.wait_procs([process], timeout=60)
    return not alive or process.status() == psutil.STATUS_ZOMBIE


def test_start_refuses_to_run_outside_deferred():
    with pytest.raises(RuntimeError, match="interrupts.deferred"):
        children.start(["true"])


def test_a_child_that_ignores_the_ask_is_killed_with_what_it_started_and_reaped():
    with interrupts.deferred():
        child = children.start(["sh", "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    assert os.getpgid(child.pid) == child.pid  # a group of its own
    children.stop([child], within_s=0.2)
    assert child.returncode == -signal.SIGKILL
    assert _gone(grandchild)
    with pytest.raises(ChildProcessError):  # reaped: no zombie
        os.waitpid(child.pid, os.WNOHANG)


def test_a_child_that_exits_on_the_ask_is_reaped_and_its_group_emptied():
    with interrupts.deferred():
        child = children.start(["sh", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    children.stop([child], within_s=60)
    assert child.returncode == -signal.SIGTERM  # it took the ask
    assert _gone(grandchild)  # the sleep it started did not, and went with its group


def test_a_dead_childs_group_is_still_reached_while_running_is_asked_without_reaping():
    with interrupts.deferred():
        child = children.start(["sh", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    assert children.wait([child], within_s=60)
    assert not children.running(child) and child.returncode is None  # exited, not reaped
    children.stop([child], ask=None, within_s=0)
    assert child.returncode == 0 and _gone(grandchild)


def _sleep_forever() -> None:
    children.child_process_setup()
    time.sleep(600)


def test_a_forked_worker_in_our_group_is_stopped_alone():
    process = multiprocessing.get_context("fork").Process(target=_sleep_forever, daemon=True)
    with interrupts.deferred():
        process.start()
    children.stop([process], within_s=60)
    assert process.exitcode == -signal.SIGTERM  # child_process_setup: SIGTERM ends it at once
    assert os.getpgid(0) == os.getpgrp()  # we, in the same group, were not signalled


def test_a_sigkilled_parent_takes_its_children_with_it(tmp_path):
    script = ("import signal, subprocess, sys\n"
              "from pg_claimcheck.server import children, interrupts\n"
              "with interrupts.deferred():\n"
              "    child = children.start(['sleep', '600'], dies_with=signal.SIGKILL)\n"
              "print(child.pid, flush=True)\n"
              "signal.pause()\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    assert _gone(child)


def test_an_interrupt_during_start_is_raised_once_the_child_is_kept():
    # Another thread that blocks nothing (a progress display's, pytest-xdist's): the kernel hands it the
    # signal the main thread blocks, and Python still runs the handler in the main thread, mid-section.
    waiting = threading.Event()
    bystander = threading.Thread(target=waiting.wait, daemon=True)
    bystander.start()
    kept = []
    previous = signal.signal(signal.SIGTERM, interrupts._raise_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # as if it came mid-fork
                kept.append(children.start(["sleep", "600"]))
    finally:
        signal.signal(signal.SIGTERM, previous)
        waiting.set()
    assert kept and children.running(kept[0])  # the child exists and is ours to stop
    children.stop(kept, within_s=60)
    assert kept[0].returncode == -signal.SIGTERM  # unblocked in the child: it took the ask
