"""Question words typed in a hurry, mended before anything reads the query ("waht", "wehn", "hwo", "adn"):
the classifier, the split and the routes look for question words and joins, and a typo in one hides a
question. Only misspellings that are no English word are mended (one letter dropped or two swapped:
"were", "here", "hat", "cold" stay as they are); searching is unchanged, since the lexical search drops
question words anyway."""

from __future__ import annotations

import re

_MENDED = {
    "what": "waht whta wht hwat", "when": "wehn whne whn hwen", "where": "whre wher wehre wheer whree hwere",
    "which": "whcih wich whih whic whch wihch whihc hwich hich", "who": "woh", "whose": "whos whoes whse wohse",
    "why": "wyh hwy", "how": "hwo ohw", "did": "ddi idd", "does": "deos odes", "was": "wsa",
    "would": "woudl wuold wolud woud owuld wuld", "could": "coudl cuold colud coud oculd culd", "and": "adn",
}
TYPOS = {typo: word for word, typos in _MENDED.items() for typo in typos.split()}
_TYPO = re.compile(r"\b(" + "|".join(sorted(TYPOS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def _mend(found: re.Match[str]) -> str:
    typo = found.group(1)
    word = TYPOS[typo.lower()]
    return word.capitalize() if typo[:1].isupper() else word


def mend_question_words(query: str) -> str:
    """``query`` with its mistyped question words and joins spelled right."""
    return _TYPO.sub(_mend, query)
