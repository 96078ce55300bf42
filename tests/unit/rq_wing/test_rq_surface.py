"""The RQ surface Ferret relies on, pinned: the RQ methods its worker, job and queue classes redefine (with
RQ's signatures), RQ's private names its code touches, and RQ's Redis key formats. An RQ release that changes
any of them fails here, in CI, not in production: read the diff, adapt Ferret, then write the new surface
(``python -m tests.unit.rq_wing.rq_surface > tests/unit/rq_wing/rq_surface.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import rq

from tests.unit.rq_wing.rq_surface import spelt_by_ferret, surface

PINNED = json.loads((Path(__file__).with_name("rq_surface.json")).read_text())


def test_the_rq_methods_ferret_redefines_keep_their_signatures():
    now = surface()["overridden"]
    changed = {name: (PINNED["overridden"].get(name), signature) for name, signature in now.items()
               if PINNED["overridden"].get(name) != signature}
    gone = sorted(set(PINNED["overridden"]) - set(now))
    assert not changed and not gone, f"RQ {rq.__version__}: changed {changed}, no longer redefined {gone}"


def test_the_private_names_ferret_touches_are_still_rqs():
    assert surface()["private_names"] == PINNED["private_names"], f"RQ {rq.__version__}"


def test_rqs_key_formats_are_the_ones_ferret_spells_out():
    formats = surface()["key_formats"]
    assert formats == PINNED["key_formats"], f"RQ {rq.__version__}"
    for prefix in spelt_by_ferret():  # each key Ferret writes out itself is one RQ forms
        assert any(key.startswith(prefix) for key in formats.values()), prefix


def test_the_surface_is_read_off_the_code():
    """The reading finds what is there: the worker's redefined wait, a private name, a key."""
    now = surface()
    assert "rq.worker.worker_classes.Worker.wait_for_horse" in now["overridden"]
    assert "_stop_requested" in now["private_names"]
    assert now["key_formats"]["job"] == "rq:job:"
