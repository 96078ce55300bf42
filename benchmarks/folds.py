"""Retrieval judged on conversations left out of tuning (``ferret bench retrieval --folds K``).

The dev conversations are dealt into K folds. A system with a setting to choose (``Tuned``: candidate
settings by label) takes, in each fold, the candidate with the best single-question R@10 on the other
folds' conversations (its training part) and is scored on the fold's own (its left-out part); a system
with nothing to choose is simply scored per fold. Every figure is the mean over the left-out folds; a
difference between two systems comes with a 95% paired bootstrap interval over the questions (each is
left out exactly once, so the left-out answers of all folds are every question once). Per-question
figures go to the JSON.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.phrasings import _bare
from benchmarks.retrieval import Answer, System, _oracle_split, _parts_found, _pipeline, _recall, is_split
from ferret.bench.locomo import CompoundQuery, Dataset, Question
from ferret.settings import PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend

BOOTSTRAP_ROUNDS = 2000


@dataclass(frozen=True)
class Fold:
    index: int
    left_out: tuple[str, ...]  # the conversations it is scored on
    training: tuple[str, ...]  # the conversations a tuned system chooses its setting on


@dataclass(frozen=True)
class Tuned:
    """A system whose setting is chosen per fold, among ``candidates`` (label -> settings)."""
    candidates: Mapping[str, PipelineSettings]


def make_folds(conversations: Sequence[str], k: int) -> list[Fold]:
    """``k`` folds of the conversations (sorted, dealt round robin); every conversation left out once."""
    names = sorted(conversations)
    if not 2 <= k <= len(names):
        raise ValueError(f"--folds: between 2 and the number of conversations ({len(names)}), not {k}")
    groups = [tuple(names[i::k]) for i in range(k)]
    return [Fold(i, group, tuple(n for n in names if n not in group)) for i, group in enumerate(groups)]


def bootstrap_interval(deltas: Sequence[float], seed: int = 30,
                       rounds: int = BOOTSTRAP_ROUNDS) -> tuple[float, float]:
    """The 95% percentile interval of the mean of ``deltas`` (paired differences), resampled."""
    if not deltas:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return (round(means[int(0.025 * rounds)], 4), round(means[int(0.975 * rounds) - 1], 4))


def single_scores(answers: Sequence[Answer], questions: Sequence[Question]) -> dict[str, list[float]]:
    """Per question: recall at 5, 10, 20 and all-evidence at 10."""
    pairs = list(zip(answers, questions, strict=True))
    return {"recall@5": [_recall(a.ids, q.evidence, 5) for a, q in pairs],
            "recall@10": [_recall(a.ids, q.evidence, 10) for a, q in pairs],
            "recall@20": [_recall(a.ids, q.evidence, 20) for a, q in pairs],
            "all@10": [float(q.evidence <= set(a.ids[:10])) for a, q in pairs]}


def compound_scores(answers: Sequence[Answer], queries: Sequence[CompoundQuery]) -> dict[str, list[float]]:
    """Per compound question: every part has evidence in the top 10 (all@10), and recall@10."""
    pairs = list(zip(answers, queries, strict=True))
    return {"all@10": [float(_parts_found(a, q, 10) == len(q.parts)) for a, q in pairs],
            "recall@10": [_recall(a.ids, q.evidence, 10) for a, q in pairs]}


class FoldRun:
    """The per-question answers of every system and candidate, computed once, then read per fold."""

    def __init__(self, dataset: Dataset, folds: Sequence[Fold], backends: Mapping[str, InMemoryBackend]) -> None:
        self.dataset, self.folds, self.backends = dataset, list(folds), backends
        self.fold_of = {name: fold.index for fold in folds for name in fold.left_out}

    def answers(self, system: System, items: Sequence[Question] | Sequence[CompoundQuery]) -> list[Answer]:
        return [system(self.backends[item.conversation], item.text) for item in items]

    def chosen(self, tuned: Tuned) -> dict[int, str]:
        """Each fold's candidate: the best single R@10 on its training conversations (ties: the first)."""
        scored = {label: single_scores(self.answers(_pipeline(s), self.dataset.questions),
                                       self.dataset.questions)["recall@10"]
                  for label, s in tuned.candidates.items()}
        picks: dict[int, str] = {}
        for fold in self.folds:
            index = [i for i, q in enumerate(self.dataset.questions) if q.conversation in fold.training]
            picks[fold.index] = max(scored, key=lambda label: statistics.fmean(scored[label][i] for i in index))
        return picks

    def per_question(self, system: System | Tuned, picks: Mapping[int, str] | None,
                     items: Sequence[Any], score: Callable[..., dict[str, list[float]]]) -> dict[str, list[float]]:
        """Each item scored by the system (a tuned one: by the candidate its fold chose)."""
        if not isinstance(system, Tuned):
            return score(self.answers(system, items), items)
        assert picks is not None
        by_label = {label: score(self.answers(_pipeline(s), items), items)
                    for label, s in system.candidates.items() if label in picks.values()}
        metrics = next(iter(by_label.values())).keys()
        return {m: [by_label[picks[self.fold_of[item.conversation]]][m][i] for i, item in enumerate(items)]
                for m in metrics}

    def fold_means(self, values: Sequence[float], items: Sequence[Any]) -> list[float]:
        """The mean of ``values`` over each fold's left-out items."""
        means = []
        for fold in self.folds:
            own = [v for v, item in zip(values, items, strict=True) if item.conversation in fold.left_out]
            means.append(round(statistics.fmean(own), 4) if own else 0.0)
        return means


