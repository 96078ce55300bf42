import pytest

from ferret.contract import Turn
from ferret.worker.pipeline.rewrite import rewrite


def _turns(*texts, role="user"):
    return [Turn(role=role, content=t) for t in texts]


@pytest.mark.parametrize(("query", "history", "expected"), [
    ("and what about the other one?", _turns("Compare my BTC and SOL trades", "Tell me about BTC"),
     "and what about SOL?"),
    ("how did it go?", _turns("I opened a BTC long at 61k"), "how did BTC go?"),
    ("what was its stop?", _turns("I opened a BTC long at 61k"), "what was BTC's stop?"),
    ("compare them", _turns("How are ETH and DOGE doing?"), "compare ETH and DOGE"),
    ("what did she say about it?", _turns("Caroline talked about the LGBTQ support group"),
     "what did Caroline say about LGBTQ?"),
    ("et l'autre ?", _turns("Compare BTC et SOL", "Parle-moi de BTC"), "et SOL ?"),
])
def test_references_are_resolved_from_the_history(query, history, expected):
    result = rewrite(query, history)
    assert result.query == expected and result.resolved


@pytest.mark.parametrize(("query", "history"), [
    ("how did it go?", []),  # no history: nothing to resolve
    ("how did it go?", _turns("hello there")),  # no entity in it
    ("What is my BTC thesis?", _turns("Tell me about SOL")),  # no reference in the query
    ("is it better than SOL?", _turns("Tell me about SOL")),  # the only antecedent is named in the query
])
def test_nothing_is_made_up(query, history):
    result = rewrite(query, history)
    assert result.query == query and result.resolved == ()


def test_the_users_turns_come_before_the_assistants():
    history = [Turn(role="user", content="How is my ETH position?"),
               Turn(role="assistant", content="Your ETH long is up; SOL and DOGE are flat.")]
    assert rewrite("when did I open it?", history).query == "when did I open ETH?"


def test_a_comparison_asks_several_things():
    assert rewrite("Compare les avantages et inconvenients du processus X par rapport a Y", []).sub_questions == 3
    assert rewrite("the pros and cons of BTC", []).sub_questions == 2
    assert rewrite("What is my BTC thesis?", []).sub_questions == 1
