"""The playground's form from a tool's input schema, and the arguments it gives back."""

from __future__ import annotations

import pytest

from mcpfleet.dashboard.forms import ArgumentError, arguments_from, form_fields

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "a file"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": "number"},
        "recursive": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "options": {"type": "object"},
        "csrf": {"type": "string"},
    },
    "required": ["path", "recursive"],
}


def test_one_field_per_property_named_after_it() -> None:
    fields = form_fields(SCHEMA)
    assert [(field.name, field.kind, field.required) for field in fields] == [
        ("path", "text", True),
        ("count", "integer", False),
        ("ratio", "number", False),
        ("recursive", "boolean", True),
        ("mode", "choice", False),
        ("options", "json", False),
        ("csrf", "text", False),
    ]
    by_name = {field.name: field for field in fields}
    assert by_name["count"].default == "3"
    assert by_name["mode"].choices == ("fast", "slow")
    # A property named like one of the page's own fields gets a key of its own in the form.
    assert by_name["csrf"].field_name == "arg:csrf" and by_name["path"].field_name == "path"


def test_the_arguments_take_each_property_type_and_leave_empty_fields_out() -> None:
    form = {"path": "a.txt", "count": "7", "ratio": "0.5", "options": '{"deep": true}', "arg:csrf": "mine"}
    assert arguments_from(form_fields(SCHEMA), form) == {
        "path": "a.txt",
        "count": 7,
        "ratio": 0.5,
        "recursive": False,  # required: an unticked box is false, not missing
        "options": {"deep": True},
        "csrf": "mine",
    }
    assert arguments_from(form_fields(SCHEMA), {"path": "b", "recursive": "on", "count": " "}) == {
        "path": "b",
        "recursive": True,
    }


@pytest.mark.parametrize(
    ("field", "text", "said"),
    [
        ("count", "seven", 'field "count" must be an integer'),
        ("options", "{no", 'field "options" must be JSON'),
    ],
)
def test_a_value_its_type_cannot_take_names_the_field(field: str, text: str, said: str) -> None:
    with pytest.raises(ArgumentError, match=said):
        arguments_from(form_fields(SCHEMA), {field: text})


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"properties": "nope"}, {"properties": {"x": 1}}])
def test_a_schema_without_usable_properties_gives_a_form_anyway(schema: dict[str, object]) -> None:
    fields = form_fields(schema)
    assert all(field.kind == "json" for field in fields)
