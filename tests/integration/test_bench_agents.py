"""``ferret bench agents`` runs end to end, with real workers and a private
redis-server, on a small LoCoMo-shaped conversation; freshness is a guarantee
(the turn written before the prefetch is found by it), so it is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

TURNS = ["Caroline adopted a grey kitten named Pepper", "Melanie painted a lake at sunrise last week",
         "Caroline signed up for the pottery class on Tuesdays", "Melanie ran her first half marathon in Boston",
         "Caroline is planning a camping trip to Yosemite", "Melanie's daughter started violin lessons",
         "Thanks!", "Caroline found an old photo of her grandmother in Lisbon"]


def test_agents_play_write_prefetch_think_read(tmp_path):
    sample = {"sample_id": "conv-t", "qa": [], "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Caroline" if i % 2 == 0 else "Melanie", "dia_id": f"D1:{i + 1}", "text": text}
                      for i, text in enumerate(TURNS)]}}
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")} | {"PYTHONPATH": str(ROOT)}
    ran = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "agents", "--data", str(data),
                          "--agents", "3", "--history", "1", "--turns", "4", "--periods", "0.6", "--think", "0.3",
                          "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    rows = json.loads((tmp_path / "out" / "agents.json").read_text())
    assert [(row["arrival"], row["agents"], row["turns_per_agent"]) for row in rows] == [
        ("spread", 3, 4), ("lockstep", 3, 4)]
    for row in rows:
        assert row["fresh_checked"] == 12 and row["fresh_rate"] == 1.0
        assert 0 <= row["ready_rate"] <= 1 and row["enqueue_to_ready_p99_ms"] >= row["enqueue_to_ready_p50_ms"] > 0
        assert row["client_round_trips_per_turn"] > 0 and row["redis_commands_per_turn"] > 0
        assert row["cpu_ms_per_turn_workers"] > 0 and row["cpu_ms_per_turn_driver"] > 0  # where a turn's CPU goes
        assert row["cpu_ms_per_turn_redis"] >= 0
    assert "ready" in ran.stdout and "loop stall" in ran.stdout and "CPU ms/turn" in ran.stdout
    quiet = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "agents", "--data", str(data),
                            "--agents", "2", "--history", "1", "--turns", "2", "--periods", "0.6", "--think", "0.3",
                            "--arrivals", "spread", "--no-stall-meter", "--out", str(tmp_path / "quiet")],
                           env=env, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    (row,) = json.loads((tmp_path / "quiet" / "agents.json").read_text())
    assert not any(name.startswith("loop_") for name in row) and "loop stall" not in quiet.stdout  # no ticker ran
    assert row["cpu_ms_per_turn_driver"] > 0 and row["fresh_rate"] == 1.0
