"""Questions that stand alone: the general test of a compound query.

The decomposer's other strategies each know one way of joining questions. This one knows none: it
cuts the query at every clause boundary (a sentence's end, a semicolon, a slash, a bracket, a dash,
", and" / ", but" / ", or") and keeps a cut only where the clauses on both sides stand alone. A
clause stands alone when, after a lead-in that asks nothing, it opens a question or a request and
holds a word of its own to search:

- the lead-in: joiners ("and", "plus", "also"), a short phrase closed by a comma or a colon ("In
  addition,", "Another thing:", "While you're at it,"), up to four words before a question word or
  an auxiliary that do not name a subject ("and on top of that would Melanie ..."), or a phrase of
  wanting to know ("I'd also like to know", "I wonder");
- the opening: a question word (after a preposition too), an auxiliary and whom it asks about
  ("would Melanie", "did she"), or an asking verb ("tell me", "show me");
- a word of its own: one that is neither a question word nor a stop word ("to whom" has none).

A clause that does not stand alone belongs to the clause before it ("Was it a good month? Answer
yes or no.", "What did Caroline (the counselor) research?"). Two clauses that stand alone are two
questions, however they were joined.

Any other comma, and a joining symbol ("&", "+"), is a weaker boundary: a comma also closes a
preface ("When Caroline moved, what did she bring?") or a list. A cut there is kept only where both
sides are direct questions of three words or more:

- an auxiliary before its subject, after a joiner at most ("did she", "plus would Melanie"; not the
  end of a list, "books, movies & songs does Melanie like");
- a question word whose auxiliary comes before any subject ("what pet does Caroline have", "how
  long has", "when did"; not "when Caroline moved" or "when she was young");
- a question word that is the subject of the verb after it ("what inspired Caroline", "who
  performed"; not "how to", "what the posters said").
"""

from __future__ import annotations

import re

from ferret.text import AUXILIARIES, EN_QUESTION_WORD_SET, MODALS, PERFECT, QUESTION_WORDS, REQUEST_PHRASES
from ferret.worker.backends.tokens import tokenize
from ferret.worker.pipeline import other_languages

_BOUNDARY = re.compile(r"(?<=[.?!])\s+(?=¿?[A-Z])|(?<=[.?!])(?=¿)|\s*;\s*|\s+/\s+|\s*\(\s*|\s*\)\s*|\s+[-–—]{1,2}\s+"
                       r"|,\s*(?=(?:and|but|or)\b)")
# A symbol or an enumeration's mark that may stand before a question ("| how ...", "b) When ...", "Q2: ...").
_MARKS = r"[|•·*]|->|→|=>|//|\(?[a-hA-H1-9][.)]|q[1-9]:"
_JOINERS = re.compile(r"^(?:(?:(?:and|but|or|plus|also|so|then|oh|btw|by the way|et|puis|y|und|aussi|también|además|"
                      rf"außerdem)\b|{_MARKS})[\s,:]*)+", re.IGNORECASE)
_PUNCTUATED_LEAD_IN = re.compile(r"^[^,:?]{1,40}?[,:]\s+")
_WANTING_TO_KNOW = re.compile(r"^(?:(?:i(?:'d| would)?|i'm|i am)\s+(?:also\s+)?"
                              r"(?:like to know|want to know|need to know|wonder(?:ing)?|curious)"
                              r"|(?:i\s+)?need to know)\s+(?:about\s+)?", re.IGNORECASE)
_PREPOSITION = r"(?:in|on|at|for|to|from|with|by|of|about|since|until|after|before|during|around|within)"
_AUXILIARY = r"(?:is|are|was|were|did|does|do|can|could|would|will|has|have)"
_SUBJECT = r"(?:(?-i:[A-Z])\w*|you|he|she|it|we|they|there|the|my|your|his|her|their|i)"
_OPENING = re.compile(rf"¿?(?:{_PREPOSITION}\s+)?(?:{'|'.join(QUESTION_WORDS.values())})\b|{_AUXILIARY}\s+{_SUBJECT}\b"
                      rf"|(?:{REQUEST_PHRASES})\b", re.IGNORECASE)
# Words before the opening that would make it a statement's verb ("then she was the best").
_SUBJECT_WORDS = frozenset("i you he she we they it".split())
MAX_LEAD_IN_WORDS = 4
_WEAK_BOUNDARY = re.compile(r"(,\s*|\s+[&+]\s+)")
_QUESTION_WORD = re.compile(rf"¿?(?:{_PREPOSITION}\s+)?(?:{QUESTION_WORDS['en']})\b", re.IGNORECASE)
_AUXILIARY_WORDS = AUXILIARIES | MODALS | PERFECT | frozenset("will might may must".split())
_INVERTED = re.compile(rf"{_AUXILIARY}\s+{_SUBJECT}\b", re.IGNORECASE)
# Words after a question word that open a subordinate clause's subject or phrase, not a verb whose
# subject the question word is ("when the posters ...", "how to ...", "what my ..." vs "what inspired").
_NOT_A_VERB = _SUBJECT_WORDS | frozenset(
    "the a an my your his her its our their this that these those to of for in on at with by from".split())
