"""Every process the harness starts: tied to us when it is born, stopped one way, never left behind.

Start (:func:`start` for a command, :func:`child_process_setup` first thing in a process we fork): a
session and so a process group of its own, so a stop reaches what the child starts in turn (postgres's
backends, chancy's multiprocessing manager, sidequest's engine) and a terminal's Ctrl-C reaches only us;
and a parent-death signal (Linux's PR_SET_PDEATHSIG), so a SIGKILLed harness takes its children with it.
SIGINT and SIGTERM are held (:func:`pg_claimcheck.server.interrupts.deferred`) from before the fork until
the caller has kept the child: a signal that came during a fork with a preexec_fn was raised inside
Python's at-fork hooks, which print it and drop it, and the harness ran on (issue 35, a Locust run went
on to its end); one that came between the fork and the caller's assignment lost the child.

Stop (:func:`stop`): ask (the child's own shutdown signal: SIGTERM, postgres's SIGINT; or nothing, when the
caller has asked in its own way), wait up to a deadline, SIGKILL the child's whole group, reap. The group
is killed while its leader is still unreaped, so its id cannot have been handed to another process.
"""
from __future__ import annotations

import ctypes
import functools
import multiprocessing.process
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from pg_claimcheck.server.interrupts import INTERRUPTS

Child = subprocess.Popen | multiprocessing.process.BaseProcess
"""A command we started (:func:`start`) or a Python process we forked (multiprocessing, fork context)."""

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.01
"""How often an exit is looked for where the kernel cannot tell us (no pidfd: not Linux, or before 5.3)."""


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """In the child: have the kernel send `signum` when the thread that forked it ends (Linux; nothing
    elsewhere). Call it from the thread that lives as long as the child: the main thread, here."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


def child_process_setup() -> None:
    """First thing in a process the coordinator forks (a worker, a producer): its signals are the coordinator's."""
    # Ctrl-C reaches the whole process group; the coordinator decides, and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # terminate() sends SIGTERM: die at once (the server rolls our transaction back). The CLI's
    # handler, inherited through fork, would turn it into a KeyboardInterrupt and a traceback.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)  # held by the coordinator while it forked us
    die_with_parent()


def _tie(parent: int, signum: int) -> None:
    """A command's preexec_fn (in the child, after setsid, before exec)."""
    for s in INTERRUPTS:
        # Python's handlers, inherited through fork, would raise inside this function on a signal pending
        # from before setsid (the parent's group got a Ctrl-C): the default ends the child before it runs,
        # which the parent, interrupted by the same signal, stops and reaps. exec resets them anyway.
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, signal.SIG_DFL)
    die_with_parent(signum)
    if os.getppid() != parent:  # the parent died before the prctl: nobody will tell us
        os._exit(1)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)  # the mask outlives exec


def start(argv: Sequence[str], *, dies_with: int = signal.SIGTERM, **popen_kwargs: Any) -> subprocess.Popen:
    """Start a command as a child of ours (subprocess.Popen's keywords besides `start_new_session` and
    `preexec_fn`): in a session of its own, sent `dies_with` if we die (a graceful quit, or SIGKILL for
    one with nothing to keep). Call it inside interrupts.deferred() and keep the child there::

        with interrupts.deferred():
            self.process = children.start([...], dies_with=signal.SIGINT)

    so an interrupt is raised once the child is where :func:`stop` finds it."""
    if not INTERRUPTS <= signal.pthread_sigmask(signal.SIG_BLOCK, []):
        raise RuntimeError("children.start: call it inside interrupts.deferred(), and keep the child there")
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=functools.partial(_tie, os.getpid(), dies_with),
                            **popen_kwargs)


def running(process: Child) -> bool:
    """Is it still running? Unlike Popen.poll(), this does not reap it, so stop() can still reach its group."""
    return not _exited(process)


def wait(processes: Sequence[Child], within_s: float) -> bool:
    """Give `processes` up to `within_s` seconds in all to exit on their own; reaps none. True if all did."""
    deadline = time.monotonic() + within_s
    return all([_wait_exit(p, deadline) for p in processes])


def stop(processes: Sequence[Child], *, ask: int | None = signal.SIGTERM, within_s: float) -> None:
    """Stop children of ours: send `ask` to each still running (None: the caller has asked already), wait
    up to `within_s` seconds in all, SIGKILL each one's group (what it started, even when it exited on its
    own), or the process alone if it leads none (a forked worker), and reap them. Nothing is left."""
    if ask is not None:
        for process in processes:
            if not _exited(process):
                _signal(process, ask, group=False)
    wait(processes, within_s)
    for process in processes:
        _signal(process, signal.SIGKILL, group=True)
    for process in processes:
        if isinstance(process, subprocess.Popen):
            process.wait()
        else:
            process.join()


def _exited(process: Child) -> bool:
    """Has it exited? Asked without reaping it: its pid stays ours to signal until stop() reaps it."""
    return _reaped(process) or os.waitid(os.P_PID, _pid(process), os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _pid(process: Child) -> int:
    assert process.pid is not None  # started: _reaped says so first
    return process.pid


def _reaped(process: Child) -> bool:
    """Reaped already (Popen.poll, Process.is_alive), or never started: its pid is no longer ours."""
    if process.pid is None:
        return True
    if isinstance(process, subprocess.Popen):
        if process.returncode is not None:
            return True
    elif process.exitcode is not None:  # a forked worker leads no group: reaping it here loses nothing
        return True
    try:
        os.waitid(os.P_PID, _pid(process), os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return False
    except ChildProcessError:
        return True


def _wait_exit(process: Child, deadline: float) -> bool:
    if _exited(process):
        return True
    try:
        pidfd = os.pidfd_open(_pid(process))
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:  # readable once the process has exited: no polling
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
        finally:
            os.close(pidfd)
        return _exited(process)
    while not _exited(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _signal(process: Child, signum: int, group: bool) -> None:
    """`signum` to the process, or (`group`) to its whole group if it leads one. Never to one reaped
    already: its pid may be another process's now. (Watch a child with :func:`running`, which does not
    reap, when what it started must be stopped with it.)"""
    if _reaped(process):
        return
    pid = _pid(process)
    try:
        if group and os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        elif group or not _exited(process):
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # gone, and its group with it
