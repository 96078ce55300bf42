"""Every Python example in README.md and the documentation (docs/) runs, against a real redis-server and a
real worker, and prints what the page says it does: examples cannot rot.

A page marks an example with ``<!-- example: run by tests/integration/test_doc_examples.py -->`` before its
```` ```python ```` block, and what it prints with ``<!-- prints: REGEX ;; REGEX -->`` after it (each a regex
matched against a line of its output). A Python block without the mark fails the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

MARK = "<!-- example: run by tests/integration/test_doc_examples.py -->"
HTTP_MARK = "<!-- http example: run by tests/integration/test_http_doc_examples.py -->"  # run with a server there
EXAMPLE = re.compile(re.escape(MARK) + r"\n```python\n(.*?)```\n<!-- prints: (.*?) -->", re.DOTALL)


@dataclass(frozen=True)
class Example:
    page: str
    code: str
    prints: tuple[str, ...]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def examples() -> list[Example]:
    found = []
    for page in pages():
        for code, prints in EXAMPLE.findall(page.read_text()):
            found.append(Example(str(page.relative_to(ROOT)), code, tuple(p.strip() for p in prints.split(";;"))))
    return found


def test_every_python_block_is_a_marked_example_with_what_it_prints():
    for page in pages():
        text = page.read_text()
        blocks = text.count("```python\n") - text.count(HTTP_MARK + "\n```python\n")
        assert blocks == len(EXAMPLE.findall(text)), f"{page}: a ```python block without its mark or prints"
    assert len(examples()) >= 6


@pytest.mark.parametrize("example", examples(), ids=lambda e: f"{e.page}:{e.code.splitlines()[0][:30]}")
def test_an_example_runs_and_prints_what_its_page_says(example, env, start_workers):
    start_workers(1)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}
    ran = subprocess.run([sys.executable, "-c", example.code], env={**clean, **env}, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    for wanted in example.prints:
        assert re.search(wanted, ran.stdout, re.MULTILINE), (wanted, ran.stdout)
