"""Compound sets kept untouched: ten ways of joining two questions that no rule was written for, a set.

The first was written before any decomposition or ranking change of issue 30 was tuned, and frozen in
``benchmarks/data/untouched_joins.jsonl`` (two questions of one conversation with disjoint evidence,
per join style and conversation); each later one before the rule it tests (see ``SETS``). Nothing is
tuned on them: they are only measured, so they say whether a change carries over to phrasings nobody
tried. ``ferret bench retrieval --folds`` reads the files (``frozen_sets``); this module only wrote
them (``python -m benchmarks.untouched_joins DATA OUT [SET]``) and names the styles.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.phrasings import Phrasing, _bare, _low, phrasing_sets, write_sets
from ferret.bench.locomo import CompoundQuery, load, read_compound_file

FROZEN = Path(__file__).parent / "data" / "untouched_joins.jsonl"

# One question mark at most where a person would write one; the joins sit where the rules do not look.
UNTOUCHED: tuple[Phrasing, ...] = (
    Phrasing("on_top_of_that", 2, lambda qs: f"{_bare(qs[0])}, and on top of that {_low(qs[1])}?"),
    Phrasing("another_thing", 2, lambda qs: f"{_bare(qs[0])}. Another thing: {_low(qs[1])}?"),
    Phrasing("in_addition", 2, lambda qs: f"{_bare(qs[0])}. In addition, {_low(qs[1])}?"),
    Phrasing("id_also_like_to_know", 2, lambda qs: f"{_bare(qs[0])}? I'd also like to know {_low(qs[1])}."),
    Phrasing("and_separately", 2, lambda qs: f"{_bare(qs[0])}, and separately, {_low(qs[1])}?"),
    Phrasing("while_youre_at_it", 2, lambda qs: f"{_bare(qs[0])} - while you're at it, {_low(qs[1])}?"),
    Phrasing("slash", 2, lambda qs: f"{_bare(qs[0])} / {_low(qs[1])}?"),
    Phrasing("parenthesis", 2, lambda qs: f"{_bare(qs[0])} (and {_low(qs[1])})?"),
    Phrasing("semicolon_additionally", 2, lambda qs: f"{_bare(qs[0])}; additionally, {_low(qs[1])}?"),
    Phrasing("two_sentences", 2, lambda qs: f"{_bare(qs[0])}. {_bare(qs[1])}."),
)

# A second set, written after the clause rule (``ferret.worker.pipeline.clauses``) and frozen before it was
# ever run on it: the first set's styles were known when that rule was written, these were not.
FROZEN_AFTER = Path(__file__).parent / "data" / "untouched_joins_after.jsonl"
UNTOUCHED_AFTER: tuple[Phrasing, ...] = (
    Phrasing("comma_plus", 2, lambda qs: f"{_bare(qs[0])}, plus {_low(qs[1])}?"),
    Phrasing("but_also", 2, lambda qs: f"{_bare(qs[0])}, but also {_low(qs[1])}?"),
    Phrasing("ellipsis_and", 2, lambda qs: f"{_bare(qs[0])}... and {_low(qs[1])}?"),
    Phrasing("colon", 2, lambda qs: f"{_bare(qs[0])}: {_low(qs[1])}?"),
    Phrasing("could_you_tell_me", 2, lambda qs: f"Could you tell me {_low(qs[0])}, and {_low(qs[1])}?"),
    Phrasing("im_also_curious", 2, lambda qs: f"{_bare(qs[0])}, and I'm also curious: {_low(qs[1])}?"),
    Phrasing("followed_by", 2, lambda qs: f"{_bare(qs[0])}, followed by {_low(qs[1])}?"),
    Phrasing("ampersand", 2, lambda qs: f"{_bare(qs[0])} & {_low(qs[1])}?"),
    Phrasing("dash_plus", 2, lambda qs: f"{_bare(qs[0])} — plus, {_low(qs[1])}?"),
    Phrasing("question_then_and", 2, lambda qs: f"{_bare(qs[0])}? And {_low(qs[1])}."),
)

# A third set, written and frozen before the clause rule's weaker boundaries (a comma or a joining
# symbol between two direct questions), which were written after the second set's misses were seen:
# only this set says whether those boundaries carry over.
FROZEN_THIRD = Path(__file__).parent / "data" / "untouched_joins_third.jsonl"
UNTOUCHED_THIRD: tuple[Phrasing, ...] = (
    Phrasing("as_well_as", 2, lambda qs: f"{_bare(qs[0])}, as well as {_low(qs[1])}?"),
    Phrasing("comma_then", 2, lambda qs: f"{_bare(qs[0])}, then {_low(qs[1])}?"),
    Phrasing("plus_sign", 2, lambda qs: f"{_bare(qs[0])} + {_low(qs[1])}?"),
    Phrasing("along_with", 2, lambda qs: f"{_bare(qs[0])}, along with {_low(qs[1])}?"),
    Phrasing("besides_that", 2, lambda qs: f"{_bare(qs[0])}. Besides that, {_low(qs[1])}?"),
    Phrasing("not_to_mention", 2, lambda qs: f"{_bare(qs[0])}, not to mention {_low(qs[1])}?"),
    Phrasing("and_then", 2, lambda qs: f"{_bare(qs[0])} and then {_low(qs[1])}?"),
    Phrasing("inline_numbers", 2, lambda qs: f"(1) {_bare(qs[0])} (2) {_bare(qs[1])}"),
    Phrasing("one_more", 2, lambda qs: f"{_bare(qs[0])}. One more: {_low(qs[1])}?"),
    Phrasing("comma_splice", 2, lambda qs: f"{_bare(qs[0])}, {_low(qs[1])}?"),
)

# A fourth set, written and frozen before the direct-question test accepted subject questions ("what
# inspired Caroline", "who performed"), which was written after the third set's misses were seen.
FROZEN_FOURTH = Path(__file__).parent / "data" / "untouched_joins_fourth.jsonl"
UNTOUCHED_FOURTH: tuple[Phrasing, ...] = (
    Phrasing("as_well_as_no_comma", 2, lambda qs: f"{_bare(qs[0])} as well as {_low(qs[1])}?"),
    Phrasing("and_also_no_comma", 2, lambda qs: f"{_bare(qs[0])} and also {_low(qs[1])}?"),
    Phrasing("comma_also", 2, lambda qs: f"{_bare(qs[0])}, also {_low(qs[1])}?"),
    Phrasing("comma_and_then", 2, lambda qs: f"{_bare(qs[0])}, and then {_low(qs[1])}?"),
    Phrasing("comma_ampersand", 2, lambda qs: f"{_bare(qs[0])}, & {_low(qs[1])}?"),
    Phrasing("question_plus", 2, lambda qs: f"{_bare(qs[0])}? + {_low(qs[1])}?"),
    Phrasing("what_else", 2, lambda qs: f"{_bare(qs[0])}. What else: {_low(qs[1])}?"),
    Phrasing("lowercase", 2, lambda qs: f"{_bare(qs[0]).lower()}? {_bare(qs[1]).lower()}?"),
    Phrasing("no_punctuation", 2, lambda qs: f"{_bare(qs[0])} and {_low(qs[1])}"),
    Phrasing("comma_additionally", 2, lambda qs: f"{_bare(qs[0])}, additionally {_low(qs[1])}?"),
)


# Question words as typed in a hurry (a letter swapped or dropped), for the typo styles below.
_TYPOS = {"what": "waht", "when": "wehn", "where": "whre", "who": "woh", "how": "hwo", "which": "whcih",
          "why": "wyh", "did": "dd", "does": "deos", "is": "si", "was": "wsa", "would": "woudl"}


def _typo(text: str) -> str:
    """The question with its first word mistyped, when it is a question word with a typo above."""
    first, _, rest = _low(text).partition(" ")
    return f"{_TYPOS.get(first.lower(), first)} {rest}".strip()


def _plain(text: str) -> str:
    """The question lower-cased at its start, question mark dropped: what a request embeds ("tell me ...")."""
    bare = _bare(text)
    return bare[:1].lower() + bare[1:]


# A fifth and a sixth set (issue 49), written and frozen together before any change of the split they
# could see: joins no rule names (a run-on with no punctuation, separator symbols, an abbreviation, a
# repeated phrase, an enumeration, typos in the question words, requests phrased as commands) and
# three-part questions. Written from the kinds of misses the issue lists, not from its questions.
FROZEN_FIFTH = Path(__file__).parent / "data" / "untouched_joins_fifth.jsonl"
UNTOUCHED_FIFTH: tuple[Phrasing, ...] = (
    Phrasing("run_on", 2, lambda qs: f"{_bare(qs[0])} {_low(qs[1])}"),
    Phrasing("typo_question_word", 2, lambda qs: f"{_bare(qs[0])} and {_typo(qs[1])}?"),
    Phrasing("tell_me_and_remind_me", 2, lambda qs: f"Tell me {_plain(qs[0])} and remind me {_plain(qs[1])}."),
    Phrasing("pipe", 2, lambda qs: f"{_bare(qs[0])} | {_low(qs[1])}?"),
    Phrasing("middle_dot", 2, lambda qs: f"{_bare(qs[0])} • {_low(qs[1])}?"),
    Phrasing("btw", 2, lambda qs: f"{_bare(qs[0])}, btw {_low(qs[1])}?"),
    Phrasing("repeated_i_want_to_know", 2,
             lambda qs: f"I want to know {_plain(qs[0])}, I want to know {_plain(qs[1])}."),
    Phrasing("letters", 2, lambda qs: f"a) {_bare(qs[0])} b) {_bare(qs[1])}"),
    Phrasing("three_commas", 3, lambda qs: f"{_bare(qs[0])}, {_low(qs[1])}, {_low(qs[2])}?"),
    Phrasing("inline_asterisks", 2, lambda qs: f"* {_bare(qs[0])} * {_bare(qs[1])}"),
)
FROZEN_SIXTH = Path(__file__).parent / "data" / "untouched_joins_sixth.jsonl"
UNTOUCHED_SIXTH: tuple[Phrasing, ...] = (
    Phrasing("run_on_lowercase", 2, lambda qs: f"{_bare(qs[0]).lower()} {_bare(qs[1]).lower()}"),
    Phrasing("q1_q2", 2, lambda qs: f"Q1: {_bare(qs[0])}? Q2: {_bare(qs[1])}?"),
    Phrasing("arrow", 2, lambda qs: f"{_bare(qs[0])} -> {_low(qs[1])}?"),
    Phrasing("double_slash", 2, lambda qs: f"{_bare(qs[0])} // {_low(qs[1])}?"),
    Phrasing("need_to_know", 2, lambda qs: f"Need to know {_plain(qs[0])} and {_plain(qs[1])}."),
    Phrasing("typo_and", 2, lambda qs: f"{_bare(qs[0])} adn {_low(qs[1])}?"),
    Phrasing("semicolon_no_space", 2, lambda qs: f"{_bare(qs[0])};{_low(qs[1])}?"),
    Phrasing("one_two_words", 2, lambda qs: f"One: {_bare(qs[0])}. Two: {_bare(qs[1])}."),
    Phrasing("three_semicolons", 3, lambda qs: f"{_bare(qs[0])}; {_low(qs[1])}; {_low(qs[2])}?"),
    Phrasing("typo_run_on", 2, lambda qs: f"{_bare(qs[0])} {_typo(qs[1])}"),
)

# A seventh set, written and frozen before the run-on pass learned the other three languages: joiners of
# those languages with nothing but a space around them, their marks run together, symbols no rule names,
# and a three-part run-on (the questions stay LoCoMo's, in English).
FROZEN_SEVENTH = Path(__file__).parent / "data" / "untouched_joins_seventh.jsonl"
UNTOUCHED_SEVENTH: tuple[Phrasing, ...] = (
    Phrasing("fr_et_run_on", 2, lambda qs: f"{_bare(qs[0])} et {_low(qs[1])}"),
    Phrasing("es_y_run_on", 2, lambda qs: f"{_bare(qs[0])} y {_low(qs[1])}"),
    Phrasing("de_und_run_on", 2, lambda qs: f"{_bare(qs[0])} und {_low(qs[1])}"),
    Phrasing("fr_ainsi_que", 2, lambda qs: f"{_bare(qs[0])}, ainsi que {_low(qs[1])} ?"),
    Phrasing("de_sowie", 2, lambda qs: f"{_bare(qs[0])} sowie {_low(qs[1])}?"),
    Phrasing("es_marks_run_together", 2, lambda qs: f"¿{_bare(qs[0])}?¿{_bare(qs[1])}?"),
    Phrasing("pointing_hand", 2, lambda qs: f"{_bare(qs[0])} 👉 {_low(qs[1])}?"),
    Phrasing("tilde", 2, lambda qs: f"{_bare(qs[0])} ~ {_low(qs[1])}?"),
    Phrasing("also_quick_one", 2, lambda qs: f"{_bare(qs[0])}. Also, quick one: {_low(qs[1])}"),
    Phrasing("three_run_on", 3, lambda qs: f"{_bare(qs[0])} {_low(qs[1])} {_low(qs[2])}"),
)


def frozen_set(path: Path = FROZEN) -> dict[str, list[CompoundQuery]]:
    """The frozen rows, by join style."""
    sets: dict[str, list[CompoundQuery]] = {}
    for query in read_compound_file(path):
        sets.setdefault(query.template, []).append(query)
    return sets


# Each set by the name the folds report titles it with: its styles, the seed that drew its questions,
# and its frozen file.
SETS: dict[str, tuple[tuple[Phrasing, ...], int, Path]] = {
    "before": (UNTOUCHED, 30, FROZEN), "after": (UNTOUCHED_AFTER, 31, FROZEN_AFTER),
    "third": (UNTOUCHED_THIRD, 32, FROZEN_THIRD), "fourth": (UNTOUCHED_FOURTH, 33, FROZEN_FOURTH),
    "fifth": (UNTOUCHED_FIFTH, 34, FROZEN_FIFTH), "sixth": (UNTOUCHED_SIXTH, 35, FROZEN_SIXTH),
    "seventh": (UNTOUCHED_SEVENTH, 36, FROZEN_SEVENTH)}


def frozen_sets() -> dict[str, dict[str, list[CompoundQuery]]]:
    """Every frozen set's rows, by set and join style."""
    return {name: frozen_set(path) for name, (_, _, path) in SETS.items()}


def main(data: str, out: str, which: str = "before") -> None:
    styles, seed, frozen = SETS[which]
    sets = phrasing_sets(load(Path(data)).questions, per_conversation=8, seed=seed, phrasings=styles)
    directory = Path(out)
    write_sets(sets, directory)
    rows = [line for p in styles for line in (directory / f"{p.name}.jsonl").read_text().splitlines()]
    frozen.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
