"""The base of every settings section: unknown keys refused, values frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

ENV_PREFIX = "FERRET_"
ENV_CONFIG_FILE = "FERRET_CONFIG"
ENV_TEST_PREFIX = "FERRET_TEST_"  # the test suite's own variables (FERRET_TEST_NOUS_URL), not settings


class Strict(BaseModel):
    # A field's docstring is its meaning (the reference pages and ``ferret config show`` read it).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
