import pytest

from ferret.worker.pipeline.classify import classify
from ferret.worker.pipeline.decompose import decompose


def _parts(query, max_parts=4):
    return decompose(query, classify(query), max_parts).parts


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("What's BTC doing and how is SOL?", ("What's BTC doing", "how is SOL")),
        ("What's BTC at? Did SOL close?", ("What's BTC at", "Did SOL close")),
        ("Check BTC, also look at ETH?", ("Check BTC", "look at ETH")),
        ("BTC and SOL analysis", ("BTC analysis", "SOL analysis")),
        ("Show BTC funding as well as SOL open interest", ("Show BTC funding", "SOL open interest")),
        ("What's my BTC thesis and how did my last SOL trade go?",
         ("What's my BTC thesis", "how did my last SOL trade go")),
    ],
)
def test_seed_decomposition_table(query, parts):
    assert _parts(query) == parts


def test_single_query_unchanged():
    assert _parts("BTC support levels") == ("BTC support levels",)


def test_parts_keep_their_question_word():
    assert _parts("Where did Jon travel? Also, what is Gina's studio called?") == (
        "Where did Jon travel", "what is Gina's studio called")


def test_short_parts_are_dropped():
    # "ok?" is too short to be a part, leaving one part: no decomposition
    assert _parts("ok? what is the BTC thesis?") == ("ok? what is the BTC thesis?",)


def test_sequential_strategy():
    result = decompose("Open the BTC long and then what did SOL do?",
                       classify("Open the BTC long and then what did SOL do?"), 4)
    assert result.was_decomposed


def test_long_queries_are_not_decomposed():
    query = "What's BTC at? Did SOL close? " + "x" * 600
    assert _parts(query) == (query,)


def test_at_most_max_parts():
    query = "What is A1? What is B2? What is C3? What is D4? What is E5?"
    assert len(_parts(query, max_parts=3)) == 3


def test_non_compound_is_not_split():
    query = "what did I learn and apply"  # no compound pattern
    assert not decompose(query, classify(query), 4).was_decomposed


@pytest.mark.parametrize(("query", "parts"), [
    ("What is my BTC thesis and where did I set its stop?", ("What is my BTC thesis", "where did I set BTC's stop")),
    ("When did Caroline move to Sweden and what did she study there?",
     ("When did Caroline move to Sweden", "what did Caroline study there")),
    ("What's my BTC thesis and how did my last SOL trade go?",  # nothing to carry over
     ("What's my BTC thesis", "how did my last SOL trade go")),
    ("What did Melanie paint and why did she paint it?",  # "it" is the painting, not a name: it stays
     ("What did Melanie paint", "why did Melanie paint it")),
])
def test_a_part_keeps_the_subject_the_question_named_once(query, parts):
    assert _parts(query) == parts


@pytest.mark.parametrize(("query", "parts"), [
    ("What is my BTC thesis\nHow did my SOL trade go", ("What is my BTC thesis", "How did my SOL trade go")),
    ("What is my BTC thesis\nand how did my SOL trade go\nwhere did I set the ETH stop",
     ("What is my BTC thesis", "how did my SOL trade go", "where did I set the ETH stop")),
    ("- what is my BTC thesis?\n- which breakouts did I miss?",
     ("what is my BTC thesis", "which breakouts did I miss")),
    ("1. When did Caroline move?\n2. What did she study?", ("When did Caroline move", "What did Caroline study")),
])
def test_one_question_per_line_is_compound(query, parts):
    assert _parts(query) == parts


@pytest.mark.parametrize("query", ["BTC thesis\nSOL trade", "Tell me about BTC\nthanks",
                                   "What is my BTC thesis\nin short"])
def test_lines_that_are_not_questions_are_not_split(query):
    assert _parts(query) == (query,)


@pytest.mark.parametrize("query", ["What do Jon and Gina both like?", "When did Caroline and Melanie go to a pride "
                                   "festival together?", "What do Jon and Gina have in common?",
                                   "How do Melanie and Caroline describe their journey?"])
def test_a_question_about_two_people_together_is_one_question(query):
    assert _parts(query) == (query,)


def test_a_list_of_topics_is_still_split():
    assert len(_parts("BTC and SOL analysis")) == 2


@pytest.mark.parametrize("query", ["According to John, who is his favorite character from Lord of the Rings?",
                                   "Based on Tim's collections, what is a shop he would enjoy visiting?",
                                   "D'après Gina, qui est son mentor ?"])
def test_a_clause_that_frames_the_question_is_not_a_question_of_its_own(query):
    assert _parts(query) == (query,)


