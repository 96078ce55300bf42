import pytest

from worker.pipeline.clauses import standalone_questions


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
