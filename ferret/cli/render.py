"""Readable terminal output with rich: result tables, stats, trace waterfalls
and the batch progress. Renderables here; ``show`` prints them."""

from __future__ import annotations

import os
import sys
from collections import Counter
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from rich.bar import Bar
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ferret.records import visible

if TYPE_CHECKING:
    from ferret.contract import RetrievalResult

_BAR_WIDTH = 40
_PIPE_WIDTH = 140  # columns when the output is not a terminal (a pipe, a file, a test)


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr): colours on a terminal only (and not
    with NO_COLOR), a fixed width into pipes so nothing is cut there."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else _PIPE_WIDTH
    # No markup: text from Redis or a backend ("[red]...") is never read as rich markup.
    return Console(file=stream, width=width, highlight=False, soft_wrap=False, markup=False)


def show(*renderables: RenderableType) -> None:
    out = console()
    for renderable in renderables:
        out.print(renderable)


def results_table(result: RetrievalResult) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("orig", justify="right")
    table.add_column("section")
    table.add_column("sq", justify="right")
    table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=70)
    for rank, item in enumerate(result.results, 1):
        table.add_row(str(rank), f"{item.score:.3f}", f"{item.original_score:.3f}", visible(item.section),
                      str(item.sub_query), visible(" ".join((item.title or item.preview).split())))
    if not result.results:
        table.add_row("", "", "", "", "", "(no results)")
    scores = [item.score for item in result.results]
    parts = {item.sub_query for item in result.results}
    if len(parts) > 1 and any(later > earlier for earlier, later in pairwise(scores)):
        table.caption = ("in the answer's order: the sub-queries' (sq) results take turns, each "
                         "sub-query's by score, so every part of the question is covered near the top")
        table.caption_justify = "left"
    return table


def stats_block(result: RetrievalResult) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    status = Text(result.status, style="green" if result.status in ("ok", "partial") else "red")
    if result.error:
        status.append(f"  error: {visible(result.error)}", style="red")
    grid.add_row("status", status)
    s = result.stats
    if not s.to_json():
        return grid
    grid.add_row("route", f"{s.route} (complexity {s.complexity_score})  type: {s.query_type}  disqualifiers: "
                 f"{','.join(s.disqualifiers or []) or '-'}  intents: {','.join(s.intents or []) or '-'}")
    grid.add_row("decomposed", f"{s.was_decomposed} ({s.decomposition_strategy})  sub-queries: "
                 f"{visible(' | '.join(s.sub_queries or []))}")
    if s.empty_parts:
        grid.add_row("empty parts", f"{','.join(str(i) for i in s.empty_parts)} found nothing; "
                     f"{s.empty_parts_filled or 0} answered by one more try (semantic, else words that begin "
                     "with theirs)")
    grid.add_row("retries", f"{s.retries}  replacements: {s.replacements_successful}/{s.replacements_attempted}"
                 f"  cache hit: {bool(s.cache_hit)}  re-rank: {s.rerank or 'off'}  context tokens: {s.context_tokens}")
    grid.add_row("stage ms", "  ".join(f"{k} {v:.2f}" for k, v in (s.stage_ms or {}).items()))
    if s.skipped_stages:
        grid.add_row("skipped", ", ".join(s.skipped_stages))
    if s.agent:
        a = s.agent
        grid.add_row("agent", f"{a.get('outcome')}  steps {a.get('steps', 0)} (parallel {a.get('parallel_steps', 0)})"
                     f"  LLM calls {a.get('llm_calls', 0)}  backtracked {a.get('backtracked', False)}"
                     f"  reflection concluded {a.get('reflection_concluded', False)}"
                     f"  forced {a.get('forced_conclusion', False)}"
                     + (f"  reason: {visible(str(a['reason']))}" if a.get("reason") else "")
                     + (f"  asks: {visible(str(a['clarification']))}" if a.get("clarification") else ""))
    return grid


def _depths(spans: list[dict[str, Any]]) -> dict[str, int]:
    parents = {s["span_id"]: s.get("parent_span_id") for s in spans}
    depths: dict[str, int] = {}
    for span_id in parents:
        depth, seen, cursor = 0, set(), parents.get(span_id)
        while cursor in parents and cursor not in seen:
            seen.add(cursor)
            depth += 1
            cursor = parents.get(cursor)
        depths[span_id] = depth
    return depths


def waterfall(trace: dict[str, Any]) -> RenderableType:
    """One row per span: indented name, duration, and a bar on a shared time axis."""
    spans = sorted(trace.get("spans", []), key=lambda s: (s["start_time_unix_nano"], -s["end_time_unix_nano"]))
    if not spans:
        return Text("(empty trace)")
    start = min(s["start_time_unix_nano"] for s in spans)
    total = max(max(s["end_time_unix_nano"] for s in spans) - start, 1)
    depths = _depths(spans)
    table = Table(box=None, pad_edge=False, show_header=False,
                  title=visible(f"trace {trace.get('trace_id')}  total {total / 1e6:.2f} ms"), title_justify="left")
    table.add_column("span", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("timeline", width=_BAR_WIDTH, no_wrap=True)
    table.add_column("flag", no_wrap=True)
    for span in spans:
        extra = span.get("attributes", {}).get("index")
        name = visible("  " * depths[span["span_id"]] + span["name"] + (f"[{extra}]" if extra is not None else ""))
        failed = span.get("status") == "ERROR"
        bar = Bar(total, span["start_time_unix_nano"] - start, span["end_time_unix_nano"] - start,
                  width=_BAR_WIDTH, color="red" if failed else "cyan")
        table.add_row(name, f"{span['duration_ms']:.2f} ms", bar, "!" if failed else "")
    return table


class BatchProgressBars:
    """``ferret batch``'s two phases as rich progress bars on stderr: the
    lines enqueued, then the results collected with counts by status."""

    def __init__(self, lines: int) -> None:
        self.progress = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[statuses]}"),
                                 console=console(stderr=True))
        self.enqueue = self.progress.add_task("enqueue", total=lines, statuses="")
        self.results = self.progress.add_task("results", total=None, statuses="", start=False)
        self.statuses: Counter[str] = Counter()

    def __enter__(self) -> BatchProgressBars:
        self.progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.progress.stop()

    def line_done(self) -> None:
        self.progress.advance(self.enqueue)

    def waiting_for(self, jobs: int) -> None:
        self.progress.update(self.results, total=jobs)
        self.progress.start_task(self.results)

    def collected(self, status: str | None) -> None:
        self.statuses[status or "unfinished"] += 1
        shown = "  ".join(f"{name} {count}" for name, count in sorted(self.statuses.items()))
        self.progress.update(self.results, advance=1, statuses=shown)


def to_text(renderable: RenderableType, width: int = _PIPE_WIDTH) -> str:
    """What ``show`` prints into a pipe, as a string (for tests and logs)."""
    out = Console(width=width, highlight=False, soft_wrap=False, color_system=None, force_terminal=False)
    with out.capture() as captured:
        out.print(renderable)
    return captured.get()
