"""Reading memories from JSONL: one Nous-style node per line.

A malformed line never loses the good ones: every valid line is kept, and
every invalid line is reported with its number and the field at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pydantic import ValidationError

from ferret.errors import InvalidMemory
from ferret.json_input import parse_object
from ferret.records import Memory, without_control_characters

MAX_LINE_BYTES = 1_000_000


@dataclass(frozen=True)
class LineError:
    line: int
    error: InvalidMemory

    def __str__(self) -> str:
        return f"line {self.line}: {self.error}"


def parse_memory(text: str) -> Memory:
    """One JSON object to a Memory; raises InvalidMemory naming the field."""
    if len(text) > MAX_LINE_BYTES:
        raise InvalidMemory("line", f"is longer than {MAX_LINE_BYTES} characters")
    if "\x00" in text:
        raise InvalidMemory("line", "contains a NUL byte")
    data = parse_object(text, "line", InvalidMemory)
    try:
        memory = Memory.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "memory"
        raise InvalidMemory(field, err["msg"].removeprefix("Value error, ")) from None
    for field, value in memory.model_dump(exclude_none=True).items():  # queries' rule (ferret.records)
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, str):
                continue
            try:
                without_control_characters(item)
            except ValueError as exc:
                raise InvalidMemory(field, str(exc)) from None
    return memory


def parse_memory_lines(lines: Iterable[str]) -> tuple[list[Memory], list[LineError]]:
    """Every valid memory and every invalid line of ``lines``, at once."""
    memories: list[Memory] = []
    errors: list[LineError] = []
    for batch, invalid in memory_batches(lines, ALL_AT_ONCE):
        memories += batch
        errors += invalid
    return memories, errors


ALL_AT_ONCE = 10**12


def decode_line(raw: bytes, encoding: str) -> str:
    """One line of a file, decoded strictly: undecodable input is refused, never stored mangled."""
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = raw[exc.start:exc.start + 1].hex()
        raise InvalidMemory("line", f"is not valid {encoding} (byte 0x{bad} at byte {exc.start}); if the file "
                                    "is in another encoding, give it with --encoding") from None


def memory_batches(lines: Iterable[str | bytes], size: int, encoding: str = "utf-8"
                   ) -> Iterator[tuple[list[Memory], list[LineError]]]:
    """The valid memories and the invalid lines, ``size`` lines at a time: a
    file of any length is read with the memory of one batch. Lines given as
    bytes are decoded strictly with ``encoding``."""
    memories: list[Memory] = []
    errors: list[LineError] = []
    seen = 0
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                text = decode_line(line, encoding) if isinstance(line, bytes) else line
                memories.append(parse_memory(text))
            except InvalidMemory as exc:
                errors.append(LineError(number, exc))
            seen += 1
        if seen >= size:
            yield memories, errors
            memories, errors, seen = [], [], 0
    if memories or errors:
        yield memories, errors
