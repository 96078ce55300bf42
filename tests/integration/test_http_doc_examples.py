"""Every example of the HTTP API's guides (docs/http) runs against a real ``ferret serve``, a real worker and a
real redis-server, and prints what its page says: curl in bash, the JavaScript client in node, Python.

A page marks an example with ``<!-- http example: run by tests/integration/test_http_doc_examples.py -->``
before its ```` ```bash ````, ```` ```js ```` or ```` ```python ```` block, and what it prints with
``<!-- prints: REGEX ;; REGEX -->`` after it. A ```js or ```python block of these pages without the mark
fails the suite."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool
from tests.integration.http_support import make_key, serve  # noqa: F401  (fixture)
from tests.integration.js_package import js_project, tsc  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

MARK = "<!-- http example: run by tests/integration/test_http_doc_examples.py -->"
EXAMPLE = re.compile(re.escape(MARK) + r"\n```(bash|js|python)\n(.*?)```\n<!-- prints: (.*?) -->", re.DOTALL)
PAGES = sorted((ROOT / "docs" / "http").glob("*.md"))


@dataclass(frozen=True)
class Example:
    page: str
    language: str
    code: str
    prints: tuple[str, ...]


def examples() -> list[Example]:
    return [Example(page.name, language, code, tuple(p.strip() for p in prints.split(";;")))
            for page in PAGES for language, code, prints in EXAMPLE.findall(page.read_text())]


def test_every_js_and_python_block_of_the_http_guides_is_a_marked_example():
    for page in PAGES:
        text = page.read_text()
        blocks = text.count("```js\n") + text.count("```python\n")
        assert blocks == sum(1 for language, _, _ in EXAMPLE.findall(text) if language != "bash"), page
    assert {e.page for e in examples()} >= {"curl.md", "javascript.md", "python.md", "mcp-remote.md"}


def _command(example: Example, directory: Path, js_project: Path) -> list[str]:  # noqa: F811
    if example.language == "bash":
        return ["bash", "-euo", "pipefail", "-c", example.code]
    if example.language == "python":
        return [sys.executable, "-c", example.code]
    node = require_tool("node", "Node.js 18 or newer (apt-get install nodejs)")
    script = js_project / f"example-{directory.name}.mjs"  # in the project that installed the packed client
    script.write_text(example.code)
    return [node, str(script)]


def test_the_javascript_examples_compile_under_strict_typescript(js_project):  # noqa: F811
    """The guides' JavaScript, compiled by ``tsc --strict`` against the packed client's types."""
    sources = []
    for number, example in enumerate(e for e in examples() if e.language == "js"):
        source = js_project / f"doc_example_{number}.ts"
        source.write_text(example.code)
        sources.append(source.name)
    assert sources
    (js_project / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "target": "es2022", "module": "nodenext",
                            "moduleResolution": "nodenext", "types": ["node"], "skipLibCheck": False},
        "files": sources}))
    compiled = subprocess.run([tsc(js_project), "-p", "tsconfig.json"], cwd=js_project, capture_output=True,
                              text=True, timeout=300)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr


@pytest.mark.parametrize("example", examples(), ids=lambda e: f"{e.page}:{e.language}:{e.code.splitlines()[0][:24]}")
def test_an_http_example_runs_and_prints_what_its_page_says(example, env, start_workers, serve,  # noqa: F811
                                                           redis_client, tmp_path, js_project):  # noqa: F811
    start_workers(1)
    served = serve()
    key = make_key(env, "-n", "kitchen")
    # The pages' variables beside Ferret's own settings, as in a user's shell: Ferret runs there too.
    shell = {**env, "FERRET_URL": served.url, "FERRET_KEY": key}
    ran = subprocess.run(_command(example, tmp_path, js_project), env=shell, cwd=tmp_path, capture_output=True,
                         text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for wanted in example.prints:
        assert re.search(wanted, ran.stdout, re.MULTILINE), (wanted, ran.stdout)
    beside = subprocess.run([sys.executable, "-m", "ferret.cli.main", "keys", "list"], env=shell, cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert beside.returncode == 0, beside.stdout + beside.stderr
    connected = subprocess.run([sys.executable, "-c", "import ferret; ferret.connect().close()"], env=shell,
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert connected.returncode == 0, connected.stderr
