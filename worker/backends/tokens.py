"""The search tokenizer: words, lower case, English stopwords and question
words dropped, Snowball-stemmed (PyStemmer). Queries and memories go
through the same function, so the index sees exactly the query's terms."""

from __future__ import annotations

import threading

import Stemmer

from ferret.text import AUXILIARIES, EN_QUESTION_WORD_SET, PERFECT, PRONOUNS, TOKEN

# Lucene's English stop words (its EnglishAnalyzer's default set), the list bm25s shipped
ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())
STOPWORDS = ENGLISH_STOP_WORDS | EN_QUESTION_WORD_SET | AUXILIARIES | PRONOUNS | PERFECT | frozenset(
    "about from with".split())
_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def tokenize(text: str) -> list[str]:
    words = [w for w in TOKEN.findall(text.lower()) if w not in STOPWORDS]
    return _stemmer().stemWords(words) if words else []
