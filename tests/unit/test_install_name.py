"""The distribution's name is ours: ``ferret-memory`` (PyPI's ``ferret`` is another project), and every install
line of the README, the docs, the help texts and the error messages names it; the import root stays ``ferret``."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import ROOT

DISTRIBUTION = "ferret-memory"
PIP_INSTALL = re.compile(r"pip install ([^\n`&|;)]*)")


def _installed_names(text: str) -> list[str]:
    """The names a ``pip install`` installs from a registry (its arguments that are not options, paths, wheel
    files or the checkout's '.'), of every such command in ``text``."""
    names = []
    for arguments in PIP_INSTALL.findall(text):
        for token in arguments.split():
            name = re.split(r"[\[<>=!~]", token.strip("'\""), maxsplit=1)[0]
            if name.startswith("ferret") and "/" not in name and not name.endswith((".whl", ".tar.gz")):
                names.append(name)
    return names


def _texts() -> list[tuple[str, str]]:
    found = [("README.md", (ROOT / "README.md").read_text())]
    for folder, pattern in (("docs", "*.md"), ("ferret", "*.py"), ("worker", "*.py"), ("producer", "*.py"),
                            ("ops", "*")):
        for path in (ROOT / folder).rglob(pattern):
            if path.is_file() and path.suffix in (".md", ".py", ".service", ".yml", ".yaml", ".conf", ".sh", ""):
                found.append((str(path.relative_to(ROOT)), path.read_text(errors="replace")))
    return found


def test_the_distribution_is_named_ferret_memory():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION


def test_every_install_line_names_the_distribution():
    named = [(where, name) for where, text in _texts() for name in _installed_names(text)]
    assert named, "the docs have install lines"
    assert {name for _, name in named} == {DISTRIBUTION}, [(w, n) for w, n in named if n != DISTRIBUTION]


def test_the_image_lock_pins_the_serve_extra_so_the_compose_api_runs():
    """The image installs requirements.lock and the wheel without dependencies; compose's ``api`` service runs
    ``ferret serve`` from it, so every requirement of the serve extra is pinned there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {line.split("==")[0].lower().replace("_", "-") for line in
              (ROOT / "requirements.lock").read_text().splitlines() if "==" in line}
    wanted = {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()
              for requirement in project["optional-dependencies"]["serve"] + project["dependencies"]
              if "platform_system" not in requirement}
    assert wanted <= pinned, wanted - pinned
