"""What one flush of a worker's records costs on each side of the wire, printed, never asserted.

Run: .venv/bin/python tests/benchmarks/logdelta_wire.py [FLUSHES]   (no server)

For 1, 10, 125 and 1,000 records a flush (a claim's rows under --faults, which flushes after each
claim; a worker's half second at 16 workers on 2 cores; a fast worker's half second), the median
over FLUSHES (default 2,000) of: the worker's side (`LogStream.flush`: the `LogDelta`, its wire form,
pickled as a `multiprocessing` pipe pickles it) and the coordinator's (unpickled, `LogDelta.from_wire`,
`merge_into` its copy of the log); then the same for Locust's messages (the delta shifted onto the
server's clock, packed and unpacked by msgpack, as Locust's rpc does). A medians' figure, so that a
busy machine's stalls do not count; the load average is printed beside it.
"""
from __future__ import annotations

import os
import pickle
import sys
import time

import msgpack

from pg_claimcheck.engine.logstream import LogDelta, LogStream, PipeSink
from pg_claimcheck.verdict.ledger import DONE, WorkerLog

SIZES = (1, 10, 125, 1000)


class _Pipe:
    """A pipe's end as `Connection.send` uses it: pickled, the bytes kept for the other end."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, obj) -> None:
        self.sent.append(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


class _Locust:
    """A RecordSink as pg_claimcheck.locust.claimer.ToMaster is one, without Locust: msgpack bytes."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_delta(self, delta: LogDelta) -> None:
        self.sent.append(msgpack.dumps(delta.shifted(1.7e9).to_wire()))

    def send_end(self, summary: dict) -> None:
        raise AssertionError("not sent here")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] * 1e6


def measure(size: int, flushes: int, locust: bool) -> tuple[float, float, int]:
    """(worker us, coordinator us, bytes) per flush of `size` records."""
    log, copy = WorkerLog(worker=0), WorkerLog(worker=0)
    wire = _Locust() if locust else _Pipe()
    stream = LogStream(wire if locust else PipeSink(wire), log, interval_s=0.5)
    sending, merging = [], []
    for n in range(flushes):
        first = log.record_claims([(n * size + i, 1) for i in range(size)], float(n))
        log.end_all(first, [float(n) + 0.5] * size, [DONE] * size)
        started = time.perf_counter()
        stream.flush()
        sent = time.perf_counter()
        data = wire.sent.pop()
        payload = msgpack.loads(data, raw=False) if locust else pickle.loads(data)[1]
        LogDelta.from_wire(payload).merge_into(copy)
        sending.append(sent - started)
        merging.append(time.perf_counter() - sent)
    assert list(copy.job) == list(log.job)
    return _median(sending), _median(merging), len(data)


def main(flushes: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus; medians of {flushes:,} flushes")
    print(f"{'wire':7} {'records':>7} {'worker us':>10} {'coordinator us':>15} {'bytes':>7}")
    for locust in (False, True):
        for size in SIZES:
            worker, coordinator, size_b = measure(size, flushes, locust)
            print(f"{'locust' if locust else 'pipe':7} {size:7,} {worker:10.1f} {coordinator:15.1f} {size_b:7,}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
