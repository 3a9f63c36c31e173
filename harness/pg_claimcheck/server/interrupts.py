"""Cleanup that a second Ctrl-C cannot cut short, and an honest account of what it did.

The first Ctrl-C (or SIGTERM) interrupts the run; cleanup then runs under :func:`shielded`, where
further Ctrl-Cs are noted instead of raised, so the schema is dropped and the server's directory
deleted even when the user presses Ctrl-C again. Each cleanup step records what it actually did
(:func:`done`), and the CLI's closing message says exactly that, nothing more.
"""
from __future__ import annotations

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


def raise_on_interrupts() -> None:
    """From here on, Ctrl-C and SIGTERM raise KeyboardInterrupt, so the command's cleanup runs: SIGTERM
    ends the command as Ctrl-C does, and Ctrl-C raises again where pg_claimcheck.__main__'s quiet
    handler had it while the command loaded. A Ctrl-C ignored from the start (`cmd &`) stays ignored."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM for a short critical section (a fork and keeping the child): they are handled
    right after it, as the handlers in place before it say. Two holds, as a mask is one thread's: the
    signals are blocked in this thread (a child forked inside inherits the mask and unblocks them itself,
    pg_claimcheck.server.children), and their handlers only note them meanwhile, because the kernel gives
    a process's signal to any thread that does not block it (a progress display's, pytest-xdist's) and
    Python then runs the handler in the main thread, inside the section (seen in `make test`)."""
    main = threading.current_thread() is threading.main_thread()
    received: list[int] = []
    handlers = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in INTERRUPTS} if main else {}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending here is noted, at the next line
        for s, handler in handlers.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(received):  # each once, in the order they came
            handler = handlers[signal.Signals(signum)]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


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
