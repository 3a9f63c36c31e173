"""The JSON report's published schema (`report.schema.json`, docs/contracts.md section 3), and its
validation with the `jsonschema` package, worded the way `compare` names a broken report's field:
`runs[0].workers: expected integer, got "abc"`.
"""
from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any, Iterator

SCHEMA_VERSION = 5


@cache
def schema() -> dict:
    """The published schema, shipped inside the package."""
    return json.loads(files("pg_claimcheck.report").joinpath("report.schema.json").read_text(encoding="utf-8"))


@cache
def validator():
    """A Draft 2020-12 validator of the published schema, itself checked against the meta-schema.
    Imported here, not at the top: every verb imports this module for SCHEMA_VERSION, only the
    readers of reports (`compare`, the tests) need the validator."""
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema())
    return jsonschema.Draft202012Validator(schema())


def errors(value: Any) -> Iterator[str]:
    """Each way `value` breaks the schema, as `field: what is wrong`, shallowest fields first;
    nothing when it is valid."""
    return _sorted_worded(validator().iter_errors(value), ())


RUN = {"$ref": "#/$defs/run"}
"""The schema of one run object, within the published schema."""


def run_errors(run: Any, index: int) -> Iterator[str]:
    """As `errors`, for run `index` of a report alone (the schema has no rule across runs, so a report
    can be checked one run at a time): `runs[3].workers: expected integer, got "abc"`."""
    return _sorted_worded(validator().descend(run, RUN), ("runs", index))


def _sorted_worded(found, at: tuple) -> Iterator[str]:
    seen: set[str] = set()
    for error in sorted(found, key=lambda e: len(e.absolute_path)):
        for line in _worded(error, (*at, *error.absolute_path)):
            if line not in seen:
                seen.add(line)
                yield line


def _field(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _worded(error, path: tuple) -> Iterator[str]:
    where = _field(path) or "the document"
    kind, expected, got = error.validator, error.validator_value, error.instance
    if kind == "required":  # one error per missing key; name the key, as a field of its own
        prefix = f"{_field(path)}." if path else ""
        yield from (f"{prefix}{key}: missing" for key in expected if isinstance(got, dict) and key not in got)
    elif kind == "type":
        kinds = expected if isinstance(expected, list) else [expected]
        yield f"{where}: expected {' or '.join(kinds)}, got {_shown(got)}"
    elif kind == "const":
        yield f"{where}: expected {json.dumps(expected)}, got {_shown(got)}"
    elif kind == "enum":
        yield f"{where}: expected one of {', '.join(map(json.dumps, expected))}, got {_shown(got)}"
    elif kind == "minimum":
        yield f"{where}: must be at least {expected}, got {_shown(got)}"
    else:
        yield f"{where}: {error.message}"


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):  # never dump a user's (maybe huge or deep) structure into a message
        return "an object" if isinstance(value, dict) else "an array"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
