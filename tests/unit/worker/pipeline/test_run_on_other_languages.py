"""Run-on questions in French, Spanish and German: the split finds the second question by each language's
own sign of a direct question (a hyphenated inversion or "est-ce que", an accented interrogative, the verb
right after the question word), and leaves whole a relative or an indirect question that opens with the
same words."""

import pytest

from ferret.worker.pipeline.classify import classify
from ferret.worker.pipeline.decompose import decompose
from ferret.worker.pipeline.other_languages import language_of


def parts(text: str) -> tuple[str, ...]:
    return decompose(text, classify(text), 4).parts


@pytest.mark.parametrize("text, expected", [
    ("Où habite Marie quand est-elle partie", ("Où habite Marie", "quand est-elle partie")),
    ("Où habite Marie et quand est-elle partie", ("Où habite Marie", "quand est-elle partie")),
    ("Comment s'appelle son chien pourquoi l'a-t-elle adopté",
     ("Comment s'appelle son chien", "pourquoi l'a-t-elle adopté")),
    ("Dónde vive María cuándo se fue", ("Dónde vive María", "cuándo se fue")),
    ("Qué libro compró Juan y dónde lo leyó", ("Qué libro compró Juan", "dónde lo leyó")),
    ("¿Dónde vive María?¿Cuándo se fue?", ("Dónde vive María", "Cuándo se fue")),
    ("Wo wohnt Anna wann ist sie umgezogen", ("Wo wohnt Anna", "wann ist sie umgezogen")),
    ("Wo wohnt Anna und wann ist sie umgezogen", ("Wo wohnt Anna", "wann ist sie umgezogen")),
    ("Was hat Anna gekauft wie viel hat es gekostet", ("Was hat Anna gekauft", "wie viel hat es gekostet")),
])
def test_a_second_direct_question_is_split_off(text, expected):
    assert parts(text) == expected


@pytest.mark.parametrize("text", [
    "Qui est la femme qui habite à Paris",  # a relative "qui" and its verb
    "Où est le livre que Marie a acheté",
    "Où est la ville où habite Marie",  # a relative "où" with its verb first: no hyphen, no cut
    "Je sais où elle habite",
    "La casa donde vive María es grande",  # the plain "donde" joins clauses
    "¿Sabes dónde vive María?",  # an indirect question keeps its accent; "¿Sabes" asks nothing alone
    "No sé dónde vive María",
    "Weißt du wo Anna wohnt",  # the subject after "wo": a subordinate clause
    "Wann hat Anna gesagt wo sie wohnt",
    "What was the name of the book was given to her",  # English: "was" is not German's "what" here
])
def test_one_question_stays_whole(text):
    assert parts(text) == (text,)


def test_a_clause_is_read_in_the_language_its_function_words_say():
    assert language_of("was hat anna gekauft und was hat es gekostet".split()) == "de"
    assert language_of("what was the name of the book".split()) == "en"
    assert language_of("où habite marie et quand est-elle partie".split()) == "fr"
    assert language_of("dónde vive maría y cuándo se fue".split()) == "es"
    assert language_of("une y".split()) == "en"  # a tie between French and Spanish: no other language's rules
