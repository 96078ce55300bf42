"""The reference pages are generated from the code (docs/reference_pages.py, at every docs build): every
setting, command, option, metric, exit code, error class and key the code has is on its page."""

from __future__ import annotations

import inspect
import json
import sys

import click
import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import reference_pages

pytestmark = pytest.mark.unit


def test_every_setting_is_on_the_settings_page_with_its_environment_variable():
    from ferret.settings import Settings
    from ferret.settings.walk import leaves

    page = reference_pages.settings_page()
    found = leaves(Settings)
    assert len(found) >= 136
    for leaf in found:
        assert f"| `{leaf.path}` |" in page and f"`{leaf.env}`" in page, leaf.path


def test_every_command_and_option_is_on_the_cli_page():
    from ferret.cli.main import cli

    page = reference_pages.cli_page()

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            assert f"## {prefix} {name}\n" in page, f"{prefix} {name}"
            for parameter in command.params:
                if isinstance(parameter, click.Option):
                    assert f"`{parameter.opts[0]}`" in page, (name, parameter.opts)
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")

    walk(cli, "ferret")


def test_every_metric_with_its_labels_is_on_the_metrics_page():
    from ferret.worker.metrics import CircuitCollector, FerretMetrics, IndexBytesCollector, QueueDepthCollector

    page = reference_pages.metrics_page()
    registry = CollectorRegistry()
    FerretMetrics(registry)
    families = [*registry.collect(),
                *(f for c in (QueueDepthCollector, CircuitCollector, IndexBytesCollector) for f in c.families())]
    for family in families:
        assert f"`{family.name}" in page, family.name
    assert "`ferret_queue_depth` | gauge | `queue`" in page
    assert "`ferret_jobs_total` | counter | `queue`, `status`" in page


def test_every_exit_code_error_and_key_is_on_its_page():
    from ferret import errors, keys
    from ferret.cli import exit_codes

    codes = reference_pages.exit_codes_page()
    for name, value in vars(exit_codes).items():
        if name.isupper() and isinstance(value, int):
            assert f"| {value} |" in codes, name
    errors_page = reference_pages.errors_page()
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.FerretError):
            assert f"`{name}`" in errors_page, name
    keys_page = reference_pages.keys_page()
    for name, function in inspect.getmembers(keys, inspect.isfunction):
        if function.__module__ == keys.__name__ and not name.startswith("_"):
            assert f"| `{name}` |" in keys_page and (function.__doc__ or "").strip(), name


def test_every_dashboard_panel_says_when_it_stays_flat():
    dashboard = json.loads((ROOT / "ops" / "grafana" / "dashboards" / "ferret.json").read_text())
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert set(titles) <= set(reference_pages.FLAT_WHEN), set(titles) - set(reference_pages.FLAT_WHEN)
    assert all(reference_pages.FLAT_WHEN[t] for t in titles)


def test_every_page_of_the_generator_is_in_the_site_navigation():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for value in node.values() for p in pages(value)]
        if isinstance(node, list):
            return [p for item in node for p in pages(item)]
        return []

    assert set(reference_pages.PAGES) <= set(pages(config["nav"]))
