"""``ferret config show``: every leaf setting, its value in force and where it came from; secrets redacted."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ferret.cli.main import cli
from ferret.settings import Settings
from ferret.settings.provenance import REDACTED, settings_in_force
from ferret.settings.walk import leaves


def test_every_leaf_has_a_type_a_default_an_env_name_and_a_meaning():
    found = leaves(Settings)
    assert len(found) >= 136 and len({leaf.path for leaf in found}) == len(found)
    for leaf in found:
        assert leaf.meaning and leaf.type and leaf.env.startswith("FERRET_"), leaf


def test_each_value_says_its_source_and_secrets_never_show(tmp_path):
    config = tmp_path / "ferret.yaml"
    config.write_text("pipeline:\n  max_results: 9\n  fusion:\n    weights:\n      FACTUAL: [0.5, 0.5]\n"
                      "backend:\n  nous:\n    api_key: file-secret\n")
    environ = {"FERRET_CACHE__TTL_SECONDS": "42", "FERRET_AGENT__API_KEY": "env-secret",
               "RQ_REDIS_URL": "redis://:hunter2@example:6379/0"}
    rows = {row.leaf.path: row for row in settings_in_force(config, environ)}
    assert (rows["pipeline.max_results"].value, rows["pipeline.max_results"].source) == (9, f"file {config}")
    assert rows["pipeline.fusion.weights"].source == f"file {config}"
    assert (rows["cache.ttl_seconds"].value, rows["cache.ttl_seconds"].source) == (42, "env FERRET_CACHE__TTL_SECONDS")
    assert rows["redis.url"].source == "env RQ_REDIS_URL" and "hunter2" not in rows["redis.url"].value
    assert rows["agent.api_key"].value == REDACTED and rows["backend.nous.api_key"].value == REDACTED
    assert rows["pipeline.min_results"].source == "default"
    shown = json.dumps([row.value for row in rows.values()], default=str)
    assert "env-secret" not in shown and "file-secret" not in shown and "hunter2" not in shown


def test_the_command_prints_every_setting_and_the_changed_ones(tmp_path):
    runner = CliRunner()
    everything = runner.invoke(cli, ["config", "show", "--json"], env={"FERRET_LIMITS__MAX_RESULTS": "50"})
    assert everything.exit_code == 0, everything.output
    document = json.loads(everything.output)
    assert set(document) == {leaf.path for leaf in leaves(Settings)}
    assert document["limits.max_results"] == {"value": 50, "source": "env FERRET_LIMITS__MAX_RESULTS"}
    changed = runner.invoke(cli, ["config", "show", "--changed"], env={"FERRET_LIMITS__MAX_RESULTS": "50"})
    assert changed.output.splitlines() == ['limits.max_results  50  (env FERRET_LIMITS__MAX_RESULTS)']


def test_a_bad_setting_is_named_with_exit_code_2():
    bad = CliRunner().invoke(cli, ["config", "show"], env={"FERRET_CACHE__TTL_SECONDS": "-1"})
    assert bad.exit_code == 2 and "cache.ttl_seconds" in bad.output
