"""Sections for any domain: from the memory's subtype or type, configurable, intents in four languages."""

import pytest
from pydantic import ValidationError

from ferret.records import Memory, Section
from ferret.settings import PipelineSettings, SectionSettings
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.pipeline.formatting import format_context
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.sections import DEFAULT_SECTIONS, sections_for
from ferret.worker.results_builder import result_items


def _memory(memory_id, kind="concept", subtype=None, section=None, title="a note"):
    return Memory(id=memory_id, type=kind, subtype=subtype, content_title=title, memory_section=section)


@pytest.mark.parametrize(("kind", "subtype", "section"), [
    ("event", None, Section.EPISODIC),            # "Dinner party for Anna"
    ("episode", None, Section.EPISODIC),
    ("recipe", None, Section.PROCEDURAL),
    ("procedure", None, Section.PROCEDURAL),
    ("preference", None, Section.KNOWLEDGE),
    ("fact", None, Section.KNOWLEDGE),
    ("reminder", None, Section.SIGNALS),
    ("concept", None, Section.KNOWLEDGE),
    ("something-new", None, Section.KNOWLEDGE),   # unknown kind: the default
    ("Event", None, Section.EPISODIC),            # any case
    # the subtype is more specific than the type: seed 003's trading example
    ("event", "custom:lesson", Section.KNOWLEDGE),
    ("concept", "custom:trade_entry", Section.EPISODIC),
    ("event", "custom:watchpoint", Section.SIGNALS),
    ("concept", "playbook", Section.PROCEDURAL),
    ("event", "custom:unheard-of", Section.EPISODIC),  # unknown subtype: the type decides
])
def test_a_memory_s_section_comes_from_its_subtype_else_its_type(kind, subtype, section):
    assert DEFAULT_SECTIONS.of(_memory("m", kind, subtype)) is section


def test_the_backend_s_section_counts_only_for_kinds_the_table_does_not_name():
    assert DEFAULT_SECTIONS.of(_memory("m", "odd-kind", section=Section.SIGNALS)) is Section.SIGNALS
    # Nous says KNOWLEDGE for every kind it does not know; the table knows an event
    assert DEFAULT_SECTIONS.of(_memory("m", "event", section=Section.KNOWLEDGE)) is Section.EPISODIC


@pytest.mark.parametrize(("query", "section"), [
    ("What happened at the dinner party?", Section.EPISODIC),
    ("Qu'est-ce qui s'est passé hier soir ?", Section.EPISODIC),
    ("¿Qué pasó en Roma la última vez?", Section.EPISODIC),
    ("Was ist passiert, als wir in Rom waren?", Section.EPISODIC),
    ("How do I make the risotto?", Section.PROCEDURAL),
    ("Quelle est la recette du gâteau ?", Section.PROCEDURAL),
    ("¿Cuáles son los pasos para la paella?", Section.PROCEDURAL),
    ("Wie mache ich den Teig?", Section.PROCEDURAL),
    ("Which wine does Anna prefer?", Section.KNOWLEDGE),
    ("Quel vin Anna préfère-t-elle ?", Section.KNOWLEDGE),
    ("¿Cuál es su vino favorito?", Section.KNOWLEDGE),
    ("Warum mag Anna keinen Rotwein?", Section.KNOWLEDGE),
    ("Any reminder for this week?", Section.SIGNALS),
    ("Qu'est-ce qui est en attente en ce moment ?", Section.SIGNALS),
    ("¿Qué tengo pendiente ahora mismo?", Section.SIGNALS),
    ("Was steht aktuell an?", Section.SIGNALS),
])
def test_questions_ask_for_sections_in_four_languages(query, section):
    assert section in DEFAULT_SECTIONS.intents(query)


def test_intent_words_match_whole_words_only():
    assert DEFAULT_SECTIONS.intents("deliver the ruler to the whyte house") == ()


def test_settings_add_kinds_and_replace_a_section_s_words():
    settings = SectionSettings(kinds={"custom:Dish": "procedural", "event": "signals"},
                               intent_words={"procedural": ["Cook"]}, default="episodic")
    sections = sections_for(settings)
    assert sections.of(_memory("m", subtype="dish")) is Section.PROCEDURAL
    assert sections.of(_memory("m", "event")) is Section.SIGNALS                            # mapped anew
    assert sections.of(_memory("m", subtype="custom:lesson")) is Section.KNOWLEDGE          # shipped, kept
    assert sections.of(_memory("m", "unheard-of")) is Section.EPISODIC                      # the new default
    assert sections.intents("how do I cook rice") == (Section.KNOWLEDGE, Section.PROCEDURAL)  # "how do" is knowledge's
    assert Section.PROCEDURAL not in sections.intents("what is the recipe")                 # replaced words
    assert sections_for(settings) is sections                                               # built once


@pytest.mark.parametrize("bad", [{"kinds": {"dish": "RECIPES"}}, {"kinds": {"": "EPISODIC"}},
                                 {"intent_words": {"PROCEDURAL": [" "]}}, {"intent_words": {"COOKING": ["x"]}},
                                 {"default": "nowhere"}])
def test_a_bad_sections_setting_names_the_field(bad):
    with pytest.raises(ValidationError) as refused:
        PipelineSettings(sections=bad)
    assert str(refused.value).splitlines()[1].startswith("sections." + next(iter(bad)))


def test_a_configured_table_reaches_the_boost_the_context_and_the_result():
    """Through the pipeline: the intent boost, the context's label and the result's section all use the
    settings' table, not the shipped one."""
    corpus = [Memory(id="dish", type="dish", content_title="Risotto for Anna", content_body="risotto rice wine"),
              Memory(id="note", type="note", content_title="Risotto rice wine",
                     content_body="risotto rice wine, white wine"),
              Memory(id="paella", type="note", content_title="Paella", content_body="saffron rice")]
    settings = PipelineSettings(sections=SectionSettings(kinds={"dish": "PROCEDURAL"},
                                                         intent_words={"PROCEDURAL": ["cook"]}))
    plain = run_pipeline("cook risotto rice wine", InMemoryBackend(corpus), PipelineSettings())
    tuned = run_pipeline("cook risotto rice wine", InMemoryBackend(corpus), settings)
    assert plain.hits[0].id == "note"                     # more words: first without the table
    assert tuned.stats.plan.intents == ["PROCEDURAL"]
    assert tuned.hits[0].id == "dish" and tuned.hits[0].boosted
    assert "[dish · PROCEDURAL] Risotto for Anna" in tuned.context
    assert "[dish · KNOWLEDGE]" in plain.context
    items = result_items(tuned.hits, tuned.sub_queries, sections_for(settings.sections))
    assert {i.id: i.section for i in items} == {"dish": "PROCEDURAL", "note": "KNOWLEDGE", "paella": "KNOWLEDGE"}
    assert "[dish · PROCEDURAL]" in format_context(tuned.hits, 500, sections_for(settings.sections))
