"""The JSON report's published schema (`report.schema.json`, docs/contracts.md section 3), and the
small validator `compare` uses to refuse a malformed report with the file and the field.

Why our own validator and not the `jsonschema` package at run time: `jsonschema` brings attrs,
referencing and the compiled rpds-py with it, for a CLI whose one reader of the schema needs
eight keywords. This module interprets exactly the keywords the schema uses (type, const, enum,
required, properties, additionalProperties, items, minimum, and local `$ref`s) and refuses a
schema that uses any other, so the two cannot drift apart silently. The tests validate every
report they write with the real `jsonschema` and check that both readers agree on fuzzed input.
"""
from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any, Iterator

SCHEMA_VERSION = 2
KNOWN_KEYWORDS = frozenset({"type", "const", "enum", "required", "properties", "additionalProperties", "items",
                            "minimum", "$ref", "$defs", "$schema", "$id", "title", "description"})
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # JSON Schema counts 8.0 as an integer, as `jsonschema` does.
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


@cache
def schema() -> dict:
    """The published schema, shipped inside the package."""
    return json.loads(files("claimcheck.report").joinpath("report.schema.json").read_text(encoding="utf-8"))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _resolve(node: dict, root: dict) -> dict:
    while "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"report schema: only local $ref is supported, got {ref!r}")
        node = root
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def errors(value: Any, node: dict | None = None, path: str = "", root: dict | None = None) -> Iterator[str]:
    """Each way `value` breaks the schema, as `field: what is wrong`; nothing when it is valid."""
    root = schema() if root is None else root
    node = _resolve(root if node is None else node, root)
    unknown = set(node) - KNOWN_KEYWORDS
    if unknown:
        raise ValueError(f"report schema uses keywords this validator does not know: {sorted(unknown)}")
    where = path or "the document"
    if "type" in node:
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_TYPES[k](value) for k in kinds):
            yield f"{where}: expected {' or '.join(kinds)}, got {_shown(value)}"
            return
    if "const" in node and not _same(value, node["const"]):
        yield f"{where}: expected {json.dumps(node['const'])}, got {_shown(value)}"
    if "enum" in node and not any(_same(value, e) for e in node["enum"]):
        yield f"{where}: expected one of {', '.join(map(json.dumps, node['enum']))}, got {_shown(value)}"
    if "minimum" in node and _TYPES["number"](value) and value < node["minimum"]:
        yield f"{where}: must be at least {node['minimum']}, got {_shown(value)}"
    if isinstance(value, dict):
        for key in node.get("required", ()):
            if key not in value:
                yield f"{path + '.' if path else ''}{key}: missing"
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from errors(item, sub, f"{path}.{key}" if path else key, root)
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            yield from errors(item, node["items"], f"{path}[{i}]", root)


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):  # never dump a user's (maybe huge or deep) structure into a message
        return "an object" if isinstance(value, dict) else "an array"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
