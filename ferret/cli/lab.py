"""The retrieval-tuning lab (``benchmarks/`` of the repository) for ``ferret bench retrieval`` and
``ferret bench llm``: it is not in the wheel, so these commands run from a checkout installed with
``pip install -e .``, where the package's folder sits beside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

import ferret


def checkout_root() -> Path | None:
    """The repository that holds the installed ``ferret`` package and its ``benchmarks/`` lab, if any."""
    root = Path(ferret.__file__).resolve().parent.parent
    return root if (root / "benchmarks" / "retrieval.py").is_file() else None


def need_lab(command: str) -> None:
    """Make ``benchmarks`` importable from the checkout; a usage error saying why when there is none."""
    try:
        if importlib.util.find_spec("benchmarks.retrieval") is not None:
            return
    except ModuleNotFoundError:  # no ``benchmarks`` package on the path at all (find_spec imports the parent)
        pass
    root = checkout_root()
    if root is None:
        raise click.UsageError(f"'ferret bench {command}' runs the retrieval-tuning lab, which lives in the "
                               "repository's benchmarks/ folder and is not installed with the wheel: clone the "
                               "repository and run it from there after 'pip install -e .'")
    sys.path.insert(0, str(root))
