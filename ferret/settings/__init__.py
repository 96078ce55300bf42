"""Settings: one validated object, defaults and units in one place.

Sources, later wins: built-in defaults, a YAML file (``FERRET_CONFIG`` or an
explicit path), then environment variables ``FERRET_<SECTION>__<KEY>`` (for
example ``FERRET_PIPELINE__QUALITY_THRESHOLD=0.3`` or ``FERRET_REDIS__URL``).
Unknown keys are an error everywhere: a misspelt setting must never be
silently dropped.

The sections live in modules by subject (``pipeline``, ``stores``, ``service``, ``llm``); this module
is the whole object and how it is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from ferret.errors import ConfigError
from ferret.settings.llm import AgentSettings, RerankSettings
from ferret.settings.pipeline import (
    DEFAULT_FUSION_WEIGHTS,
    QUERY_TYPES,
    SEED_FUSION_WEIGHTS,
    FusionSettings,
    PipelineSettings,
    SectionSettings,
)
from ferret.settings.service import (
    BreakerSettings,
    CacheSettings,
    HttpSettings,
    LimitSettings,
    RedisSettings,
    SecuritySettings,
    ServiceSettings,
    TracingSettings,
)
from ferret.settings.stores import (
    BackendSettings,
    CoRetrievalSettings,
    LocalSettings,
    NousSettings,
    SemanticSettings,
)
from ferret.settings.strict import ENV_CONFIG_FILE, ENV_PREFIX, ENV_TEST_PREFIX

__all__ = ["DEFAULT_FUSION_WEIGHTS", "ENV_CONFIG_FILE", "ENV_PREFIX", "ENV_TEST_PREFIX", "QUERY_TYPES",
           "SEED_FUSION_WEIGHTS", "AgentSettings", "BackendSettings", "BreakerSettings", "CacheSettings",
           "CoRetrievalSettings", "FusionSettings", "HttpSettings", "LimitSettings", "LocalSettings", "NousSettings",
           "PipelineSettings", "RedisSettings", "RerankSettings", "SectionSettings", "SecuritySettings",
           "SemanticSettings", "ServiceSettings", "Settings", "TracingSettings", "load_settings"]


class Settings(BaseSettings):
    """Every setting. Sources, later wins: the defaults here, the YAML file,
    ``FERRET_`` environment variables (``RQ_REDIS_URL`` for ``redis.url``
    when nothing else names one). ``load_settings`` picks the file and the
    environment; ``Settings()`` reads os.environ and no file."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, env_prefix=ENV_PREFIX,
                                      env_nested_delimiter="__", case_sensitive=False)

    pipeline: PipelineSettings = PipelineSettings()
    backend: BackendSettings = BackendSettings()
    redis: RedisSettings = RedisSettings()
    service: ServiceSettings = ServiceSettings()
    limits: LimitSettings = LimitSettings()
    cache: CacheSettings = CacheSettings()
    rerank: RerankSettings = RerankSettings()
    co_retrieval: CoRetrievalSettings = CoRetrievalSettings()
    tracing: TracingSettings = TracingSettings()
    agent: AgentSettings = AgentSettings()
    semantic: SemanticSettings = SemanticSettings()
    security: SecuritySettings = SecuritySettings()
    breaker: BreakerSettings = BreakerSettings()
    http: HttpSettings = HttpSettings()

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ, file_path = _SOURCES.get((os.environ, None))
        yaml_source = (_yaml_file(file_path),) if file_path is not None else ()
        return (init_settings, _Environment(settings_cls, environ), *yaml_source, _RqRedisUrl(settings_cls, environ))


class _Environment(EnvSettingsSource):
    """``FERRET_<SECTION>__<KEY>`` variables of a given environment (os.environ
    by default). Only names of that shape are settings: one whose section is
    not Ferret's is an error (a typo would otherwise be ignored); any other
    ``FERRET_*`` name (a user's own ``FERRET_KEY`` or ``FERRET_URL``) is left
    alone."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        sections = set(self.settings_cls.model_fields)
        shaped = {}
        for name, value in self._environ.items():
            if not name.upper().startswith(ENV_PREFIX) or "__" not in name:
                continue
            path = name[len(ENV_PREFIX):].lower().split("__")
            if path[0] not in sections or not all(path):
                raise ConfigError(f"environment variable {name}: expected FERRET_<SECTION>__<KEY> with SECTION one "
                                  f"of {', '.join(sorted(sections))}")
            shaped[name] = value
        values = parse_env_vars(shaped, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)
        return {name: None if value == "" else value for name, value in values.items()}


class _RqRedisUrl(PydanticBaseSettingsSource):
    """rq's own ``RQ_REDIS_URL``: a user who exported it for rq's tools means
    the same Redis (the lowest source: any other ``redis.url`` wins)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._url = environ.get("RQ_REDIS_URL")

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {"redis": {"url": self._url}} if self._url else {}


def _yaml_file(path: Path) -> YamlConfigSettingsSource:
    """The YAML source, after checking what it would skip: a missing file, or
    one that does not hold a mapping."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"settings file {path} must hold a mapping at the top")
    return YamlConfigSettingsSource(Settings, yaml_file=path)


_SOURCES: ContextVar[tuple[Mapping[str, str], Path | None]] = ContextVar("ferret_settings_sources")


def load_settings(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load and validate settings; raise ConfigError naming the bad key."""
    env = os.environ if environ is None else environ
    file_path = path or env.get(ENV_CONFIG_FILE)
    token = _SOURCES.set((env, Path(file_path).expanduser() if file_path else None))
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from exc
    finally:
        _SOURCES.reset(token)
