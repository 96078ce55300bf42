import pytest

from worker.agent.protocol import ToolCall, concludes, parse_arguments, parse_decision


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


# Shaped as issue 31 reports Qwen2.5-Coder-1.5B-Instruct's answers behind llama.cpp's server: the argument
# list in the action's name, then an observation, a thought and an action of its own (not its verbatim text).
RAN_ON = """THOUGHT: I should search for the user's BTC thesis first.
ACTION: search_memory(query)
ARGUMENTS: {"query": "BTC thesis"}
OBSERVATION: search_memory found m01 BTC thesis: halving supply shock
THOUGHT: Now I have the thesis, I can answer.
ACTION: final_answer
ARGUMENTS: {"memory_ids": ["m01"], "reason": "it is the thesis"}"""


def test_what_a_small_model_invents_after_its_action_is_dropped():
    decision = parse_decision(RAN_ON)
    assert decision.actions == (ToolCall("search_memory", {"query": "BTC thesis"}),)
    assert decision.thought == "I should search for the user's BTC thesis first."
    assert decision.repairs == ("invented_steps",)


@pytest.mark.parametrize(("action", "arguments"), [
    ('search_memory("BTC thesis")', {"query": "BTC thesis"}),
    ("search_memory('BTC thesis')", {"query": "BTC thesis"}),
    ('search_memory(query="BTC thesis", filters={"type": "concept"})',
     {"query": "BTC thesis", "filters": {"type": "concept"}}),
    ('search_memory({"query": "BTC thesis"})', {"query": "BTC thesis"}),
    ("search_memory(BTC thesis after the halving)", {"query": "BTC thesis after the halving"}),
    ('final_answer(memory_ids=["m01", "m03"], reason="both")', {"memory_ids": ["m01", "m03"], "reason": "both"}),
    ('`compare_entities(a="BTC", b="SOL")`', {"a": "BTC", "b": "SOL"}),
])
def test_arguments_written_into_the_action_are_read_from_there(action, arguments):
    decision = parse_decision(f"THOUGHT: go\nACTION: {action}")
    assert decision.actions == (ToolCall(decision.actions[0].name, arguments),)
    assert decision.repairs == ("arguments_in_action",)


def test_a_parameter_name_in_the_action_is_a_placeholder_and_arguments_win():
    assert parse_decision("THOUGHT: go\nACTION: search_memory(query)").actions == (ToolCall("search_memory", {}),)
    both = parse_decision('THOUGHT: go\nACTION: compare_entities(a, b)\nARGUMENTS: {"a": "BTC", "b": "SOL"}')
    assert both.actions == (ToolCall("compare_entities", {"a": "BTC", "b": "SOL"}),) and both.repairs == ()


def test_code_in_an_action_s_parenthesis_is_only_text():
    decision = parse_decision('THOUGHT: go\nACTION: search_memory(__import__("os").system("touch /tmp/x"))')
    assert decision.actions[0].arguments == {"query": '__import__("os").system("touch /tmp/x")'}


def test_prose_arguments_count_as_a_repair_and_clean_json_does_not():
    prose = parse_decision("THOUGHT: go\nACTION: search_memory\nARGUMENTS: the wine Anna likes")
    assert prose.actions[0].arguments == {"query": "the wine Anna likes"}
    assert prose.repairs == ("arguments_repaired",)
    clean = parse_decision('THOUGHT: go\nACTION: search_memory\nARGUMENTS: {"query": "wine"}')
    assert clean.repairs == ()
