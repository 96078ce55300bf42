from ferret.stats import JobStats
from ferret.worker.metrics import FerretMetrics


def _value(metrics, name, **labels):
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_fusion_stats_become_counters_and_odd_entries_are_ignored():
    metrics = FerretMetrics()
    fusion = {"contributed": {"lexical": 12, "graph": 3, "semantic": 0, "bogus": 4},
              "shifts": [{"graph": 0.3}, {}, {"graph": 0.1, "semantic": 0.05}, "junk"],
              "errors": {"semantic": 1, "lexical": "x"}}
    metrics._record_stats(JobStats(fusion=fusion, route="SIMPLE"), "local")
    assert _value(metrics, "ferret_retriever_results_total", retriever="lexical") == 12
    assert _value(metrics, "ferret_retriever_results_total", retriever="graph") == 3
    assert _value(metrics, "ferret_fusion_shifts_total", retriever="graph") == 2
    assert _value(metrics, "ferret_fusion_shifts_total", retriever="semantic") == 1
    assert _value(metrics, "ferret_retriever_errors_total", retriever="semantic") == 1
    assert _value(metrics, "ferret_retriever_errors_total", retriever="lexical") == 0
    assert metrics.registry.get_sample_value("ferret_retriever_results_total", {"retriever": "bogus"}) is None
