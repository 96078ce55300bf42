"""Direct questions in French, Spanish and German, for the run-on pass of ``clauses`` (a second question
that opens with nothing but a space, a joiner or a symbol before it).

English tells a direct question by its auxiliary before the subject ("did she"). The other three
languages each have a sign of their own, told apart from the same words opening a subordinate clause
("je sais où elle habite", "no sé donde vive", "ich weiß, wo sie wohnt"):

- **Spanish** writes an interrogative with its accent (qué, dónde, cuándo, quién, cómo, cuánto, cuál,
  por qué); the plain forms (que, donde, cuando, como) join clauses. An indirect question keeps its
  accent ("no sé dónde vive"), so the clause before must be a question of its own too (``clauses``
  checks both sides).
- **French** inverts its subject with a hyphen ("où habite-t-elle", "quand est-elle partie") or asks
  with "est-ce que"; after a joiner or a mark, a question word followed by its verb also asks ("et où
  habite Marie"). A relative "qui"/"que"/"où" is followed by its verb too ("la femme qui habite"), so
  with nothing but a space before it, only the hyphen or "est-ce" counts.
- **German** puts the finite verb right after the question word ("wann ist sie umgezogen", "wo wohnt
  Anna"); a subordinate clause puts its subject there and its verb last ("wo sie wohnt", "wann Anna
  kam"). Nouns and names are capitalised, so the word after the question word, lower-case and neither a
  pronoun nor an article, is the verb.

Which rules apply is decided per clause by its function words (``language_of``): "was" is German's
"what" and English's past of "be", so a clause is read as German only when German words outnumber
English ones.
"""

from __future__ import annotations

import re

FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the a an and is are was were of to in that it for on with did does do has have you he she "
                    "they his her their this my".split()),
    "fr": frozenset("le la les un une des du et est sont ont dans pour pas avec sur elle il ils elles nous vous "
                    "ce cette son sa ses au aux ne".split()),
    "es": frozenset("el los las unos unas del y es son está están en por para con se su sus lo le al no una "
                    "fue".split()),
    "de": frozenset("der die das den dem des ein eine einen einem einer und ist sind nicht mit sie er es ich "
                    "wir auf zu hat haben im am vom zum".split()),
}


def language_of(words: list[str]) -> str:
    """``en``, or the other language whose function words outnumber every other's, English's included."""
    counts = {lang: sum(1 for w in words if w in vocabulary) for lang, vocabulary in FUNCTION_WORDS.items()}
    best = max(("fr", "es", "de"), key=lambda lang: counts[lang])
    ties = [lang for lang in ("fr", "es", "de") if counts[lang] == counts[best]]
    return best if counts[best] > counts["en"] and len(ties) == 1 else "en"


_ES_OPENING = re.compile(r"¿?(?:(?:a|de|en|con|para|por|desde|hasta|sobre)\s+)?"
                         r"(?:qué|cuál(?:es)?|dónde|adónde|cuándo|quién(?:es)?|cómo|cuánt[oa]s?|por qué)(?=\s|$)",
                         re.IGNORECASE)
_FR_OPENING = re.compile(r"(?:(?:à|de|pour|avec|depuis|en|dans|chez|par|sur)\s+)?"
                         r"(?:quel(?:le)?s?|qui|que|qu'|où|quand|comment|pourquoi|combien(?:\s+de)?)(?=\s|$|')",
                         re.IGNORECASE)
_FR_INVERSION = re.compile(r"[\w']+-(?:t-)?(?:il|elle|ils|elles|on|je|tu|nous|vous)\b|est-ce\b", re.IGNORECASE)
_FR_NOT_A_VERB = frozenset("il elle ils elles on je tu nous vous le la les l' un une des du de ce cette son sa "
                           "ses mon ma mes ton ta tes leur leurs que qui ne n' y en".split())
_DE_OPENING = re.compile(r"(?:(?:mit|für|von|an|auf|in|zu|bei|seit|nach|über|aus)\s+)?"
                         r"(?:wer|wen|wem|wessen|was|wo|wohin|woher|wann|wie|warum|weshalb|wieso|welche[rsmn]?)"
                         r"(?:\s+(?:viel|viele|lange|oft|alt|weit|groß|spät|teuer|sehr))?(?=\s|$)", re.IGNORECASE)
_DE_NOT_A_VERB = frozenset("er sie es ich du wir ihr man der die das den dem des ein eine einen einem einer mein "
                           "meine dein deine sein seine ihre unser unsere euer dieser diese dieses nicht und "
                           "oder zu".split())
# Words before which a question word opens an indirect question ("no sé dónde", "weißt du, wo"),
# beside the clause before having to be a question of its own.
TAKES_A_CLAUSE = frozenset("""sé sabes sabe saber dime pregunta preguntó recuerdas recuerda explica
sais sait savoir dis demande demandé rappelle explique weiß weißt wissen sag sagt sagen frag fragt fragen
erzähl erzähle erklär erkläre""".split())


def opens(text: str, language: str) -> bool:
    """A question in ``language`` opens at the start of ``text``: a question word (an accented one in
    Spanish), French's "est-ce que" or a hyphenated inversion."""
    if language == "es":
        return _ES_OPENING.match(text) is not None
    if language == "fr":
        return _FR_OPENING.match(text) is not None or _FR_INVERSION.match(text) is not None
    return language == "de" and _DE_OPENING.match(text) is not None


def direct(text: str, language: str, marked: bool) -> bool:
    """``text`` (a clause from where its question opens) asks a direct question in ``language``
    (fr, es, de), in three words at least. ``marked``: a joiner, a symbol or the clause's start stands
    before it, not just a space."""
    if len(text.split()) < 3 or not opens(text, language):
        return False
    if language == "es":  # an accented interrogative opens it
        return True
    if language == "fr":
        opening = _FR_OPENING.match(text)
        if opening is None:  # it opens with "est-ce que" or a hyphenated inversion
            return True
        rest = text[opening.end():]
        if _FR_INVERSION.search(" ".join(rest.split()[:4])):
            return True
        following = re.findall(r"[\w']+", rest)[:1]
        return marked and bool(following) and following[0].islower() and following[0] not in _FR_NOT_A_VERB
    opening = _DE_OPENING.match(text)  # German: ``opens`` found its question word
    assert opening is not None
    following = re.findall(r"[\w']+", text[opening.end():])[:1]
    return bool(following) and following[0].islower() and following[0] not in _DE_NOT_A_VERB
