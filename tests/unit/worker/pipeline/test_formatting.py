import json

from ferret.records import Hit, Memory
from ferret.worker.pipeline.formatting import estimate_tokens, format_context, format_line


def _hit(**fields):
    fields.setdefault("id", "n1")
    return Hit.of(Memory(**fields), 0.5)


def test_line_has_subtype_section_title_date_preview():
    hit = _hit(subtype="custom:signal", content_title="BTC funding spike",
               content_body="funding 0.12%", provenance_created_at="2026-02-20T08:00:00Z")
    assert format_line(hit) == "- [signal · SIGNALS] BTC funding spike (2026-02-20): funding 0.12%"


def test_json_body_uses_text_field():
    body = json.dumps({"text": "entered long", "px": 1})
    hit = _hit(subtype="custom:trade_entry", content_title="t", content_body=body)
    assert format_line(hit).endswith(": entered long")


def test_unknown_subtype_is_knowledge_and_summary_is_fallback():
    hit = _hit(type="concept", subtype="custom:whatever", content_title="x", content_summary="sum")
    assert format_line(hit) == "- [whatever · KNOWLEDGE] x: sum"


def test_budget_respected():
    hits = [_hit(id=f"n{i}", content_title=f"title {i}", content_body="word " * 200) for i in range(30)]
    context = format_context(hits, max_tokens=500)
    assert estimate_tokens(context) <= 500
    assert context.startswith("- [")


def test_everything_fits_when_small():
    hits = [_hit(id=f"n{i}", content_title=f"t{i}", content_body="b") for i in range(3)]
    assert len(format_context(hits, 4000).splitlines()) == 3
