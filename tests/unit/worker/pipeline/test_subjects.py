from ferret.records import Hit, Memory, SubQueryOutcome
from worker.pipeline.merge import merge_and_select
from worker.pipeline.subjects import apply_subject_boost, named_in, subjects_of


def _turn(memory_id: str, body: str, title: str = "") -> Memory:
    return Memory(id=memory_id, type="event", content_body=body, content_title=title)


def test_a_transcript_line_is_by_its_speaker_and_a_title_is_about_its_names():
    assert subjects_of(_turn("a", "Caroline: I've been looking into adoption agencies.")) == {"caroline"}
    assert subjects_of(_turn("b", "Dr. Mel Ruiz: take two a day")) == {"dr.", "mel", "ruiz"}
    assert subjects_of(_turn("c", "Booked the Lisbon to Rome flights", title="Flights booked to Italy")) \
        == {"flights", "italy"}
    assert subjects_of(_turn("d", "we met at 10: the talk was long")) == frozenset()


def test_a_question_names_people_and_things_but_not_months():
    assert named_in("What did Caroline's friend research in May?") == {"caroline"}
    assert named_in("What's my BTC thesis?") == {"btc"}
    assert named_in("what did they research?") == frozenset()


def test_the_boost_lifts_the_named_speakers_hits_and_never_filters():
    hits = [Hit.of(_turn("m", "Melanie: Caroline researched agencies"), 0.6),
            Hit.of(_turn("c", "Caroline: adoption agencies"), 0.4)]
    boosted = apply_subject_boost(hits, named_in("What did Caroline research?"), 2.0)
    assert [(h.id, h.score, h.original_score, h.boosted) for h in boosted] == [
        ("m", 0.6, 0.6, False), ("c", 0.8, 0.4, True)]
    assert apply_subject_boost(hits, named_in("What did Caroline research?"), 1.0) == hits


def test_merge_ranks_each_part_by_its_own_names():
    outcomes = [SubQueryOutcome(0, "What did Caroline research", (
                    Hit.of(_turn("m1", "Melanie: research is fun"), 0.6),
                    Hit.of(_turn("c1", "Caroline: agencies"), 0.4))),
                SubQueryOutcome(1, "where did Melanie run", (
                    Hit.of(_turn("c2", "Caroline: I ran too"), 0.6),
                    Hit.of(_turn("m2", "Melanie: a charity race"), 0.4)))]
    merged = merge_and_select(outcomes, subject_boost=2.0, relevance_ratio=0.1, max_results=4)
    assert [h.id for h in merged] == ["c1", "m2", "m1", "c2"]
    plain = merge_and_select(outcomes, subject_boost=1.0, relevance_ratio=0.1, max_results=4)
    assert [h.id for h in plain] == ["m1", "c2", "c1", "m2"]
