"""The left-out-folds report as Markdown (``ferret bench retrieval --folds K``)."""

from __future__ import annotations

from typing import Any


def _interval(row: dict[str, Any]) -> str:
    low, high = row["interval"]
    return f"{row['delta']:+.3f} [{low:+.3f}, {high:+.3f}]"


def _singles(report: dict[str, Any]) -> list[str]:
    lines = ["single questions, mean over left-out folds; the difference from single-shot (question words "
             "stripped) with its 95% paired bootstrap interval over questions:", "",
             "| system | R@5 | R@10 | R@20 | all@10 | R@10 - single-shot [95% CI] | R@10 per fold |",
             "|---|---|---|---|---|---|---|"]
    for name, row in report["single"].items():
        r10 = row["recall@10"]
        lines.append(f"| {name} | {row['recall@5']['mean']:.3f} | {r10['mean']:.3f} | {row['recall@20']['mean']:.3f} | "
                     f"{row['all@10']['mean']:.3f} | {_interval(r10)} | "
                     f"{' / '.join(f'{v:.3f}' for v in r10['per_fold'])} |")
    chosen = "; ".join(f"fold {i + 1} ({', '.join(f['left_out'])} left out): {f['chosen']}"
                       for i, f in enumerate(report["folds"]))
    return [*lines, "", f"chosen on each fold's training conversations: {chosen}"]


def _compounds(title: str, rows: dict[str, Any]) -> list[str]:
    lines = [title, "", "| set | n | split | Ferret all@10 | perfect split all@10 | Ferret - perfect [95% CI] | "
                        "Ferret given the perfect split |", "|---|---|---|---|---|---|---|"]
    at_or_above = 0
    for name, row in rows.items():
        at_or_above += row["delta"] >= 0
        given = row.get("perfect_split_given_mean")
        lines.append(f"| {name} | {row['n']} | {row['split_rate']:.2f} | {row['mean']:.3f} | "
                     f"{row['reference_mean']:.3f} | {_interval(row)} | {'-' if given is None else f'{given:.3f}'} |")
    return [*lines, "", f"Ferret at or above the perfect split: {at_or_above} of {len(rows)} sets"]


def markdown(report: dict[str, Any]) -> str:
    false = report["false_split"]
    low, high = false["interval"]
    lines = _singles(report)
    lines += ["", f"false splits of single questions: {false['split']} of {false['of']}, mean rate over left-out "
                  f"folds {false['mean_rate']:.4f} [{low:.4f}, {high:.4f}], per fold "
                  f"{' / '.join(f'{v:.4f}' for v in false['per_fold'])}"]
    lines += [f"  e.g. {text}" for text in false["examples"][:6]]
    lines += ["", *_compounds("compound sets, Ferret as shipped (all@10: every part found in the top 10):",
                              report["compound"]["shipped"])]
    tuned = report["compound"]["tuned_on_folds"]
    lines.append(f"with the settings each fold chose: at or above the perfect split on "
                 f"{sum(row['delta'] >= 0 for row in tuned.values())} of {len(tuned)} sets")
    titles = {"before": "the untouched set written before the clause rule (join styles no rule was written "
                        "for; measured, never tuned on):",
              "after": "the untouched set written after the clause rule, frozen before it was run:",
              "third": "the untouched set written before the clause rule's weaker boundaries (a comma or a "
                       "joining symbol between two direct questions), frozen before they were run:",
              "fourth": "the untouched set written before the direct-question test took subject questions "
                        "(\"what inspired Caroline\"), frozen before it was run:",
              "fifth": "the fifth untouched set (issue 49: run-ons, symbols, enumerations, typos, requests), frozen "
                       "before the run-on pass and the typo mending:",
              "sixth": "the sixth untouched set, frozen with the fifth:",
              "seventh": "the seventh untouched set (other languages' joiners run on, marks run together, new "
                         "symbols, a three-part run-on), frozen before the run-on pass learned those languages:"}
    for name, rows in report["untouched"].items():
        lines += ["", *_compounds(titles.get(name, name), rows)]
    if report.get("embedder"):
        lines += ["", f"embeddings: {report['embedder']}"]
    return "\n".join(lines)
