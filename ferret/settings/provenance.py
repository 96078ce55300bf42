"""The settings in force and where each value came from: the default, the YAML file, or the environment
(``FERRET_<SECTION>__<KEY>``, or ``RQ_REDIS_URL`` for ``redis.url``), with secrets redacted. What
``ferret config show`` prints."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, SecretStr

from ferret.settings import Settings, load_settings
from ferret.settings.strict import ENV_CONFIG_FILE, ENV_PREFIX
from ferret.settings.walk import Leaf, leaves

REDACTED = "**********"
_SECRET_WORDS = ("api_key", "signing_key", "password", "token")


@dataclass(frozen=True)
class InForce:
    leaf: Leaf
    value: Any  # as shown: secrets redacted, URLs without their password
    source: str  # default | file PATH | env NAME


def _value_at(settings: BaseModel, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _shown(path: str, value: Any) -> Any:
    from ferret.redis_plumbing.redis_conn import redacted

    if isinstance(value, SecretStr):
        return REDACTED if value.get_secret_value() else ""
    if value is not None and any(word in path.rsplit(".", 1)[-1] for word in _SECRET_WORDS) \
            and not path.endswith("_file"):
        return REDACTED
    if isinstance(value, str) and path.endswith("url"):
        return redacted(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _paths(data: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        path = f"{prefix}{str(key).lower()}"
        yield path
        if isinstance(value, Mapping):
            yield from _paths(value, path + ".")


def _environment_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted path -> the FERRET_ variable naming it."""
    found = {}
    for name in environ:
        upper = name.upper()
        if upper.startswith(ENV_PREFIX) and "__" in name:  # the shape of a setting (ferret.settings)
            found[".".join(name[len(ENV_PREFIX):].lower().split("__"))] = name
    return found


def _source(path: str, environment: dict[str, str], file_paths: set[str], file: Path | None,
            environ: Mapping[str, str]) -> str:
    def covers(named: str) -> bool:
        return named == path or named.startswith(path + ".")

    for named, variable in environment.items():
        if covers(named):
            return f"env {variable}"
    if file is not None and any(covers(named) for named in file_paths):
        return f"file {file}"
    if path == "redis.url" and environ.get("RQ_REDIS_URL"):
        return "env RQ_REDIS_URL"
    return "default"


def settings_in_force(path: str | Path | None = None, environ: Mapping[str, str] | None = None
                      ) -> list[InForce]:
    """Every leaf setting's value in force and its source (ConfigError as ``load_settings`` raises it)."""
    env = os.environ if environ is None else environ
    settings = load_settings(path, env)
    named = path or env.get(ENV_CONFIG_FILE)
    file = Path(named).expanduser() if named else None
    data = yaml.safe_load(file.read_text()) if file is not None else None
    file_paths = set(_paths(data)) if isinstance(data, Mapping) else set()
    environment = _environment_paths(env)
    return [InForce(leaf, _shown(leaf.path, _value_at(settings, leaf.path)),
                    _source(leaf.path, environment, file_paths, file, env)) for leaf in leaves(Settings)]
