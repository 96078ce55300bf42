"""Every leaf setting, walked from the model: its dotted name, type, default, bounds, environment variable and
one line of meaning (the comment beside the field in the source, or the block just above it). The reference
pages and ``ferret config show`` read the settings this way, so neither can miss one."""

from __future__ import annotations

import inspect
import io
import tokenize
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ferret.settings.strict import ENV_PREFIX

_BOUNDS = ((Ge, "ge", ">="), (Gt, "gt", ">"), (Le, "le", "<="), (Lt, "lt", "<"), (MinLen, "min_length", "length >="),
           (MaxLen, "max_length", "length <="))


REQUIRED = "(required)"  # a field with no default


@dataclass(frozen=True)
class Leaf:
    path: str  # dotted: pipeline.fusion.semantic_share
    type: str
    default: Any
    bounds: str
    meaning: str

    @property
    def env(self) -> str:
        """The environment variable that sets it (``FERRET_<SECTION>__<KEY>``)."""
        return ENV_PREFIX + "__".join(self.path.split(".")).upper()


def _is_section(annotation: Any) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, BaseModel)


def _type_name(annotation: Any) -> str:
    text = str(annotation) if not inspect.isclass(annotation) else annotation.__name__
    return text.replace("typing.", "").replace("<class '", "").replace("'>", "")


def _bounds(info: FieldInfo) -> str:
    found = []
    for item in info.metadata:
        for kind, attribute, sign in _BOUNDS:
            if isinstance(item, kind):
                found.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(found)


@cache
def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> its comment: the one on its line, else the block of comment lines just above it."""
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    block: list[str] = []
    line_comment: dict[int, str] = {}
    starts: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line_comment[token.start[0]] = token.string.lstrip("#").strip()
    lines = source.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(line_comment.get(number, ""))
            continue
        name = stripped.split(":", 1)[0].strip() if ":" in stripped and not stripped.startswith(("def ", "@")) else ""
        if name.isidentifier() and name in model.model_fields and line.startswith("    ") and \
                not line.startswith("     "):
            starts[number] = name
            beside = line_comment.get(number)
            found[name] = beside if beside else " ".join(block)
        if stripped and not stripped.startswith("#"):
            block = [] if name.isidentifier() and name in model.model_fields else block
        if not stripped:
            block = []
    return found


def leaves(model: type[BaseModel], prefix: str = "") -> list[Leaf]:
    """Every leaf setting of ``model`` (a section's fields are walked into), in declaration order."""
    found: list[Leaf] = []
    comments = _comments(model)
    hints = typing.get_type_hints(model)
    for name, info in model.model_fields.items():
        annotation = hints.get(name, info.annotation)
        path = f"{prefix}{name}"
        if _is_section(annotation):
            assert annotation is not None
            found += leaves(annotation, path + ".")
            continue
        meaning = (info.description or comments.get(name) or "").strip()
        default = REQUIRED if info.is_required() else info.get_default(call_default_factory=True)
        found.append(Leaf(path, _type_name(annotation), default, _bounds(info), meaning))
    return found