def compare(values: Sequence[float], reference: Sequence[float], run: FoldRun, items: Sequence[Any],
            seed: int) -> dict[str, Any]:
    """A system against a reference on the same items: fold means, their mean, the paired difference
    with its 95% bootstrap interval."""
    deltas = [a - b for a, b in zip(values, reference, strict=True)]
    folds = run.fold_means(values, items)
    return {"per_fold": folds, "mean": round(statistics.fmean(folds), 4),
            "reference_mean": round(statistics.fmean(run.fold_means(reference, items)), 4),
            "delta": round(statistics.fmean(run.fold_means(deltas, items)), 4),
            "interval": bootstrap_interval(deltas, seed), "n": len(items)}


def false_splits(run: FoldRun, max_parts: int) -> dict[str, Any]:
    """Single questions the decomposer would split, per left-out fold."""
    questions = run.dataset.questions
    split = [float(is_split(q.text, max_parts)) for q in questions]
    folds = run.fold_means(split, questions)
    return {"per_fold": folds, "mean_rate": round(statistics.fmean(folds), 4), "split": int(sum(split)),
            "of": len(questions), "interval": bootstrap_interval(split, 31),
            "examples": [q.text for q, s in zip(questions, split, strict=True) if s][:12]}


def compound_sets(run: FoldRun, sets: Mapping[str, Sequence[CompoundQuery]], ferret: System | Tuned,
                  picks: Mapping[int, str] | None, limit: int) -> dict[str, Any]:
    """Per compound set: Ferret's all@10 against the perfect split's, per fold, with the interval (a set's
    questions about conversations the data does not hold, as the frozen sets' on other data, left out)."""
    report: dict[str, Any] = {}
    for number, (name, every) in enumerate(sets.items()):
        queries = [q for q in every if q.conversation in run.backends]
        if not queries:
            continue
        mine = run.per_question(ferret, picks, queries, compound_scores)["all@10"]
        oracle = compound_scores([_oracle_split(run.backends[q.conversation], q, limit) for q in queries],
                                 queries)["all@10"]
        split = [float(is_split(q.text, 4)) for q in queries]
        report[name] = {**compare(mine, oracle, run, queries, 100 + number),
                        "split_rate": round(statistics.fmean(split), 4), "example": queries[0].text}
        if all(q.questions for q in queries):  # Ferret given the perfect split: its questions one per line
            given = [replace(q, text="\n".join(f"{_bare(text)}?" for text in q.questions or ())) for q in queries]
            scored = run.per_question(ferret, picks, given, compound_scores)["all@10"]
            report[name]["perfect_split_given_mean"] = round(statistics.fmean(run.fold_means(scored, queries)), 4)
    return report


