"""``ferret bench llm`` end to end against a chat server on loopback that speaks the real protocol (the real
model is measured by hand: docs/guides/local-model.md)."""

import json
import re
import sys

import pytest
from click.testing import CliRunner

from ferret.cli.main import cli
from ferret.worker.fakes.agent_chat import ScriptedChat
from tests.unit.benchmarks.test_locomo_bench import locomo_file  # noqa: F401 (a fixture)


def _answer(messages):
    last = messages[-1]["content"]
    if "Rate each snippet" in last:
        count = len(re.findall(r"^\[\d+\]", last, re.MULTILINE))
        return json.dumps({"scores": [{"id": n, "score": 10 - n} for n in range(1, count + 1)]})
    if "Can the question be answered NOW" in last:
        return "Yes.\nACTION: final_answer"
    if "Choose the memories" in last:
        return 'THOUGHT: these\nACTION: final_answer\nARGUMENTS: {"memory_ids": ["D1:1"]}'
    question = re.search(r"QUESTION: (.*)", last).group(1)
    return f'THOUGHT: search it\nACTION: search_memory("{question}")'


@pytest.fixture
def chat():
    server = ScriptedChat([_answer] * 200)
    yield server
    server.close()


def test_the_command_compares_both_stages_and_writes_per_question_rows(chat, locomo_file, tmp_path):  # noqa: F811
    run = CliRunner().invoke(cli, ["bench", "llm", "--data", str(locomo_file), "--base-url", chat.base_url,
                                   "--model", "m", "--rerank-questions", "3", "--agent-questions", "2",
                                   "--deadline", "30", "--out", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    report = json.loads((tmp_path / "out" / "llm.json").read_text())
    rerank, agent = report["summary"]["rerank"], report["summary"]["agent"]
    assert rerank["n"] == 3 and len(report["rerank_rows"]) == 3 and rerank["outcomes"]["ok"] >= 1
    assert set(rerank["outcomes"]) <= {"ok", "too_few"}  # a question with one hit has nothing to re-order
    assert [r["calls"] for r in report["rerank_rows"]] == [int(r["outcome"] == "ok") for r in report["rerank_rows"]]
    assert agent["n"] == len(report["agent_rows"]) >= 1 and agent["outcomes"] == {"ok": agent["n"]}
    assert agent["all_within_deadline"] and agent["parse_repairs_per_run"] >= 1  # the action's own arguments
    assert {r["model"] for r in chat.requests} == {"m"}
    assert "LLM re-rank" in (tmp_path / "out" / "llm.md").read_text() and "sign test" in run.output
    assert sys.modules.get("llama_cpp") is None  # nothing here needs the real model
