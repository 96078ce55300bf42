"""Questions joined by nothing a rule names: a run-on with no punctuation, a separator symbol, an enumeration's
marks, an abbreviation, a request phrased as a command, typos in the question words. The split finds each
question where a direct question opens; it leaves alone the clauses of one question."""

import pytest

from ferret.worker.pipeline.classify import classify
from ferret.worker.pipeline.decompose import decompose
from ferret.worker.pipeline.typos import mend_question_words


def parts(text: str) -> tuple[str, ...]:
    mended = mend_question_words(text)
    return decompose(mended, classify(mended), 4).parts


@pytest.mark.parametrize("text", [
    "When did Caroline go to the museum what did Melanie paint last week",
    "when did caroline go to the museum what did melanie paint last week",
    "When did Caroline go to the museum | what did Melanie paint last week?",
    "When did Caroline go to the museum • what did Melanie paint last week?",
    "When did Caroline go to the museum -> what did Melanie paint last week?",
    "When did Caroline go to the museum // what did Melanie paint last week?",
    "a) When did Caroline go to the museum b) What did Melanie paint last week",
    "* When did Caroline go to the museum * What did Melanie paint last week",
    "When did Caroline go to the museum, btw what did Melanie paint last week?",
    "Tell me when did Caroline go to the museum and remind me what did Melanie paint last week.",
    "I want to know when did Caroline go to the museum, I want to know what did Melanie paint last week.",
    "When did Caroline go to the museum adn waht did Melanie paint last week?",
    "When did Caroline go to the museum wehn did Melanie paint the sunrise",
])
def test_two_questions_however_joined_are_two_parts(text):
    found = parts(text)
    assert len(found) == 2, found
    assert "museum" in found[0] and "caroline" in found[0].lower() and "paint" in found[1].lower()


@pytest.mark.parametrize("text", [
    "What is the name of the place where Caroline was born?",
    "How did Melanie feel when she won the award at the charity race?",
    "What did Caroline say about what makes Melanie happy?",
    "What kind of painting did Caroline share with Melanie on October 13?",
    "What does Tim have that serves as a reminder of hard work and is his prized possession?",
    "Which book did Melanie read that explains how the brain works?",
])
def test_the_clauses_of_one_question_stay_one_question(text):
    assert parts(text) == (mend_question_words(text),)


def test_three_questions_in_a_run_on_are_three_parts():
    found = parts("When did Caroline go to the museum what did Melanie paint last week "
                  "where did Jon open his dance studio")
    assert len(found) == 3 and "studio" in found[2]


def test_mistyped_question_words_and_joins_are_mended_and_real_words_left_alone():
    assert mend_question_words("Waht is X adn hwo did Y go? Wehn, whre, whcih") == \
        "What is X and how did Y go? When, where, which"
    assert mend_question_words("Where were you? Here is the cold hat.") == "Where were you? Here is the cold hat."
