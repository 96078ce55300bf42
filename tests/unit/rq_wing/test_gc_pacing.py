"""The collector's pacing in a worker: the heap is frozen between jobs after a slow full collection, thawed
and frozen again every THAW_SECONDS, and left alone otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from ferret.rq_layer import gc_pacing
from ferret.rq_layer.gc_pacing import SLOW_FULL_COLLECTION_SECONDS, THAW_SECONDS, GcPacing


class _Collector:
    """What the pacing calls of the ``gc`` module, recorded; its callbacks run as CPython runs them."""

    def __init__(self) -> None:
        self.callbacks: list = []
        self.calls: list[str] = []
        self.frozen = 0

    def collection(self, seconds: float, cpu: list[float], generation: int = 2) -> None:
        for callback in list(self.callbacks):
            callback("start", {"generation": generation})
        cpu[0] += seconds
        for callback in list(self.callbacks):
            callback("stop", {"generation": generation, "collected": 0, "uncollectable": 0})

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")
        self.frozen += 1

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def get_freeze_count(self) -> int:
        return self.frozen


def _pacing() -> tuple[GcPacing, _Collector, list[float], list[float]]:
    collector, clock, cpu = _Collector(), [1000.0], [5.0]
    pacing = GcPacing(clock=lambda: clock[0], cpu=lambda: cpu[0], collector=collector)
    pacing.install()
    return pacing, collector, clock, cpu


def test_a_slow_full_collection_freezes_the_heap_between_jobs_after_collecting_it():
    pacing, collector, _clock, cpu = _pacing()
    collector.collection(SLOW_FULL_COLLECTION_SECONDS * 2, cpu)
    assert collector.calls == []  # not inside the collection (a job is running)
    pacing.between_jobs()
    assert collector.calls == ["collect", "freeze"]
    pacing.between_jobs()  # once
    assert collector.calls == ["collect", "freeze"]


def test_fast_full_and_young_collections_leave_the_heap_alone():
    pacing, collector, _clock, cpu = _pacing()
    collector.collection(SLOW_FULL_COLLECTION_SECONDS / 2, cpu)
    collector.collection(SLOW_FULL_COLLECTION_SECONDS * 10, cpu, generation=0)
    pacing.between_jobs()
    assert collector.calls == []


def test_a_frozen_heap_is_thawed_collected_and_frozen_again_every_thaw_seconds():
    pacing, collector, clock, _cpu = _pacing()
    pacing.freeze()  # the start-up freeze
    collector.calls.clear()
    clock[0] += THAW_SECONDS - 1
    pacing.between_jobs()
    assert collector.calls == []
    clock[0] += 1
    pacing.between_jobs()
    assert collector.calls == ["unfreeze", "collect", "freeze"]
    clock[0] += THAW_SECONDS / 2
    pacing.between_jobs()
    assert collector.calls == ["unfreeze", "collect", "freeze"]  # the clock starts again at each freeze


def test_the_freezes_own_collection_does_not_ask_for_another():
    pacing, collector, _clock, cpu = _pacing()
    collector.collect = lambda: collector.collection(SLOW_FULL_COLLECTION_SECONDS * 3, cpu)  # type: ignore[method-assign]
    collector.collection(SLOW_FULL_COLLECTION_SECONDS * 3, cpu)
    pacing.between_jobs()
    assert pacing.freezes == 1
    pacing.between_jobs()
    assert pacing.freezes == 1


def test_install_is_once_and_uninstall_removes_it():
    pacing, collector, _clock, _cpu = _pacing()
    pacing.install()
    assert len(collector.callbacks) == 1
    pacing.uninstall()
    assert collector.callbacks == []


def test_a_failing_pacing_never_reaches_the_worker(monkeypatch):
    def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(gc_pacing.PACING, "between_jobs", broken)
    gc_pacing.between_jobs()  # logged, not raised


def test_with_the_real_collector_what_came_to_stay_is_frozen_and_later_collections_skip_it():
    """In a process of its own (the freeze is process-wide): a large heap built after the start-up freeze
    is frozen at the first gap between jobs after a slow full collection, and garbage made before is
    collected first, not frozen."""
    script = textwrap.dedent("""
        import gc, json
        from ferret.rq_layer import gc_pacing
        gc_pacing.SLOW_FULL_COLLECTION_SECONDS = 0.0  # any full collection counts as slow here
        gc_pacing.freeze_start_up()
        start_up = gc.get_freeze_count()
        kept = [{"tokens": {str(i), str(i + 1)}} for i in range(50_000)]  # came to stay
        import weakref
        class Node: pass
        node = Node(); node.me = node; garbage = weakref.ref(node); del node  # garbage in a reference cycle
        gc_pacing.PACING.freeze_due = False
        gc.collect(0)  # a young collection: not slow, nothing frozen
        gc_pacing.between_jobs()
        young_only = gc_pacing.PACING.freezes
        gc.collect()  # a full collection, as the allocations would set off; then made garbage again
        node = Node(); node.me = node; garbage = weakref.ref(node); del node
        gc_pacing.between_jobs()
        print(json.dumps({"young_only": young_only, "garbage_collected": garbage() is None, "start_up": start_up,
                          "frozen": gc.get_freeze_count(), "kept": len(kept),
                          "tracked_after": len(gc.get_objects()), "freezes": gc_pacing.PACING.freezes}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["young_only"] == 1  # the start-up's
    assert seen["freezes"] == 2  # start-up, then between the jobs
    assert seen["garbage_collected"]  # collected before the freeze, not kept by it
    assert seen["frozen"] >= seen["start_up"] + 2 * 50_000  # each kept dict and its set
    assert seen["tracked_after"] < 1_000  # the later walks see next to nothing
