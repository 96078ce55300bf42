import pytest

from ferret.errors import ConfigError
from ferret.settings import load_settings


def test_defaults_match_spec():
    p = load_settings(environ={}).pipeline
    assert (p.quality_threshold, p.relevance_ratio, p.max_results) == (0.20, 0.4, 20)
    assert (p.max_sub_queries, p.max_retries) == (4, 1)
    assert (p.timeout_seconds, p.search_limit_per_query, p.replacement_floor, p.max_replacements) == (3.0, 25, 0.25, 2)
    assert (p.intent_boost, p.max_context_tokens) == (1.3, 4000)


def test_yaml_then_environment(tmp_path):
    path = tmp_path / "ferret.yaml"
    path.write_text("pipeline:\n  max_results: 7\n  intent_boost: 1.5\n")
    settings = load_settings(path, environ={"FERRET_PIPELINE__MAX_RESULTS": "9"})
    assert settings.pipeline.max_results == 9 and settings.pipeline.intent_boost == 1.5


@pytest.mark.parametrize(
    ("environ", "needle"),
    [
        ({"FERRET_PIPELINE__QUALITY_THRESHOL": "0.3"}, "pipeline.quality_threshol"),
        ({"FERRET_PIPELINE__MAX_RESULTS": "-1"}, "pipeline.max_results"),
        ({"FERRET_NOPE": "1"}, "FERRET_<SECTION>__<KEY>"),
        ({"FERRET_BACKEND__KIND": "mongo"}, "backend.kind"),
    ],
)
def test_bad_settings_name_the_key(environ, needle):
    with pytest.raises(ConfigError, match=needle.replace("<", ".").replace(">", ".")):
        load_settings(environ=environ)


def test_unknown_yaml_key_is_an_error(tmp_path):
    path = tmp_path / "ferret.yaml"
    path.write_text("pipeline:\n  max_resultz: 7\n")
    with pytest.raises(ConfigError, match="max_resultz"):
        load_settings(path, environ={})
