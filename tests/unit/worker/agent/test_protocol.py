import pytest

from worker.agent.protocol import concludes, parse_arguments, parse_decision


def test_a_single_action():
    decision = parse_decision('THOUGHT: need BTC\nACTION: search_memory\nARGUMENTS: {"query": "BTC thesis"}')
    assert decision.thought == "need BTC"
    assert [(a.name, a.arguments) for a in decision.actions] == [("search_memory", {"query": "BTC thesis"})]


def test_two_numbered_actions_at_most():
    decision = parse_decision("THOUGHT: both\nACTION_1: search_memory\nARGUMENTS_1: {\"query\": \"BTC\"}\n"
                              "ACTION_2: search_memory\nARGUMENTS_2: {\"query\": \"SOL\"}\n"
                              "ACTION_3: search_memory\nARGUMENTS_3: {\"query\": \"ETH\"}")
    assert [a.arguments["query"] for a in decision.actions] == ["BTC", "SOL"]


def test_a_terminal_action_is_never_run_beside_another():
    decision = parse_decision("THOUGHT: x\nACTION_1: search_memory\nARGUMENTS_1: {\"query\": \"BTC\"}\n"
                              "ACTION_2: final_answer\nARGUMENTS_2: {\"memory_ids\": [\"m1\"]}")
    assert [a.name for a in decision.actions] == ["final_answer"]


def test_think_blocks_markdown_and_case_are_tolerated():
    decision = parse_decision("<think>ACTION: final_answer</think>\n**Thought:** hmm\n**Action:** `Search_Memory`\n"
                              "**Arguments:** ```json\n{\"query\": \"SOL\"}\n```")
    assert [(a.name, a.arguments) for a in decision.actions] == [("search_memory", {"query": "SOL"})]


@pytest.mark.parametrize(("raw", "expected"), [
    ("{query: 'BTC thesis',}", {"query": "BTC thesis"}),
    ('{"query": "BTC thesis"', {"query": "BTC thesis"}),
    ("query=BTC thesis", {"query": "BTC thesis"}),
    ('memory_ids: "m1, m2"', {"memory_ids": "m1, m2"}),
    ("BTC thesis", {"query": "BTC thesis"}),
    ("", {}),
])
def test_malformed_arguments_are_repaired(raw, expected):
    assert parse_arguments(raw) == expected


def test_no_action_is_an_empty_decision():
    assert parse_decision("I think BTC is interesting.").actions == ()


def test_a_reflection_is_binding_only_when_it_says_final_answer():
    assert concludes("Enough.\nACTION: final_answer")
    assert not concludes("Not yet.\nACTION: continue")
    assert not concludes("<think>maybe ACTION: final_answer</think>\nACTION: continue")
