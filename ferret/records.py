"""Small declared records passed between pipeline stages.

Memories and filters are pydantic models (they come from outside and are
validated); hits are frozen dataclasses (made in hot loops). Stages never
mutate what they are given: they return new records.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class Section(enum.StrEnum):
    EPISODIC = "EPISODIC"
    SIGNALS = "SIGNALS"
    KNOWLEDGE = "KNOWLEDGE"
    PROCEDURAL = "PROCEDURAL"


# One rule for text from users (queries, history, memories): no C0 control character but tab,
# newline and carriage return, no DEL, no C1 control (U+0080-U+009F; U+009B is a CSI on some
# terminals). ESC, BEL or NUL in text would reach an operator's terminal (ESC [ 31 m recolours
# it, OSC sequences retitle it); what Ferret prints from Redis or a backend is escaped too.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
MAX_SUPERSEDED = 32  # ids one memory may name as those it replaces
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # what an id named in ``supersedes`` must not hold


def without_control_characters(value: str) -> str:
    """``value``, else ValueError naming the first control character and where it is."""
    found = CONTROL_CHARACTERS.search(value)
    if found is not None:
        raise ValueError(f"must not contain control characters (ESC, BEL, NUL and the like; tab and newline "
                         f"are fine): U+{ord(found.group()):04X} at character {found.start()}")
    return value


def visible(value: str) -> str:
    """``value`` with every control character shown as an escape (``\\x1b``), for a terminal."""
    return CONTROL_CHARACTERS.sub(lambda found: f"\\x{ord(found.group()):02x}", value)


def encodable_text(value: str) -> str:
    """``value`` if it encodes as UTF-8; JSON escapes can carry lone surrogates, which do not."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"must be valid Unicode text (a lone surrogate at character {exc.start})") from None
    return value


def _encodable_or_none(value: str | None) -> str | None:
    return None if value is None else encodable_text(value)


