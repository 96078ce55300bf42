import pytest

from ferret.worker.pipeline.clauses import standalone_questions


@pytest.mark.parametrize("query, parts", [
    ("What does Caroline's drawing mean, and on top of that would Melanie go on a trip soon?",
     ["What does Caroline's drawing mean", "would Melanie go on a trip soon?"]),
    ("What instruments does Melanie play. Another thing: when did Caroline hike?",
     ["What instruments does Melanie play", "when did Caroline hike?"]),
    ("Where did Oliver hide his bone? I'd also like to know what Melanie reads.",
     ["Where did Oliver hide his bone?", "what Melanie reads"]),
    ("What do Melanie's kids like (and what books has Melanie read)?",
     ["What do Melanie's kids like", "what books has Melanie read?"]),
    ("What events has Caroline joined / would Caroline pursue counseling?",
     ["What events has Caroline joined", "would Caroline pursue counseling?"]),
    ("Who is Melanie a fan of. Where did Oliver hide his bone.",
     ["Who is Melanie a fan of", "Where did Oliver hide his bone"]),
])
def test_two_questions_that_stand_alone_are_two_however_joined(query, parts):
    assert standalone_questions(query) == parts


@pytest.mark.parametrize("query", [
    "Was the first half of September 2022 a good month for Nate? Answer yes or no.",  # not a question
    "What did Caroline (the counselor) research?",  # a bracket that asks nothing
    "What did Caroline say, and to whom?",  # no word of its own to search
    "What did Jon do, and then she was the best?",  # a statement: its subject comes first
    "According to Gina, what makes her happy?",  # a frame, not a boundary
    "What is Dr. Smith's advice?",  # an abbreviation's full stop
    "When did Jon and Gina decide to collaborate?",
])
def test_one_question_stays_one(query):
    assert standalone_questions(query) == [query]


@pytest.mark.parametrize("query, parts", [
    ("What did Caroline research, plus what pet does Caroline have?",
     ["What did Caroline research", "what pet does Caroline have?"]),
    ("When did Melanie paint, followed by how long has Caroline been running?",
     ["When did Melanie paint", "by how long has Caroline been running?"]),  # "by how": a preposition may lead
    ("What might John's degree be in & when did Maria get a medal?",
     ["What might John's degree be in", "when did Maria get a medal?"]),
    ("Where did Jon travel + did Gina open her store?", ["Where did Jon travel", "did Gina open her store?"]),
    ("What inspired Caroline's painting, plus who performed at the concert?",  # subject questions
     ["What inspired Caroline's painting", "who performed at the concert?"]),
])
def test_a_comma_or_a_joining_symbol_between_two_direct_questions_is_a_boundary(query, parts):
    assert standalone_questions(query) == parts


@pytest.mark.parametrize("query", [
    "When Caroline moved, what did she bring with her?",  # a preface: the subject before any auxiliary
    "When she was young, what did Melanie want to be?",
    "What did Caroline buy, a car or a bike?",  # a list of answers, not a question
    "Which books, movies & songs does Melanie like?",
    "Did Jon, who runs a dance studio, win a competition?",
    "When asked, what did Caroline say?",  # a two-word preface
    "How to start, what did Melanie suggest?",
])
def test_a_weak_boundary_that_does_not_join_two_direct_questions_is_not_cut(query):
    assert standalone_questions(query) == [query]
