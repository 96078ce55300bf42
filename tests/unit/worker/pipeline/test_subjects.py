from ferret.records import Hit, Memory, SubQueryOutcome
from ferret.worker.pipeline.merge import merge_and_select
from ferret.worker.pipeline.subjects import apply_subject_boost, named_in


def _turn(memory_id: str, body: str, title: str = "") -> Memory:
    return Memory(id=memory_id, type="event", content_body=body, content_title=title)


def _boosted(memory: Memory, query: str) -> bool:
    return apply_subject_boost([Hit.of(memory, 0.5)], named_in(query), 2.0)[0].boosted


def test_a_transcript_line_is_by_its_speaker_and_a_title_is_about_its_names():
    assert _boosted(_turn("a", "Caroline: I've been looking into adoption agencies."), "What did Caroline do?")
    assert _boosted(_turn("b", "Dr. Mel Ruiz: take two a day"), "What did Mel prescribe?")
    assert _boosted(_turn("c", "Booked the flights", title="Flights booked to Italy"), "When do I fly to Italy?")
    assert not _boosted(_turn("d", "Melanie: I told Caroline about it"), "What did Caroline do?")
    assert not _boosted(_turn("e", "we met Caroline at 10: the talk was long"), "What did Caroline do?")
    assert not _boosted(_turn("f", "Carolines: a band"), "What did Caroline do?")


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
