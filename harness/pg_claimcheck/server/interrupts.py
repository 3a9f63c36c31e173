"""Cleanup that a second Ctrl-C cannot cut short, and an honest account of what it did.

The first Ctrl-C (or SIGTERM) interrupts the run; cleanup then runs under :func:`shielded`, where
further Ctrl-Cs are noted instead of raised, so the schema is dropped and the server's directory
deleted even when the user presses Ctrl-C again. Each cleanup step records what it actually did
(:func:`done`), and the CLI's closing message says exactly that, nothing more.
"""
from __future__ import annotations

import ctypes
import functools
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

INTERRUPTS = {signal.SIGINT, signal.SIGTERM}
_done: list[str] = []


def done(what: str) -> None:
    """Record one cleanup step that completed (e.g. "schema claimcheck_ab12 dropped")."""
    _done.append(what)


def cleaned_up() -> list[str]:
    return list(_done)


def reset() -> None:
    _done.clear()


def sigterm_as_interrupt() -> None:
    """SIGTERM ends the command as Ctrl-C does: a KeyboardInterrupt, so the same cleanup runs."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Block SIGINT/SIGTERM for a short critical section (a fork): they are delivered right after it.
    A child forked inside inherits the mask and must unblock them itself."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def shielded() -> Iterator[None]:
    """Run the block to its end even if SIGINT/SIGTERM arrive; then raise KeyboardInterrupt if one did."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        raise KeyboardInterrupt


_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Have the kernel send `signum` to this process when its parent dies (Linux): workers and
    pgbench die at once with a SIGKILLed coordinator; the embedded server gets SIGINT (a fast
    shutdown). Call it in the child, e.g. as a Popen preexec_fn."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


server_dies_with_parent = functools.partial(die_with_parent, signal.SIGINT)
"""The embedded server's preexec_fn: a fast shutdown if we die."""


def child_process_setup() -> None:
    """First thing in a process the coordinator forks (a worker, the producer): its signals are the coordinator's."""
    # Ctrl-C reaches the whole process group; the coordinator decides, and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # terminate() sends SIGTERM: die at once (the server rolls our transaction back). The CLI's
    # handler, inherited through fork, would turn it into a KeyboardInterrupt and a traceback.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)  # blocked by the coordinator while it forked us
    die_with_parent()
