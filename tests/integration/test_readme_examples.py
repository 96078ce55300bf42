"""Every Python example in README runs, against a real redis-server and a
real worker, and prints what README says it does: examples cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MARK = "<!-- README example: run by tests/integration/test_readme_examples.py -->"


# what each example prints, in order of appearance (a new example adds its row)
EXPECTED = [
    [r"^ok \['m1'", r"Dinner party for Anna", r"^m2$"],
    [r"^ok False True$", r"Anna moved the dinner to Saturday"],
    [r"^rome [A-Z]+$", r"^rome True$"],
    [r"Carol booked the Lisbon flight", r"^50 \{'ok'\}$"],
    [r"^\['forget', 'get_context', 'prefetch', 'remember', 'search_memory'\]$", r"^k$", r"^True$"],
]


def examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(re.escape(MARK) + r"\n```python\n(.*?)```", text, re.DOTALL)


def test_readme_has_an_expectation_for_every_example():
    assert examples() and len(examples()) == len(EXPECTED)


@pytest.mark.parametrize("number", range(len(examples())))
def test_a_readme_example_runs(number, env, start_workers):
    start_workers(1)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}
    ran = subprocess.run([sys.executable, "-c", examples()[number]], env={**clean, **env}, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    for wanted in EXPECTED[number]:
        assert re.search(wanted, ran.stdout, re.MULTILINE), (wanted, ran.stdout)
