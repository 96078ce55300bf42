import pytest

from ferret.text import cache_form, starts_with_question_word, strip_question_words
from ferret.worker.backends.tokens import tokenize


@pytest.mark.parametrize(("query", "stripped"), [
    ("What's my BTC thesis?", "my BTC thesis"),
    ("Tell me about the SOL trade", "the SOL trade"),
    ("Quelle est ma thèse sur BTC ?", "est ma thèse sur BTC"),
    ("¿Cuál es mi tesis sobre BTC?", "¿ es mi tesis sobre BTC"),
    ("Warum habe ich BTC gekauft?", "habe ich BTC gekauft"),
])
def test_question_words_of_every_language_are_stripped(query, stripped):
    assert strip_question_words(query) == stripped


def test_the_benchmark_and_the_cache_read_the_same_words():
    assert starts_with_question_word("Did Jon travel?") and starts_with_question_word("whose idea was it")
    assert not starts_with_question_word("Jon travelled")
    assert cache_form("  What's  my BTC thesis?! ") == "what's my btc thesis"


def test_the_bm25_tokenizer_drops_question_words_and_pronouns():
    assert tokenize("What did they say about my BTC thesis") == ["say", "btc", "thesi"]
