"""Job keys of any type, as the dense integers the ledger counts with.

A claim's first column is the job's key: bigint, int, uuid or text. The ledger keeps one counter
per seeded job and its logs are arrays of integers, so each key is mapped to a dense number
`1..n` (its position among the sorted seeded keys, found by bisection). Integer keys that are already a contiguous range map
to themselves and need no table at all. The map is built by the coordinator before the workers
fork, so every worker inherits it without a copy being sent.

Keys are compared in one canonical form: an int for integer keys, else the server's text output
(what libpq returns, and `str()` of what psycopg loads: a UUID prints as PostgreSQL prints it).
A key that was never seeded gets a negative number derived from its text (stable across
processes), and its text travels with the worker's log for the evidence.
"""
from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


def canonical(value: Any, key_is_int: bool) -> Any:
    return int(value) if key_is_int else (value.decode() if isinstance(value, bytes) else str(value))


def number_of(raw: object, keys: "KeySpace | None", key_is_int: bool) -> int:
    """A key as the server returned it (psycopg's value or libpq's text) -> the ledger's job number
    (the claim loop's and the reaper's reading of a key)."""
    key = canonical(raw, key_is_int)
    return keys.number(key) if keys is not None else key


def key_of(keys: "KeySpace | None", number: int, unknown: dict[int, str], key_is_int: bool) -> object:
    """The canonical key of a job number a claimer recorded in `keys` (None: an integer key is its own
    number); `unknown`: its log's numbers of keys never seeded, with their text."""
    if keys is None or keys.keys is None:
        return number
    return canonical(keys.shown(number, unknown), key_is_int)


def unknown_number(key: object) -> int:
    """A negative number for a key that was never seeded: the same in every process."""
    return -1 - int.from_bytes(hashlib.blake2b(str(key).encode(), digest_size=7).digest(), "big")


@dataclass
class KeySpace:
    """The seeded keys, numbered `first..last`."""

    first: int
    last: int
    key_is_int: bool = True
    keys: list[Any] | None = None
    """Number - 1 -> key, sorted, so a key's number is found by bisection: no second table (and no
    million int objects) next to the keys themselves. None when the keys are `first..last`."""
    duplicates: int = 0
    """Rows `collect` read whose key an earlier row had already given (a seed must return none)."""

    @classmethod
    def of(cls, keys: list[Any], key_is_int: bool) -> "KeySpace":
        return cls.collect(((k,) for k in keys), key_is_int)

    @classmethod
    def collect(cls, rows: Iterable[Sequence[Any]], key_is_int: bool) -> "KeySpace":
        """From rows whose first value is a key, read once (a seed's result, streamed); a key seeded
        twice is one job."""
        keys = [canonical(row[0], key_is_int) for row in rows]
        keys.sort()
        unique = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]
        duplicates = len(keys) - len(unique)
        if duplicates:
            keys = unique
        del unique
        if key_is_int and keys and keys[-1] - keys[0] + 1 == len(keys):
            return cls(first=keys[0], last=keys[-1], duplicates=duplicates)  # a contiguous range: its own numbers
        return cls(first=1, last=len(keys), key_is_int=key_is_int, keys=keys, duplicates=duplicates)

    def number(self, key: Any) -> int:
        """The dense number of a canonical key; a negative one for a key never seeded."""
        if self.keys is None:
            number: int = key  # out of first..last: the ledger counts it as unexpected
            return number
        i = bisect_left(self.keys, key)
        return i + 1 if i < len(self.keys) and self.keys[i] == key else unknown_number(key)

    def shown(self, number: int, unknown: dict[int, str] | None = None) -> object:
        """The key of a dense number, as evidence shows it."""
        if self.keys is None:
            return number
        if 1 <= number <= len(self.keys):
            return self.keys[number - 1]
        return (unknown or {}).get(number, number)