# Words a question word may take before its auxiliary ("how many children does", "what kind of art is").
MAX_WORDS_BEFORE_AUXILIARY = 4
# An enumeration's marks inside a line ("a) ... b) ...", "(1) ... (2) ..."): boundaries between its items.
_ENUMERATION = re.compile(r"(?:^|(?<=\s))\(?(?:[a-hA-H]|[1-9])\)\s+")
_ASKING_VERB = re.compile(r"(?:tell me|show me|remind me)\s+(?=\S)", re.IGNORECASE)
_OPENING_ANYWHERE = re.compile(rf"\b(?:{QUESTION_WORDS['en']}|{_AUXILIARY}\s+{_SUBJECT})\b", re.IGNORECASE)
_OPENING_ANYWHERE_OTHER = re.compile(rf"(?<!\w)(?:{'|'.join(QUESTION_WORDS[lang] for lang in ('fr', 'es', 'de'))}"
                                     r"|was|wen|wem|wohin|woher|wieso|weshalb)(?!\w)", re.IGNORECASE)
# The first word of a right side a cut may leave: a question word, an auxiliary, a joiner, an asking verb
# (not a preposition: "... in what year ..." is rarely a second question, and checking every one costs).
_MAY_OPEN_A_QUESTION = EN_QUESTION_WORD_SET | _AUXILIARY_WORDS | frozenset(
    "and but or plus also so then oh btw by tell show remind give i i'd i'm need".split())
# The same in the other three languages: their question words, joiners and the prepositions a question may
# open with ("à qui", "con quién", "mit wem").
_MAY_OPEN_ABROAD = {
    "fr": frozenset("quel quelle quels quelles qui que qu'est-ce où quand comment pourquoi combien est-ce et puis "
                    "aussi ou à de pour avec depuis en dans chez par sur".split()),
    "es": frozenset("qué cuál cuáles dónde adónde cuándo quién quiénes cómo cuánto cuánta cuántos cuántas por y e "
                    "también además o a de en con para desde hasta sobre".split()),
    "de": frozenset("wer wen wem wessen was wo wohin woher wann wie warum weshalb wieso welche welcher welches "
                    "welchen welchem und außerdem auch oder mit für von an auf in zu bei seit nach über aus".split()),
}
_MARK = re.compile(_MARKS, re.IGNORECASE)
# Words after which a question word opens a clause of the sentence, not a second question.
_TAKES_A_CLAUSE = frozenset("""about of on in at for to from with by into over as than like know knows knew
say says said tell tells told ask asks asked wonder wondered remember remembers remembered explain explained
show showed shows decide decided think thought mean meant learn learned see saw find found discuss discussed
describe described understand understood realize realized notice noticed is was are were be been being""".split())


def _question_start(clause: str, language: str = "en") -> int | None:
    """Where the question a clause asks opens, after its lead-in; None when it asks none (in another
    ``language``, its own openings count too: German's "was")."""
    text = _JOINERS.sub("", clause.strip())
    offset = len(clause) - len(clause.lstrip()) + (len(clause.strip()) - len(text))
    if language != "en" and other_languages.opens(text, language):
        return offset
    for strip in (_PUNCTUATED_LEAD_IN, _WANTING_TO_KNOW):
        found = strip.match(text)
        if found and _OPENING.match(text, found.end()):
            return offset + found.end()
    if _OPENING.match(text):
        return offset
    words = list(re.finditer(r"\S+", text))
    for index, word in enumerate(words[1:MAX_LEAD_IN_WORDS + 1], 1):
        lead = words[index - 1].group()
        if lead.lower() in _SUBJECT_WORDS or (index > 1 and lead[:1].isupper()):  # a statement's subject
            return None
        if _OPENING.match(text, word.start()):
            return offset + word.start()
    return None


def _asks(clause: str, language: str = "en") -> bool:
    start = _question_start(clause, language)
    return start is not None and bool(tokenize(clause[start:]))