def _encodable_ids(value: tuple[str, ...] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(encodable_text(v) for v in value)


class Memory(BaseModel):
    """One memory node, with Nous-compatible field names.

    Accepts what the real Nous server sends: any optional field may be
    ``null`` or absent (a node created without a body or summary has
    ``content_body: null``), unknown fields (``neural_*``, ``layer``,
    ``version``, ``breakdown``, ...) are ignored, and ``memory_section`` (e.g.
    ``EPISODIC``), when given and known, is the node's section. What is really
    malformed (no id, a number where text belongs, no text at all) is refused
    naming the field."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    id: str = Field(min_length=1, max_length=256)
    """Unique within its namespace; writing the same id again replaces the memory. No control characters."""
    type: str = "concept"
    """What kind of memory: event, preference, fact, procedure, plan, ... (with subtype, decides the section)."""
    subtype: str | None = None
    """A finer kind (``custom:recipe``); when given, it decides the section instead of type."""
    content_title: str = ""
    """A short title: searched, and shown first in the context."""
    content_body: str = ""
    """The text (a JSON body's ``text`` field is its text). At least one of title, body and summary is needed."""
    content_summary: str = ""
    """A summary, searched and shown when there is no body."""
    provenance_created_at: str | None = None
    """When the memory was written (ISO 8601); ``filters.time_range`` of type ``ingestion`` selects by it."""
    temporal_event_time: str | None = None
    """When what it describes happened (ISO 8601); ``filters.time_range`` of type ``event`` selects by it."""
    state_lifecycle: str | None = None
    """ACTIVE, ARCHIVED, ...: ``filters.lifecycle`` selects by it."""
    cluster_ids: tuple[str, ...] = ()
    """Clusters it belongs to: ``filters.cluster_ids`` selects by them."""
    memory_section: Section | None = None
    """EPISODIC, SIGNALS, KNOWLEDGE or PROCEDURAL, when the memory names its own section (Nous does)."""
    supersedes: tuple[str, ...] = Field(default=(), max_length=MAX_SUPERSEDED)
    """Ids of memories of the same namespace this one replaces (a changed fact: "moved to Lisbon" replacing
    "lives in Berlin"): each ranks below this one in every answer, marked ``superseded_by``, and this one is
    put in its place when only the old one is found. Writing the old memory again under its own id (an update
    in place) is the other way to change a fact."""

    @field_validator("type", "content_title", "content_body", "content_summary", "cluster_ids", "supersedes",
                     mode="before")
    @classmethod
    def _null_is_absent(cls, value: object, info: ValidationInfo) -> object:
        """Nous sends ``null`` for a field a node was created without: the default, as if absent."""
        if value is None:
            return cls.model_fields[info.field_name].default if info.field_name else value
        return value

    @field_validator("memory_section", mode="before")
    @classmethod
    def _known_section(cls, value: object) -> object:
        """A section Ferret knows (any case), else none: the subtype decides."""
        if isinstance(value, str) and value.strip().upper() in Section.__members__:
            return value.strip().upper()
        return None

    @field_validator("id")
    @classmethod
    def _id_is_printable(cls, value: str) -> str:
        if any(ord(ch) < 32 for ch in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("supersedes")
    @classmethod
    def _superseded_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not 1 <= len(item) <= 256 or _ID_CONTROL.search(item):
                raise ValueError("each id must be 1-256 characters, no control characters")
        return tuple(dict.fromkeys(value))

    _encodable = field_validator("id", "type", "subtype", "content_title", "content_body", "content_summary",
                                 "provenance_created_at", "temporal_event_time", "state_lifecycle")(_encodable_or_none)
    _encodable_ids = field_validator("cluster_ids")(_encodable_ids)

    @model_validator(mode="after")
    def _has_text(self) -> Memory:
        if not (self.content_title or self.content_body or self.content_summary):
            raise ValueError("needs content_title, content_body or content_summary")
        return self

    @cached_property
    def preview(self) -> str:
        """Display text: the body (a JSON body's "text" field), else the summary."""
        body = self.content_body.strip()
        if body.startswith("{"):
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("text"), str):
                body = parsed["text"].strip()
        return " ".join((body or self.content_summary).split())

    @property
    def text(self) -> str:
        """All searchable text of the memory."""
        return " ".join(p for p in (self.content_title, self.content_body, self.content_summary) if p)


class TimeRange(BaseModel):
    """A range of times, either end open; a start after the end is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: datetime | None = None
    end: datetime | None = None
    type: Literal["event", "ingestion", "any"] = "any"

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and self.start > self.end:
            raise ValueError("start must not be after end")
        return self


class Filters(BaseModel):
    """Search filters, propagated to every sub-query."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str | None = None
    subtype: str | None = None
    lifecycle: str | None = None
    time_range: TimeRange | None = None
    cluster_ids: tuple[str, ...] | None = None

    _encodable = field_validator("type", "subtype", "lifecycle")(_encodable_or_none)
    _encodable_ids = field_validator("cluster_ids")(_encodable_ids)

    @field_validator("type", "subtype", "lifecycle", "cluster_ids")
    @classmethod
    def _no_control_characters(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        """Text from users' one rule (queries, history, memories), for filters too."""
        for item in (value,) if isinstance(value, str) else value or ():
            without_control_characters(item)
        return value

    def without_subtype(self) -> Filters:
        return self.model_copy(update={"subtype": None})


NO_FILTERS = Filters()


@dataclass(frozen=True, slots=True)
class Hit:
    """A memory with its score. ``original_score`` is the backend's score."""

    memory: Memory
    score: float
    original_score: float
    sub_query: int = 0
    boosted: bool = False
    rerank_score: float | None = None  # the LLM's 0-10 relevance, when re-ranked
    superseded_by: str | None = None  # the id of the memory that replaces this one (ranked just above it)

    @classmethod
    def of(cls, memory: Memory, score: float) -> Hit:
        return cls(memory=memory, score=score, original_score=score)

    @property
    def id(self) -> str:
        return self.memory.id


@dataclass(frozen=True, slots=True)
class SubQueryOutcome:
    """What one sub-query's search (with its quality gate) produced."""

    index: int
    query: str
    hits: tuple[Hit, ...]
    retried: bool = False
    reformulation: str | None = None
    error: str | None = None
    timed_out: bool = False
    widened: str | None = None  # it found nothing, then this one more try did: semantic | word_family
    empty: bool = False  # its search (and the quality gate's retry) found nothing


@dataclass(frozen=True, slots=True)
class ReplaceOutcome:
    hits: tuple[Hit, ...]
    attempted: int = 0
    successful: int = 0
    dropped: tuple[str, ...] = field(default_factory=tuple)