def test_a_question_after_a_question_with_a_comma_is_still_split():
    assert _parts("Where does Caroline live, what does she do for work?") == (
        "Where does Caroline live", "what does Caroline do for work")


@pytest.mark.parametrize("query", ["Who is Tim and John's favorite basketball player?",
                                   "How many weeks passed between Maria adopting Coco and Shadow?",
                                   "What similar collectible do Tim and John own?"])
def test_one_possessive_or_a_comparison_between_two_is_one_question(query):
    assert _parts(query) == (query,)


def test_names_that_are_not_joined_are_not_split_per_name():
    first = _parts("When did John read Lord of the Rings, and who wrote it?")[0]
    assert first == "When did John read Lord of the Rings"
    assert _parts("Who is John's favourite character in Lord of the Rings?") == (
        "Who is John's favourite character in Lord of the Rings?",)


@pytest.mark.parametrize(("query", "parts"), [
    ("Two things: where does Caroline live, and when did she move?",
     ("where does Caroline live", "when did Caroline move")),
    ("First, what did Caroline research? Second, where did Melanie camp?",
     ("what did Caroline research", "where did Melanie camp")),
    ("What did Caroline research? Oh, and where did Melanie camp?",
     ("What did Caroline research", "where did Melanie camp")),
    ("What did Caroline research; would Melanie enjoy Vivaldi?",
     ("What did Caroline research", "would Melanie enjoy Vivaldi")),
    ("Why did Gina open a store, did Jon and Gina both dance?",
     ("Why did Gina open a store", "did Jon and Gina both dance")),
    ("What did Maria do for her faith and in what activity did she take part?",
     ("What did Maria do for her faith", "in what activity did Maria take part")),
    ("Where does Caroline live, what does she do, and would she move again?",
     ("Where does Caroline live", "what does Caroline do", "would Caroline move again")),
])
def test_more_of_the_ways_people_chain_questions(query, parts):
    assert _parts(query) == parts


TWO = ("Where does Caroline live", "when did Melanie camp")


@pytest.mark.parametrize(("query", "parts"), [
    ("Où habite Caroline, et quand a-t-elle déménagé ?", ("Où habite Caroline", "quand a-t-elle déménagé")),
    ("Where does Caroline live ? Et aussi, when did Melanie camp ?", TWO),
    ("Where does Caroline live, puis when did Melanie camp ?", TWO),
    ("¿Dónde vive Caroline? ¿Y cuándo se mudó?", ("Dónde vive Caroline", "cuándo se mudó")),
    ("Where does Caroline live, y además when did Melanie camp?", TWO),
    ("Wo wohnt Caroline und wann ist sie umgezogen?", ("Wo wohnt Caroline", "wann ist sie umgezogen")),
    ("Where does Caroline live, und auch when did Melanie camp?", TWO),
])
def test_the_joins_of_the_four_languages(query, parts):
    assert _parts(query) == parts


def test_a_part_that_names_its_own_subject_keeps_it():
    assert _parts("When did Jon and Gina start?\nWhat do Jon and Gina both like?") == (
        "When did Jon and Gina start", "What do Jon and Gina both like")
    assert _parts("What was John's way of coping, and what schools did he play in?") == (
        "What was John's way of coping", "what schools did John play in")


def test_a_date_is_not_whom_a_part_is_about():
    assert _parts("What did Nate buy for the party?\nWhat game is he playing on November 7, 2022?") == (
        "What did Nate buy for the party", "What game is Nate playing on November 7, 2022")


@pytest.mark.parametrize("query", ["When did Jon and Gina decide to collaborate to create dance content?",
                                   "What kind of deals did John sign with Nike and Gatorade?",
                                   "Why do Tim and John find LeBron inspiring?",
                                   "Was the first half of September 2022 a good month for Nate and Joanna?"])
def test_names_joined_in_a_question_are_its_one_subject_or_object(query):
    assert _parts(query) == (query,)


def test_codes_joined_in_a_question_are_still_looked_up_one_by_one():
    assert _parts("What's my thesis on BTC and SOL?") == ("BTC thesis", "SOL thesis")


@pytest.mark.parametrize("query, parts", [
    ("Where does Caroline live. Another thing: what does Melanie paint?",
     ("Where does Caroline live", "what does Melanie paint")),
    ("What does Caroline paint / where does Melanie run?", ("What does Caroline paint", "where does Melanie run")),
])
def test_questions_that_stand_alone_are_split_however_joined(query, parts):
    assert _parts(query) == parts
