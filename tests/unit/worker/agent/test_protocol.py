import pytest

from ferret.worker.agent.protocol import ToolCall, concludes, parse_arguments, parse_decision


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


# Verbatim answers of Qwen2.5-Coder-1.5B-Instruct (Q4, llama.cpp's server, this loop's prompts) on LoCoMo
# dev questions, 2026-11-25.
REAL_TWO_CALLS_ON_ONE_LINE = (
    "THOUGHT: Based on the memories found so far, I will compare Melanie's feelings about her family after the "
    "accident with her experience at the pottery workshop.\n"
    'ACTION_1: lookup_memory(ids=["D8:2", "D18:3"]); lookup_memory(ids=["D2:6", "D14:7"])')
REAL_ECHOED_INSTRUCTION = (
    "THOUGHT: Based on the memories found so far, I will compare Melanie's feelings about her family after the "
    "accident with her experience at the pottery workshop.\n"
    'ACTION_1: lookup_memory\nARGUMENTS_1: {"ids": ["D8:2", "D18:3"]}\n'
    'ACTION_2: lookup_memory\nARGUMENTS_2: {"ids": ["D2:6", "D14:7"]}\n'
    "final_answer and ask_clarification are always a single action.")
REAL_TRAILING_WORD = (
    "THOUGHT: To answer why Tim and John find LeBron inspiring, I need to look for memories that discuss "
    "LeBron's impact on their lives.\n"
    'ACTION_1: lookup_memory\nARGUMENTS_1: {"ids": ["D25:7", "D26:18"]}\nfinal_answer')
REAL_REFLECTION_ECHO = "ACTION: continue, and say what is missing."


def test_two_calls_on_one_action_line_are_two_actions():
    decision = parse_decision(REAL_TWO_CALLS_ON_ONE_LINE)
    assert decision.actions == (ToolCall("lookup_memory", {"ids": ["D8:2", "D18:3"]}),
                                ToolCall("lookup_memory", {"ids": ["D2:6", "D14:7"]}))
    assert decision.repairs == ("several_calls_in_one_action",)


def test_prose_after_the_arguments_json_is_dropped():
    echoed = parse_decision(REAL_ECHOED_INSTRUCTION)
    assert echoed.actions == (ToolCall("lookup_memory", {"ids": ["D8:2", "D18:3"]}),
                              ToolCall("lookup_memory", {"ids": ["D2:6", "D14:7"]}))
    trailing = parse_decision(REAL_TRAILING_WORD)
    assert trailing.actions == (ToolCall("lookup_memory", {"ids": ["D25:7", "D26:18"]}),)
    assert trailing.repairs == ("arguments_repaired",)


def test_a_reflection_that_echoes_the_prompt_does_not_conclude():
    assert not concludes(REAL_REFLECTION_ECHO)


def test_key_value_arguments_with_a_list_are_read_as_literals():
    assert parse_arguments('ids=["D8:2", "D18:3"]') == {"ids": ["D8:2", "D18:3"]}
