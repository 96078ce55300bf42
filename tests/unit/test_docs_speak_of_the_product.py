"""The manual speaks of the product: the settings' meanings, help texts and generated reference pages name no
design document ("seed 003"), no work behind them (issue numbers, work-log stops) and no path outside the
product (``../shared``); a type with ``|`` renders as a type, not as ``\\|``."""

from __future__ import annotations

import re

from ferret.settings import Settings
from ferret.settings.walk import leaves
from tests.conftest import ROOT

LAB_WORDS = re.compile(r"\bseed \d{3}\b|\bseeds?'? \d|\.\./shared|\bstop \d+\b|\bissue #?\d+\b|\bthe issue\b|"
                       r"\bissue's\b", re.IGNORECASE)


def test_no_setting_speaks_of_the_work_behind_it():
    said = [(leaf.path, leaf.meaning) for leaf in leaves(Settings) if LAB_WORDS.search(leaf.meaning or "")]
    assert said == []


def test_the_reference_pages_speak_of_the_product():
    from docs import reference_pages

    pages = {name: getattr(reference_pages, name)() for name in dir(reference_pages)
             if name.endswith("_page") and callable(getattr(reference_pages, name))}
    assert pages
    for name, text in pages.items():
        assert not LAB_WORDS.search(text), (name, LAB_WORDS.search(text))
    settings = pages["settings_page"]
    assert "<code>str &#124; None</code>" in settings and "`str \\| None`" not in settings


def test_no_page_of_the_manual_speaks_of_the_work_behind_it():
    said = [(str(page.relative_to(ROOT)), found.group()) for page in sorted((ROOT / "docs").rglob("*.md"))
            for found in LAB_WORDS.finditer(page.read_text())]
    readme = [("README.md", found.group()) for found in LAB_WORDS.finditer((ROOT / "README.md").read_text())]
    assert said + readme == []
