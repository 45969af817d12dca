"""A small JSON Schema (draft 2020-12) checker for the keywords mpsfuzz's own schemas use:
type, const, enum, required, properties, additionalProperties, items, minimum, anyOf and
local ``$ref``s (``#/$defs/...``). It refuses a schema with any other keyword, so a
schema can never say more than is checked. (No jsonschema dependency.)"""
from __future__ import annotations

import json
from importlib import resources

_ANNOTATIONS = {"$schema", "$id", "$comment", "$defs", "title", "description"}
_CHECKED = {"type", "const", "enum", "required", "properties", "additionalProperties", "items",
            "minimum", "anyOf", "$ref"}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class SchemaError(ValueError):
    """The schema itself uses something this checker does not know."""


def load_schema(name: str) -> dict:
    """A schema shipped in mpsfuzz/data (e.g. 'report.schema.json')."""
    return json.loads(resources.files("mpsfuzz").joinpath(f"data/{name}").read_text())


def _resolve(root: dict, ref: str) -> dict:
    if not ref.startswith("#/"):
        raise SchemaError(f"only local $refs are supported, not {ref!r}")
    node = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            raise SchemaError(f"$ref {ref!r} does not resolve")
        node = node[part]
    return node


def _same(a, b) -> bool:
    # JSON equality: 1 and True differ, 1 and 1.0 do not.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def errors(instance, schema: dict, root: dict | None = None, path: str = "$") -> list[str]:
    """Every way ``instance`` breaks ``schema``, as 'json.path: what' lines ([] if valid)."""
    root = schema if root is None else root
    unknown = set(schema) - _ANNOTATIONS - _CHECKED
    if unknown:
        raise SchemaError(f"schema at {path} uses unsupported keyword(s): {', '.join(sorted(unknown))}")
    out: list[str] = []
    if "$ref" in schema:
        out += errors(instance, _resolve(root, schema["$ref"]), root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](instance) for t in types):
            return out + [f"{path}: expected {' or '.join(types)}, got {type(instance).__name__} {instance!r:.60}"]
    if "const" in schema and not _same(instance, schema["const"]):
        out.append(f"{path}: expected {schema['const']!r}, got {instance!r:.60}")
    if "enum" in schema and not any(_same(instance, v) for v in schema["enum"]):
        out.append(f"{path}: {instance!r:.60} is not one of {schema['enum']}")
    if "minimum" in schema and _TYPES["number"](instance) and instance < schema["minimum"]:
        out.append(f"{path}: {instance} is below the minimum {schema['minimum']}")
    if "anyOf" in schema:
        branches = [errors(instance, s, root, path) for s in schema["anyOf"]]
        if all(branches):
            out.append(f"{path}: matches none of anyOf: " + "; ".join(b[0] for b in branches))
    if isinstance(instance, dict):
        out += _object(instance, schema, root, path)
    if isinstance(instance, list) and "items" in schema:
        for i, item in enumerate(instance):
            out += errors(item, schema["items"], root, f"{path}[{i}]")
    return out


def _object(instance: dict, schema: dict, root: dict, path: str) -> list[str]:
    out = [f"{path}: missing required key {key!r}" for key in schema.get("required", ()) if key not in instance]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, value in instance.items():
        where = f"{path}.{key}"
        if key in properties:
            out += errors(value, properties[key], root, where)
        elif extra is False:
            out.append(f"{where}: not allowed (not in the schema)")
        elif isinstance(extra, dict):
            out += errors(value, extra, root, where)
    return out
