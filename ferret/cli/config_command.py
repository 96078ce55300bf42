"""``ferret config``: the settings in force, and where each value came from."""

from __future__ import annotations

import json

import click

from ferret.cli.options import fail
from ferret.errors import FerretError


@click.group("config")
def config() -> None:
    """The settings in force (defaults, the YAML file, FERRET_* environment variables)."""


@config.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object: setting -> {value, source}.")
@click.option("--changed", is_flag=True, help="Only the settings that are not at their default.")
@click.pass_context
def show(ctx: click.Context, as_json: bool, changed: bool) -> None:
    """Every setting in force with its source (default, file PATH, env NAME); secrets redacted."""
    from ferret.settings.provenance import settings_in_force

    root = ctx.find_root()
    try:
        rows = settings_in_force(root.params.get("config_path"))
    except FerretError as exc:
        fail(exc)
    if changed:
        rows = [row for row in rows if row.source != "default"]
    if as_json:
        click.echo(json.dumps({row.leaf.path: {"value": row.value, "source": row.source} for row in rows},
                              default=str, indent=2))
        return
    width = max((len(row.leaf.path) for row in rows), default=0)
    for row in rows:
        click.echo(f"{row.leaf.path:<{width}}  {json.dumps(row.value, default=str)}  ({row.source})")