def _direct(clause: str, subject_questions: bool = True, language: str = "en") -> bool:
    """The clause asks a direct question (see the module's docstring) with a word of its own, in
    three words at least (two are a preface's: "When asked, ...", "Where possible, ...").
    ``subject_questions``: a question word may be its verb's subject ("what inspired Caroline"); in
    another ``language`` (``other_languages``), something other than a space stands before it."""
    start = _question_start(clause, language)
    if start is None or not tokenize(clause[start:]) or len(clause[start:].split()) < 3:
        return False
    text = clause[start:]
    if language != "en":
        return other_languages.direct(text, language, marked=subject_questions)
    asking = _ASKING_VERB.match(text)
    if asking:  # "tell me when did ...", "remind me how ...": the question after the asking verb
        return _direct(text[asking.end():], subject_questions, language)
    if _INVERTED.match(text):  # after a joiner at most: "songs does Melanie like" is a list's end
        lead = _JOINERS.sub("", clause[:start].strip(" \t\n,:")).strip(" ,:")
        return not lead or bool(_WANTING_TO_KNOW.fullmatch(lead + " "))
    opening = _QUESTION_WORD.match(text)
    if opening is None:
        return False
    words = re.findall(r"[\w']+", text[opening.end():])[:MAX_WORDS_BEFORE_AUXILIARY + 1]
    if subject_questions and words and words[0].islower() and words[0] not in _NOT_A_VERB:  # its verb's subject
        return True
    for index, word in enumerate(words):
        if word.lower() in _AUXILIARY_WORDS:
            return True
        if word.lower() in _SUBJECT_WORDS or word[:1].isupper() or index == MAX_WORDS_BEFORE_AUXILIARY:
            return False
    return False


def _at_weak_boundaries(clause: str, language: str) -> list[str]:
    """``clause`` cut at the weaker boundaries that join two direct questions."""
    pieces = _WEAK_BOUNDARY.split(clause)
    parts = [pieces[0]]
    for joint, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        if _direct(parts[-1], language=language) and _direct(piece, language=language):
            parts.append(piece)
        else:
            parts[-1] += joint + piece
    return parts


def _at_run_ons(clause: str, language: str) -> list[str]:
    """``clause`` cut where a second direct question starts with no boundary before it ("When did X go
    to the museum what did Y paint", "... | how did ...", "... b) When did ..."): at a word where a
    question opens (after a joiner, a symbol or a mark at most), both sides direct questions, the one
    on the right inverted (a question word and its auxiliary, or an auxiliary and its subject: "where
    she lives" is a clause of the left question, not a question), and the word before the cut not one
    that takes a clause ("say what ...", "about how ..."). In another ``language``, that language's signs
    of a direct question (``other_languages``)."""
    english = language == "en"
    if len((_OPENING_ANYWHERE if english else _OPENING_ANYWHERE_OTHER).findall(clause)) < 2:
        return [clause]
    may_open = _MAY_OPEN_A_QUESTION if english else _MAY_OPEN_ABROAD[language]
    words = list(re.finditer(r"\S+", clause))
    for word in words[3:]:
        if word.group().lower().strip("¿,:") not in may_open and not _MARK.fullmatch(word.group()):
            continue  # neither an opening nor what may stand before one: no cut here (and no regex run)
        left, right = clause[:word.start()], clause[word.start():]
        before = re.findall(r"[\w']+", left)
        bare = right.lstrip()
        question = _JOINERS.sub("", bare)
        # A question must open right here, after joiners or a mark at most.
        if not before or _question_start(right, language) != len(right) - len(question):
            continue
        mark = bare[:len(bare) - len(question)]  # the joiner, symbol or mark before it, if any
        # Unmarked, the word before must not take a clause ("say what ..."), and a bare auxiliary is the left
        # question's own ("What kind of painting | did Caroline share" is one question).
        if not english:
            if not mark and before[-1].lower() in other_languages.TAKES_A_CLAUSE:
                continue
        elif not mark and (before[-1].lower() in _TAKES_A_CLAUSE or _INVERTED.match(bare)):
            continue
        elif mark.strip(" ,:").isalpha() and _INVERTED.match(bare, len(mark)):  # "... and is his prized possession":
            continue  # after a word like "and", an auxiliary is the left clause's second verb, not a question
        if _direct(left, language=language) and _direct(right, subject_questions=bool(mark), language=language):
            return [left.strip(), *_at_run_ons(right, language)]
    return [clause]


def reads_as_question(text: str) -> bool:
    """The text asks something: it opens a question or a request (after a lead-in), or ends with "?"."""
    return "?" in text or _question_start(text) is not None


def standalone_questions(query: str) -> list[str]:
    """The questions of ``query`` that stand alone (see the module's docstring), each from its
    opening; one item (the whole query) when it asks one thing."""
    language = other_languages.language_of(re.findall(r"[\w']+", query.lower()))
    clauses = [c for c in _BOUNDARY.split(_ENUMERATION.sub("; ", query)) if c and c.strip()]
    joined: list[str] = []
    for clause in clauses:
        if joined and not _asks(clause, language):  # it belongs to the clause before ("?" after a bracket: no space)
            joined[-1] += (" " if any(ch.isalnum() for ch in clause) else "") + clause.strip()
        else:
            joined.append(clause.strip())
    joined = [part.strip() for clause in joined for part in _at_weak_boundaries(clause, language)]
    joined = [part.strip() for clause in joined for part in _at_run_ons(clause, language)]
    if len(joined) < 2 or not _asks(joined[0], language):
        return [query]
    questions = []
    for clause in joined:
        start = _question_start(clause, language)
        questions.append(clause[start or 0:].strip(" \t\n,;:.!-–—"))
    return questions
