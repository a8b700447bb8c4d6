"""The playground's form of a tool, built from its input schema, and the arguments read back.

One field per property, named after it: a text box for a string (a list for an ``enum``), a
number box for a number or an integer, a check box for a boolean, and JSON in a text area
for anything else (an object, an array, a union). A field left empty is left out of the
arguments, unless the schema requires it (then the call says what is missing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpfleet.errors import MCPFleetError

RESERVED_FIELDS = frozenset({"csrf", "tool"})
"""Form fields of the page itself; a property of one of these names is sent as JSON under
``arg:NAME`` instead (``field_name``)."""


class ArgumentError(MCPFleetError, ValueError):
    """A field's value that its property's type cannot take; the message names the field."""


@dataclass(frozen=True)
class FormField:
    name: str
    """The property's name, which is the field's (``field_name`` gives the form's key)."""
    kind: str
    """``text``, ``number``, ``integer``, ``boolean``, ``choice`` or ``json``."""
    required: bool
    description: str
    choices: tuple[str, ...] = ()
    default: str = ""

    @property
    def field_name(self) -> str:
        return f"arg:{self.name}" if self.name in RESERVED_FIELDS else self.name


def form_fields(schema: Mapping[str, Any]) -> list[FormField]:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    fields: list[FormField] = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = _kind(spec)
        choices = tuple(str(value) for value in spec["enum"]) if kind == "choice" else ()
        default = spec.get("default")
        fields.append(
            FormField(
                name=str(name),
                kind=kind,
                required=name in needed,
                description=str(spec.get("description") or ""),
                choices=choices,
                default=""
                if default is None
                else default
                if isinstance(default, str)
                else json.dumps(default),
            )
        )
    return fields


def _kind(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type")
    enum = spec.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(value, str) for value in enum):
        return "choice"
    if kind == "string":
        return "text"
    if kind in ("number", "integer", "boolean"):
        return str(kind)
    return "json"


def arguments_from(fields: list[FormField], form: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments from the submitted ``form``; ``ArgumentError`` naming the field."""
    arguments: dict[str, Any] = {}
    for field in fields:
        raw = form.get(field.field_name)
        if field.kind == "boolean":
            if raw is not None or field.required:
                arguments[field.name] = raw is not None
            continue
        text = raw if isinstance(raw, str) else ""
        if not text.strip():
            continue
        arguments[field.name] = _value(field, text)
    return arguments


def _value(field: FormField, text: str) -> Any:
    try:
        if field.kind == "integer":
            return int(text)
        if field.kind == "number":
            number = float(text)
            return int(number) if number.is_integer() and "." not in text else number
        if field.kind == "json":
            return json.loads(text)
    except ValueError as error:
        what = {"integer": "an integer", "number": "a number", "json": "JSON"}[field.kind]
        raise ArgumentError(f'field "{field.name}" must be {what}: {error}') from None
    return text
