"""Before classification (seed 002's query rewriter, rule-based): references
in the query are resolved from the conversation's last turns, and the
rewritten query says how many sub-questions it asks.

"and what about the other one?" after "Compare BTC and SOL" / "Tell me about
BTC" becomes "and what about SOL?": a reference (D5: it, its, that one, the
other one, them, he, she, ...; and a few French, Spanish and German ones) is
replaced by the entity it points at. Entities come from the user's turns
(the assistant's when the user named none), newest mention first: "it" is
the last one mentioned, "the other one" the one before it, "them"/"both"
the entities of the last turn that named two or more; he/she/his/her
point at a name (the subject of the last turn that named one), it/its at a
thing (a ticker first; never a name). A reference with no
antecedent is left as it is. The rewriter is deterministic and costs
microseconds; it is the default (seed 002 uses an LLM here).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ferret.contract import Turn
from ferret.worker.pipeline.classify import entities_of

_OTHER = re.compile(r"\b(?:the other one|that other one|the other|l'autre|el otro|la otra|"
                    r"der andere|die andere|das andere)\b", re.IGNORECASE)
_PLURAL = re.compile(r"\b(?:both of them|both|them|they|those|les deux|ambos|ambas|beide)\b", re.IGNORECASE)
_THING_POSSESSIVE = re.compile(r"\b(?:its)\b(?=\s+\w)", re.IGNORECASE)
_PERSON = re.compile(r"\b(?:he|she|him|él|ella)\b(?!')", re.IGNORECASE)
_PERSON_POSSESSIVE = re.compile(r"\b(?:his|her)\b(?=\s+\w)", re.IGNORECASE)
_THING = re.compile(r"\b(?:that one|this one|it|ça|cela|eso)\b(?!')|\b(?:that|this)\b(?=\s*[?.!]*\s*$)",
                    re.IGNORECASE)

# Seed 002's rewriter turns a comparison into bullet points: "the advantages and drawbacks of X compared
# to Y" asks three things (advantages of X, drawbacks of X, X against Y). Counted for the complexity factor.
_ASPECTS = re.compile(r"\b\w{3,}\s+(?:and|et|y|und|&)\s+\w{3,}\s+(?:of|du|de la|des|de|del|von|der|des)\b",
                      re.IGNORECASE)
_AGAINST = re.compile(r"\b(?:compared (?:to|with)|versus|vs\.?|against|par rapport [aà]|en comparaison (?:de|avec)|"
                      r"comparado con|frente a|im vergleich zu|gegen[üu]ber)\b", re.IGNORECASE)


_POSSESSIVE = re.compile(r"['’]s$")  # "John's" names John


@dataclass(frozen=True)
class Rewrite:
    query: str  # what is classified and searched
    resolved: tuple[tuple[str, str], ...]  # (reference as written, what replaced it)
    sub_questions: int  # how many things the rewritten query asks (at least 1)


def _recent_entities(history: Sequence[Turn]) -> tuple[list[str], list[str], list[str]]:
    """(entities newest mention first, entities of the newest turn that named two or more, names (not
    all-caps) of the newest turn that named one, in the order it named them: its subject first)."""
    for roles in (("user",), ("assistant",)):
        order: list[str] = []
        group: list[str] = []
        names: list[str] = []
        for turn in reversed(history):
            if turn.role not in roles:
                continue
            found = list(dict.fromkeys(_POSSESSIVE.sub("", e) for e in entities_of(turn.content,
                                                                                   at_sentence_start=True)))
            if len(found) >= 2 and not group:
                group = found
            if not names:
                names = [e for e in found if not e.isupper()]
            for entity in reversed(found):
                if entity not in order:
                    order.append(entity)
        if order:
            return order, group, names
    return [], [], []


def sub_question_count(query: str) -> int:
    """Sub-questions a comparison asks, as seed 002's bullet points count them (1 when it is not one)."""
    aspects = 2 if _ASPECTS.search(query) else 1
    return aspects + (1 if _AGAINST.search(query) and aspects > 1 else 0)


def rewrite(query: str, history: Sequence[Turn]) -> Rewrite:
    resolved: list[tuple[str, str]] = []
    if history:
        order, group, names = _recent_entities(history)
        named = {e.lower() for e in entities_of(query)}
        candidates = [e for e in order if e.lower() not in named]

        def replace(pattern: re.Pattern[str], choose: str | None, suffix: str = "") -> None:
            nonlocal query
            if choose is None:
                return

            def substitute(match: re.Match[str]) -> str:
                resolved.append((match.group(0), choose + suffix))
                return choose + suffix

            query = pattern.sub(substitute, query)

        if _OTHER.search(query):
            # "the other one": the entity mentioned before the last one
            replace(_OTHER, order[1] if len(order) >= 2 and order[1].lower() not in named else None)
        if _PLURAL.search(query):
            both = group or order[:2]
            replace(_PLURAL, " and ".join(both) if len(both) >= 2 else None)
        # he/she point at a name: the subject (first named) of the last turn that named one; it/its at a
        # thing: the last ticker or acronym mentioned, else the last entity that is not that person
        people = [e for e in names if e.lower() not in named]
        person = people[0] if people and (_PERSON.search(query) or _PERSON_POSSESSIVE.search(query)) else None
        things = [e for e in candidates if e.isupper()] or [e for e in candidates if e not in names]
        thing = things[0] if things else None
        replace(_PERSON_POSSESSIVE, person, "'s")
        replace(_PERSON, person)
        replace(_THING_POSSESSIVE, thing, "'s")
        replace(_THING, thing)
    return Rewrite(query, tuple(resolved), sub_question_count(query))
