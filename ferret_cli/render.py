"""Readable terminal output: result tables, stats and trace waterfalls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferret.contract import RetrievalResult

_BAR_WIDTH = 40


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def results_table(result: RetrievalResult) -> str:
    lines = [f"{'#':>2}  {'score':>6}  {'orig':>6}  {'section':<10}  {'sq':>2}  title"]
    for rank, item in enumerate(result.results, 1):
        lines.append(
            f"{rank:>2}  {item.score:6.3f}  {item.original_score:6.3f}  {item.section:<10}  "
            f"{item.sub_query:>2}  {_clip(item.title or item.preview, 60)}"
        )
    if not result.results:
        lines.append("   (no results)")
    return "\n".join(lines)


def stats_block(result: RetrievalResult) -> str:
    s = result.stats
    if not s.to_json():
        return f"status: {result.status}" + (f"  error: {result.error}" if result.error else "")
    lines = [
        f"status: {result.status}" + (f"  error: {result.error}" if result.error else ""),
        f"route: {s.route} (complexity {s.complexity_score})  type: {s.query_type}"
        f"  disqualifiers: {','.join(s.disqualifiers or []) or '-'}"
        f"  intents: {','.join(s.intents or []) or '-'}",
        f"decomposed: {s.was_decomposed} ({s.decomposition_strategy})"
        f"  sub-queries: {' | '.join(s.sub_queries or [])}",
        f"retries: {s.retries}  replacements: {s.replacements_successful}"
        f"/{s.replacements_attempted}  cache hit: {bool(s.cache_hit)}"
        f"  re-rank: {s.rerank or 'off'}  context tokens: {s.context_tokens}",
        "stage ms: " + "  ".join(f"{k} {v:.2f}" for k, v in (s.stage_ms or {}).items()),
    ]
    if s.skipped_stages:
        lines.append(f"skipped: {', '.join(s.skipped_stages)}")
    return "\n".join(lines)


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


def waterfall(trace: dict[str, Any]) -> str:
    """One line per span: indented name, duration, and a bar on a shared time axis."""
    spans = sorted(trace.get("spans", []), key=lambda s: (s["start_time_unix_nano"], -s["end_time_unix_nano"]))
    if not spans:
        return "(empty trace)"
    start = min(s["start_time_unix_nano"] for s in spans)
    end = max(s["end_time_unix_nano"] for s in spans)
    total = max(end - start, 1)
    depths = _depths(spans)
    lines = [f"trace {trace.get('trace_id')}  total {total / 1e6:.2f} ms"]
    for span in spans:
        offset = int((span["start_time_unix_nano"] - start) / total * _BAR_WIDTH)
        width = max(1, int((span["end_time_unix_nano"] - span["start_time_unix_nano"]) / total * _BAR_WIDTH))
        bar = " " * offset + "█" * min(width, _BAR_WIDTH - offset)
        name = "  " * depths[span["span_id"]] + span["name"]
        extra = span.get("attributes", {}).get("index")
        label = f"{name}[{extra}]" if extra is not None else name
        flag = " !" if span.get("status") == "ERROR" else ""
        lines.append(f"{label:<28} {span['duration_ms']:>9.2f} ms |{bar:<{_BAR_WIDTH}}|{flag}")
    return "\n".join(lines)
