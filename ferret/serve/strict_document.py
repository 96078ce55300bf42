"""The OpenAPI document made as strict as the server: what the request validators enforce beyond the models'
types (the limits in force, non-empty text, the id and namespace patterns, a memory's one-of rule), and every
field of an answer marked required (an answer always carries all of them, defaults too).

Generated clients trust the document: a request it allows must not be refused for its shape, and one it
forbids must be. The limits come from the server's settings, so the document served is the one in force."""

from __future__ import annotations

from typing import Any

from ferret.contract import NAMESPACE_PATTERN, REQUEST_ID_PATTERN
from ferret.records import CONTROL_CHARACTERS
from ferret.settings import LimitSettings

NOT_BLANK = r"\S"  # JSON Schema's pattern is searched, not matched whole: some character that is not a space
# Text from users has no control character but tab, newline and carriage return (ferret.records); JSON Schema
# writes the range with \x escapes, as Python's re does.
NO_CONTROL = "^[^" + CONTROL_CHARACTERS.pattern[1:-1] + "]*$"
ID_TEXT = r"^[^\x00-\x1f\x7f-\x9f]*$"  # a memory's id: no tab or newline either
MEMORY_TEXTS = ("content_title", "content_body", "content_summary")
REQUEST_BODIES = ("JobBody", "QueryBody", "PrefetchBody")
SOMETIMES_ABSENT = {"ErrorDetail"}  # an error names a field or a job only when it has one


def _whole(pattern: str) -> str:
    return f"^{pattern}$"


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an ``anyOf: [X, null]`` (the schema itself when there is none)."""
    for branch in schema.get("anyOf", ()):
        if branch.get("type") != "null":
            return branch  # type: ignore[no-any-return]
    return schema


def tighten(document: dict[str, Any], limits: LimitSettings) -> dict[str, Any]:
    """``document`` (FastAPI's), changed in place and returned."""
    schemas = document["components"]["schemas"]
    for name in REQUEST_BODIES:
        fields = schemas[name]["properties"]
        fields["query"].update(minLength=1, maxLength=limits.max_query_chars, allOf=[{"pattern": NOT_BLANK}])
        fields["history"]["maxItems"] = limits.max_history_turns
        if "deadline_seconds" in fields:
            _nullable(fields["deadline_seconds"])["maximum"] = limits.max_deadline_seconds
        if "request_id" in fields:
            _nullable(fields["request_id"]).update(maxLength=limits.max_request_id_chars,
                                                   pattern=_whole(REQUEST_ID_PATTERN.pattern))
    schemas["Turn"]["properties"]["content"]["maxLength"] = limits.max_history_turn_chars
    _nullable(schemas["RetrievalOptions"]["properties"]["max_results"])["maximum"] = limits.max_results
    schemas["Memory"]["properties"]["id"]["pattern"] = ID_TEXT
    schemas["ForgetBody"]["properties"]["ids"]["items"]["pattern"] = ID_TEXT
    schemas["Memory"]["properties"]["supersedes"]["items"].update(minLength=1, maxLength=256, pattern=ID_TEXT)
    schemas["Memory"]["anyOf"] = [{"required": [name], "properties": {name: {"type": "string", "minLength": 1}}}
                                  for name in MEMORY_TEXTS]
    for name in (*MEMORY_TEXTS, "type", "cluster_ids", "supersedes"):  # null is taken as absent (as Nous sends)
        field = schemas["Memory"]["properties"][name]
        schemas["Memory"]["properties"][name] = {"anyOf": [{k: v for k, v in field.items()
                                                            if k not in ("title", "description", "default")},
                                                           {"type": "null"}],
                                                 **{k: v for k, v in field.items()
                                                    if k in ("title", "description", "default")}}
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                if parameter["in"] != "path":
                    continue
                if parameter["name"] == "namespace":
                    parameter["schema"].update(maxLength=limits.max_namespace_chars,
                                               pattern=_whole(NAMESPACE_PATTERN.pattern))
                elif parameter["name"] == "conversation":
                    parameter["schema"].update(maxLength=limits.max_request_id_chars, pattern=NOT_BLANK)
    for name in _request_schemas(document):
        _no_control_characters(schemas[name])
    for name in _answer_schemas(document) - SOMETIMES_ABSENT:
        schema = schemas[name]
        if "properties" in schema:
            schema["required"] = list(schema["properties"])
    return document


def _no_control_characters(schema: dict[str, Any]) -> None:
    """Every text field of ``schema`` (nested, in lists, nullable) without a pattern or a fixed set of values
    gets the rule on control characters."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if node.get("type") == "string" and not ({"pattern", "enum", "const", "format"} & node.keys()):
            node["pattern"] = NO_CONTROL
        for key in ("properties",):
            stack.extend(node.get(key, {}).values())
        for key in ("anyOf", "allOf", "oneOf"):
            stack.extend(branch for branch in node.get(key, ()) if isinstance(branch, dict))
        if isinstance(node.get("items"), dict):
            stack.append(node["items"])


def _request_schemas(document: dict[str, Any]) -> set[str]:
    """The names of the component schemas a request body uses."""
    return _reached(document, [op.get("requestBody", {}) for ops in document["paths"].values()
                               for op in ops.values()])


def _answer_schemas(document: dict[str, Any]) -> set[str]:
    """The names of the component schemas an answer uses (directly or nested) and no request body does."""
    answers = [op.get("responses", {}) for ops in document["paths"].values() for op in ops.values()]
    return _reached(document, answers) - _request_schemas(document)


def _reached(document: dict[str, Any], roots: list[Any]) -> set[str]:
    """The names of the component schemas ``roots`` refer to, directly or nested."""
    schemas = document["components"]["schemas"]

    found: set[str] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in found:
                    found.add(name)
                    stack.append(schemas[name])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found