# The settings chosen on each fold's training part: the subject boost (1.0 is none), and with the semantic
# retriever on, the semantic share of the text weight as well.
SUBJECT_BOOSTS = (1.0, 1.25, 1.5, 2.0, 3.0)
SEMANTIC_SHARES = (0.2, 0.35, 0.5)


def tuned_candidates(base: PipelineSettings, semantic: bool) -> Tuned:
    """The grid a fold chooses from."""
    candidates: dict[str, PipelineSettings] = {}
    for boost in SUBJECT_BOOSTS:
        for share in (SEMANTIC_SHARES if semantic else (base.fusion.semantic_share,)):
            label = f"subject_boost={boost}" + (f",semantic_share={share}" if semantic else "")
            candidates[label] = base.model_copy(update={"subject_boost": boost, "fusion": base.fusion.model_copy(
                update={"semantic_share": share})})
    return Tuned(candidates)


def single_systems(base: PipelineSettings, semantic: bool) -> dict[str, System | Tuned]:
    """The rows of the single-question table: the reference, Ferret as shipped, Ferret tuned on the
    folds, and Ferret as shipped with one stage off."""
    from benchmarks.retrieval import _single_shot

    def without(**changes: Any) -> System:
        return _pipeline(base.model_copy(update=changes))
    return {
        "single_shot_stripped": _single_shot(True, base),
        "single_shot": _single_shot(False, base),
        "ferret": _pipeline(base),
        "ferret_tuned_on_folds": tuned_candidates(base, semantic),
        "no_subject_boost": without(subject_boost=1.0),
        "no_retry": without(max_retries=0),
        "with_replacement": without(max_replacements=2),  # off by default: the spec's setting, switched on
        "no_intent_boost": without(intent_boost=1.0),
        "no_widening": without(widen_empty_parts=False),
        "no_decomposition": without(max_sub_queries=1),
        # the options, off by default, fixed (not tuned): recency (30-day half-life), diversity (MMR, 0.7)
        "with_recency": without(recency_half_life_days=30.0),
        "with_diversity": without(diversity=0.7),
    }


def evaluate_folds(dataset: Dataset, k: int, base: PipelineSettings, compound: Mapping[str, Sequence[CompoundQuery]],
                   untouched: Mapping[str, Mapping[str, Sequence[CompoundQuery]]],
                   embedder: Any = None) -> dict[str, Any]:
    """The whole left-out-folds report (see the module's docstring)."""
    backends = {name: InMemoryBackend(memories, embedder=embedder) for name, memories in dataset.memories.items()}
    run = FoldRun(dataset, make_folds(list(dataset.memories), k), backends)
    questions = dataset.questions
    systems = single_systems(base, embedder is not None)
    picks = {name: run.chosen(s) for name, s in systems.items() if isinstance(s, Tuned)}
    scores = {name: run.per_question(s, picks.get(name), questions, single_scores) for name, s in systems.items()}
    reference = scores["single_shot_stripped"]
    singles = {name: {metric: compare(values, reference[metric], run, questions, 7 + i)
                      for metric, values in own.items()} for i, (name, own) in enumerate(scores.items())}
    tuned = systems["ferret_tuned_on_folds"]
    return {
        "folds": [{"left_out": list(f.left_out), "training": list(f.training),
                   "chosen": picks["ferret_tuned_on_folds"][f.index]} for f in run.folds],
        "single": singles,
        "false_split": false_splits(run, base.max_sub_queries),
        "compound": {"shipped": compound_sets(run, compound, _pipeline(base), None, base.search_limit_per_query),
                     "tuned_on_folds": compound_sets(run, compound, tuned, picks["ferret_tuned_on_folds"],
                                                     base.search_limit_per_query)},
        "untouched": {name: compound_sets(run, sets, _pipeline(base), None, base.search_limit_per_query)
                      for name, sets in untouched.items()},
        "per_question": {"questions": [{"conversation": q.conversation, "text": q.text, "category": q.category}
                                       for q in questions],
                         "recall@10": {name: own["recall@10"] for name, own in scores.items()}},
        **({"embedder": embedder.name} if embedder is not None else {}),
    }
