"""Stage 1, classify: pure regex, well under a millisecond.

Reports every disqualifier category that matches (not only the first), the
query type with a confidence (patterns in English, French, Spanish and
German), the main entity and attribute, and the section intents.

Disqualifiers:
    D1 reasoning, D2 negation, D3 time reference, D4 compound,
    D5 unresolved reference, D6 exploration.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ferret.records import Section
from ferret.text import (
    ARTICLES_AND_LINKS,
    AUXILIARIES,
    CALENDAR,
    EN_QUESTION_WORD_SET,
    PERFECT,
    PRONOUNS,
    QUESTION_WORD_SET,
    QUESTION_WORDS,
    WORD,
)
from ferret.worker.pipeline.clauses import reads_as_question, standalone_questions
from ferret.worker.pipeline.sections import DEFAULT_SECTIONS, SectionMap


class QueryType(enum.StrEnum):
    FACTUAL = "FACTUAL"
    RELATIONAL = "RELATIONAL"
    COMPARATIVE = "COMPARATIVE"
    EXPLORATORY = "EXPLORATORY"
    PROCEDURAL = "PROCEDURAL"
    ANALYTICAL = "ANALYTICAL"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class Classification:
    disqualifiers: tuple[str, ...]
    query_type: QueryType
    confidence: float
    entity: str | None
    attribute: str | None
    entities: tuple[str, ...]
    intents: tuple[Section, ...]
    keyword_matches: int

    @property
    def is_compound(self) -> bool:
        return "D4" in self.disqualifiers


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"(?:" + "|".join(alternatives) + r")", re.IGNORECASE)


QUESTION_WORD = QUESTION_WORDS["en"]
ALL_QUESTION_WORDS = "|".join(QUESTION_WORDS.values())  # the question words of the four languages
# What follows a join to say "as well" ("and also", "et aussi", "y también", "und außerdem").
TOO_WORDS = r"(?:also|aussi|también|además|auch|außerdem)"
# A yes/no question's opening: an auxiliary, then whom it asks about (a name, or a pronoun).
YES_NO_OPENING = (r"(?:is|are|was|were|did|does|do|can|could|would|will|has|have)\s+"
                  r"(?:(?-i:[A-Z])\w*|you|he|she|it|we|they|there|the|my|your|his|her|their)\b")

_DISQUALIFIERS: dict[str, re.Pattern[str]] = {
    "D1": _rx(r"\bwhy\b", r"\bhow come\b", r"\bexplain\b", r"\breason(?:s|ing)?\b",
              r"\bbecause\b", r"\bcaused?\b", r"\bshould i\b", r"\bwhat if\b",
              r"\bpourquoi\b", r"\bpor qu[eé]\b", r"\bwarum\b"),
    "D2": _rx(r"\bnot\b", r"\bnever\b", r"\bno\b", r"\bwithout\b", r"\bexcept\b",
              r"\bnone\b", r"n't\b", r"\bnothing\b"),
    "D3": _rx(r"\byesterday\b", r"\btoday\b", r"\btonight\b", r"\btomorrow\b",
              r"\b(?:last|latest|previous)\b",
              r"\b(?:this|next) (?:week|month|year)\b", r"\bago\b", r"\brecent(?:ly)?\b",
              r"\bsince\b", r"\bbefore\b", r"\bafter\b", r"\bearlier\b", r"\blately\b",
              r"\b(?:19|20)\d\d\b",
              r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b(?=\s+\d)",
              r"\b(?:january|february|march|april|june|july|august|september|october|november|december)\b",
              r"\bwhen\b"),
    "D4": _rx(r"\?[^?]+\?", rf"\S[ \t]*\n\s*(?:{QUESTION_WORD})\b",
              rf"\w\W*(?:,|;|\band\b|\bbut\b|\bor\b)\s+(?:(?:in|on|at|for|to|from|with|by|of|about|after|before|"
              r"during|around|within)\s+)?"
              rf"(?:{QUESTION_WORD})\b",
              r"\balso\b[^?]*\?", r",\s*also\b", r"\bas well as\b",
              # the joins of the other languages, before a question word of any of the four
              rf"\w\W*(?:\b(?:et|puis|ensuite|y|und)\b)(?:\s+(?:aussi|también|además|auch|außerdem))?[\s,:]+¿?"
              rf"(?:{ALL_QUESTION_WORDS})\b",
              # a yes/no question after a semicolon or ", and": "...; would Caroline ...?"
              rf"(?:;|,)\s*(?:(?:and|et|puis|y|und)\s+(?:{TOO_WORDS}\s+)?)?{YES_NO_OPENING}[^?]*\?",
              r"\b(?:and )?then\s+(?:" + QUESTION_WORD + r"|what|did|do|does|is|was)\b"),
    "D5": _rx(r"^\s*(?:and\s+)?(?:it|that|this|those|these|they|them|he|she)\b",
              r"\b(?:that one|the same one|the other one|what about it)\b",
              r"\b(?:about|with|of) (?:it|that|them|this)\s*\??$"),
    "D6": _rx(r"\beverything\b", r"\banything\b", r"\boverview\b", r"\bsummar(?:y|ise|ize)\b",
              r"\btell me about\b", r"\bexplore\b", r"\bwhat do (?:i|we) know\b",
              r"\bbrainstorm\b", r"\bideas?\b"),
}

# Query-type patterns, strongest first. EN / FR / ES / DE.
_TYPE_PATTERNS: tuple[tuple[QueryType, re.Pattern[str]], ...] = (
    (QueryType.COMPARATIVE, _rx(
        r"\bcompar(?:e|ed|ing|ison)\b", r"\bversus\b", r"\bvs\.?\b", r"\bdifferences? between\b",
        r"\bbetter than\b", r"\bworse than\b", r"\bcompar(?:er|é|ée|aison)\b", r"\bpar rapport [aà]\b",
        r"\bcomparar\b", r"\bdiferencias? entre\b", r"\bvergleich(?:en)?\b", r"\bunterschied(?:e)?\b")),
    (QueryType.RELATIONAL, _rx(
        r"\brelationship between\b", r"\brelated to\b", r"\bconnection between\b", r"\blinked to\b",
        r"\brelation entre\b", r"\blien entre\b", r"\brelaci[oó]n entre\b",
        r"\bbeziehung zwischen\b", r"\bzusammenhang\b")),
    (QueryType.PROCEDURAL, _rx(
        r"\bhow to\b", r"\bhow do i\b", r"\bsteps?\b", r"\bprocess\b", r"\bprocedure\b",
        r"\bplaybook\b", r"\bcomment faire\b", r"\b[ée]tapes?\b", r"\bproc[ée]dure\b",
        r"\bc[oó]mo hacer\b", r"\bpasos\b", r"\bwie kann\b", r"\bschritte?\b", r"\banleitung\b")),
    (QueryType.EXPLORATORY, _rx(
        r"\boverview\b", r"\bsummar(?:y|ise|ize)\b", r"\btell me about\b", r"\beverything about\b",
        r"\bexplore\b", r"\br[ée]sum[ée]\b", r"\bvue d'ensemble\b", r"\bresumen\b", r"\bresumir\b",
        r"\bzusammenfassung\b", r"\b[uü]berblick\b")),
    (QueryType.ANALYTICAL, _rx(
        r"\bwhy\b", r"\banaly[sz](?:e|is)\b", r"\bevaluate\b", r"\bimpact\b", r"\bcauses?\b",
        r"\bpourquoi\b", r"\banalyser\b", r"\bpor qu[ée]\b", r"\banalizar\b", r"\bwarum\b",
        r"\banalysieren\b", r"\bauswirkung(?:en)?\b")),
)

_FACTUAL_WORDS = _rx(
    r"^\s*(?:what(?:'s|s)?|who|where|when|which|whose|did|do|does|is|are|was|were|have|has)\b",
    r"\b(?:quel(?:le)?s?|qui|o[uù]|quand|combien)\b",
    r"\b(?:qu[ée]|cu[aá]l|d[oó]nde|cu[aá]ndo|qui[eé]n)\b",
    r"^\s*(?:was|wer|wo|wann|welche[rs]?)\b",
)
_HOW_WORDS = _rx(r"^\s*how\b", r"\bcomment\b", r"\bc[oó]mo\b", r"^\s*wie\b")

# Complexity keywords (seed 002): causal, analysis, comparison, multi-step, synthesis.
_COMPLEXITY_KEYWORDS = re.compile(
    r"\b(?:why|because|cause|analy[sz]e|analysis|evaluate|assess|compare|comparison|versus|"
    r"advantages?|disadvantages?|pros|cons|trade-?offs?|steps|process|overview|summar(?:y|ize|ise)|"
    r"relationship|impact|implications?|"
    r"pourquoi|analyser|[ée]valuer|comparer|avantages|inconv[ée]nients|[ée]tapes|processus|r[ée]sumer|"
    r"por qu[ée]|analizar|evaluar|comparar|ventajas|desventajas|pasos|proceso|resumir|"
    r"warum|analysieren|bewerten|vergleichen|vorteile|nachteile|schritte|prozess|zusammenfassen)\b",
    re.IGNORECASE,
)

# Words that are never an entity, however capitalised.
_NOT_ENTITIES = QUESTION_WORD_SET | AUXILIARIES | ARTICLES_AND_LINKS | PRONOUNS | frozenset(
    "also then tell show give find check compare vs versus last next yesterday today".split())
# Verbs that open a request, never a name (EN/FR/ES/DE): not entities even at the start of a sentence.
_IMPERATIVES = frozenset(
    "tell show give find check compare explain describe list remind summarise summarize look let please "
    "parle dis montre explique donne rappelle compare liste cuéntame cuenta dime muestra explica dame "
    "recuérdame compara erzähl erzähle zeig zeige erkläre sag sage gib vergleiche".split())
# Filler left out of the attribute (what the query asks about the entity).
_STOP = EN_QUESTION_WORD_SET | AUXILIARIES | PERFECT | ARTICLES_AND_LINKS | PRONOUNS | frozenset(
    "of to in on at for by with about from but be been tell show give find check get go going went "
    "also as well then after".split())


def entities_of(query: str, at_sentence_start: bool = False) -> tuple[str, ...]:
    """Capitalised words and tickers that are not question or filler words;
    a lone capital letter inside a sentence names something too ("process X
    compared to Y"), except I and A. ``at_sentence_start``: a capitalised
    word opening a sentence counts too ("Caroline went ..."), for text that
    is not a question."""
    found: list[str] = []
    for index, match in enumerate(WORD.finditer(query)):
        word = match.group().rstrip(".'")
        lowered = word.lower()
        starts_sentence = index == 0 or query[: match.start()].rstrip().endswith(("?", ".", "!"))
        if len(word) == 1:
            if word.isupper() and word.isalpha() and word not in "IA" and not starts_sentence:
                found.append(word)
            continue
        if lowered in _NOT_ENTITIES:
            continue
        is_ticker = word.isupper() and word.isalpha()
        opening_name = at_sentence_start and "-" not in word and lowered not in _IMPERATIVES
        if is_ticker or (word[0].isupper() and (opening_name or not starts_sentence)):
            found.append(word)
    return tuple(dict.fromkeys(found))


def _attribute(query: str, entities: tuple[str, ...]) -> str | None:
    skip = {e.lower() for e in entities}
    words = [
        w.group().lower() for w in WORD.finditer(query)
        if w.group().lower() not in _STOP and w.group().lower() not in skip
    ]
    return " ".join(words) or None


def _query_type(query: str) -> tuple[QueryType, float]:
    matched = [qtype for qtype, pattern in _TYPE_PATTERNS if pattern.search(query)]
    if matched:
        return matched[0], min(0.95, 0.8 + 0.05 * (len(matched) - 1))
    if _HOW_WORDS.search(query):
        return QueryType.ANALYTICAL, 0.5
    if _FACTUAL_WORDS.search(query):
        return QueryType.FACTUAL, 0.6
    return QueryType.UNKNOWN, 0.3


# A question about what two entities do or have together is one question, not one per entity.
_JOINT = re.compile(r"\b(?:both|together|in common|each other|one another|share[sd]?|sharing|same|similar|between|"
                    r"they|their|them|ensemble|tous les deux|juntos|juntas|ambos|zusammen|beide)\b", re.IGNORECASE)


def joins_entities(query: str, entities: tuple[str, ...]) -> bool:
    """Two things joined by and/&/vs to be looked up one by one: "BTC and SOL analysis", "What's my
    thesis on BTC and ETH?" (codes: tickers, acronyms). Names joined in a question are asked about
    together, as the question's one subject or object: "What did Jon and Gina decide?", "What deals
    did John sign with Nike and Gatorade?"; and so is a question about both ("What do Jon and Gina
    both like?", "Tim and John's favourite player"). Month and day names join nothing."""
    entities = tuple(e for e in entities if e.lower() not in CALENDAR)
    if len(entities) < 2 or _JOINT.search(query):
        return False
    names = "|".join(re.escape(e) for e in entities)
    # "Tim and John's favourite player": one possessive for both, a joint question.
    found = re.search(rf"\b({names})\s*(?:,|\band\b|&|\bvs\.?\b|\bversus\b)\s*({names})(?:['’]s)?\b", query)
    if found is None or found.group(0).endswith(("'s", "’s")):
        return False
    codes = all(name.isupper() for name in found.groups())
    return codes or not reads_as_question(query)


def classify(query: str, sections: SectionMap = DEFAULT_SECTIONS) -> Classification:
    """Classify a query. Pure, deterministic, no I/O."""
    entities = entities_of(query)
    found = [code for code, pattern in _DISQUALIFIERS.items() if pattern.search(query)]
    if "D4" not in found and (joins_entities(query, entities) or len(standalone_questions(query)) > 1):
        found.append("D4")
    query_type, confidence = _query_type(query)
    return Classification(
        disqualifiers=tuple(sorted(found)),
        query_type=query_type,
        confidence=confidence,
        entity=entities[0] if entities else None,
        attribute=_attribute(query, entities),
        entities=entities,
        intents=sections.intents(query),
        keyword_matches=len(_COMPLEXITY_KEYWORDS.findall(query)),
    )
