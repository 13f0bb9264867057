"""The one ranking (knowledge.retrieval.rank): relevance decides what is recalled; the subjects a
question names, outcomes and recency only adjust the order; the block fills its budget while
relevant lines remain; and context(), retrieve() and the ask bar agree."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from knowledge import retrieval, search, statements
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Subject
from knowledge.read_layer import SYSTEM
from knowledge.subjects import mentions

SMALL_TALK = [
    "Hey, how are you doing?",
    "Good thanks, busy week at work.",
    "Ha, same here. Did you watch the match?",
    "No, I missed it, I was at my sister's.",
    "How is your sister?",
    "She's well, she says hi.",
    "Say hi back! Anyway, talk soon.",
    "Talk soon, take care.",
]


def _say(memory, text: str, *, days_ago: float = 0.0, vector: bool = True, **fields) -> Fact:
    """A fact as teaching leaves it (its vector, the pages it names), written directly so the
    gate's judgement of small talk is not what is tested here."""
    embedder = get_embedder()
    when = timezone.now() - timedelta(days=days_ago)
    fact = Fact.objects.create(
        memory=memory,
        text=text,
        normalized=statements.normalise(text),
        channel=Fact.Channel.CHAT,
        status=Fact.Status.FILED,
        embedding=embedder.embed_one(text) if vector else None,
        embedder=embedder.name if vector else "",
        created_at=when,
        valid_from=when,
        **fields,
    )
    fact.subjects.set(mentions(memory)(text))
    return fact


def _conversation(memory, *, pages: bool) -> Fact:
    """Two people over three sessions, every turn "Name (date): words", each with a page when
    ``pages``; returns the one turn that says what Daniel's cat is called."""
    if pages:
        for name in ("Maya", "Daniel"):
            Subject.objects.create(memory=memory, kind=Subject.Kind.PERSON, name=name)
    answer = None
    for session, day in enumerate(("2023-03-04", "2023-03-18", "2023-04-09")):
        for turn, words in enumerate(SMALL_TALK):
            speaker = ("Maya", "Daniel")[turn % 2]
            _say(memory, f"{speaker} ({day}): {words}", days_ago=30 - session * 10 - turn / 100)
        if session == 1:
            answer = _say(
                memory,
                f"Daniel ({day}): We adopted a grey rescue cat and called her Pebble.",
                days_ago=19,
            )
            _say(memory, f"Maya ({day}): I started running with a club on Tuesdays.", days_ago=19)
    return answer


@pytest.mark.parametrize("pages", [True, False], ids=["with pages", "without pages"])
def test_a_question_naming_a_speaker_finds_the_turn_that_answers_it(home, pages):
    answer = _conversation(home, pages=pages)

    block = retrieval.context(
        memory=home, question="What is Daniel's cat called?", reader=SYSTEM, token_budget=300
    )
    found = retrieval.retrieve(memory=home, question="What is Daniel's cat called?", reader=SYSTEM)

    assert block.ranked[0] == answer.pk
    assert found[0] == answer
    assert "How is your sister?" not in block.text  # a page's small talk is not relevant


def test_naming_a_person_does_not_fill_the_block_with_their_newest_lines(home):
    answer = _conversation(home, pages=True)
    for n in range(30):  # Daniel's newest lines, about nothing asked
        _say(home, f"Daniel (2023-05-0{n % 9 + 1}): Just got back from the shop, round {n}.")

    block = retrieval.context(
        memory=home, question="What is Daniel's cat called?", reader=SYSTEM, token_budget=600
    )

    assert block.ranked[0] == answer.pk
    assert not [line for line in block.text.splitlines() if "back from the shop" in line]


def test_a_question_of_a_name_alone_recalls_that_persons_lines(home):
    _conversation(home, pages=True)

    block = retrieval.context(memory=home, question="Daniel", reader=SYSTEM, token_budget=2_000)

    daniel = set(
        Fact.objects.as_system("the test")
        .filter(subjects__name="Daniel")
        .values_list("pk", flat=True)
    )
    assert daniel and daniel <= set(block.ranked)
    assert set(block.ranked[: len(daniel)]) == daniel  # his own lines first, every one of them


def test_an_unrelated_failure_never_takes_a_line_and_a_related_one_does(home):
    _say(home, "Automating the porch light on sunset alone left it on all night.",
         valence=Fact.Valence.FAILURE)  # fmt: skip
    spare = _say(home, "Spare AA cells are in the drawer under the kitchen speaker.")
    related = _say(home, "Buying cheap AA cells for the door sensor meant changing them monthly.",
                   valence=Fact.Valence.FAILURE)  # fmt: skip

    block = retrieval.context(
        memory=home, question="Where are the spare AA cells?", reader=SYSTEM, token_budget=300
    )

    assert spare.pk in block.fact_ids
    assert "porch light" not in block.text
    assert related.pk in block.fact_ids


def test_the_block_fills_its_budget_while_relevant_lines_remain(home):
    lamp = Subject.objects.create(memory=home, kind=Subject.Kind.DEVICE, name="Office lamp")
    for n in range(40):
        _say(home, f"The office lamp dims to {n}% when the desk plug reports a call {n}.")
    _say(home, "The office lamp is warm white in the evening.")

    budget = 400
    block = retrieval.context(
        memory=home, question="office lamp dims desk plug call", subjects=[lamp],
        reader=SYSTEM, token_budget=budget,
    )  # fmt: skip

    longest = max(retrieval.tokens(line) + 1 for line in block.text.splitlines())
    assert block.tokens > budget - longest  # no room was left for another line
    assert len(block.fact_ids) > budget * retrieval.SUBJECT_SHARE / longest  # past the share


THINGS = ["kettle", "tumble dryer", "oven", "bathroom fan", "hair dryer", "microwave",
          "dishwasher", "iron", "toaster", "vacuum cleaner", "printer", "heater"]  # fmt: skip


def test_a_subjects_share_never_drops_a_relevant_line_to_keep_a_less_relevant_one(home):
    lamp = Subject.objects.create(memory=home, kind=Subject.Kind.DEVICE, name="Office lamp")
    exact = [
        _say(home, f"At night the office lamp flickers whenever the {thing} starts ({n}).")
        for n, thing in enumerate(THINGS)
    ]
    loose = [_say(home, f"The hall light flickers whenever the {thing} starts ({n}).")
             for n, thing in enumerate(THINGS)]  # fmt: skip
    budget = 250

    block = retrieval.context(
        memory=home, question="Why does the office lamp flicker at night?", reader=SYSTEM,
        token_budget=budget,
    )  # fmt: skip

    chosen = set(block.relevance)
    lamp_lines = [fact for fact in exact if fact.pk in chosen]
    spent = sum(retrieval.tokens(retrieval._line(fact)) + 1 for fact in lamp_lines)
    assert spent > budget * retrieval.SUBJECT_SHARE  # more than its share: they were the best
    # Whatever the share held back, nothing less relevant than it took its place.
    assert not [fact for fact in loose if fact.pk in chosen] or len(lamp_lines) == len(exact)
    assert all(lamp.pk in fact.subjects.values_list("pk", flat=True) for fact in exact)


def test_ties_go_to_the_newer_line_and_only_ties(home):
    best = _say(home, "The blue mug and the teapot live in the top cupboard.", days_ago=20)
    older = _say(home, "The blue mug lives in the top cupboard.", days_ago=10)
    newer = _say(home, "The blue mug lives in the top cupboard.", days_ago=1)

    found = retrieval.retrieve(
        memory=home, question="Where do the blue mug and the teapot live?", reader=SYSTEM, k=3
    )

    assert found == [best, newer, older]


def _row(pk: int, lexemes: dict, vector=None) -> search.Row:
    """A line taught an hour after the one before it: no reply to it."""
    return search.Row(pk, "", "fact", 0.6, 1, 0, 0, [], vector, lexemes, "note", pk * 3600)


def _asked(terms: set[str], vector=None) -> retrieval.Asked:
    asked = retrieval.Asked("a question of several words", frozenset(terms), frozenset(),
                            frozenset(), text=" ".join(terms))  # fmt: skip
    asked.vector, asked.embedder = vector, "minilm-int8-v1"
    return asked


def test_either_list_may_carry_a_line_alone_when_it_is_sure():
    question = np.zeros(384, dtype=np.float32)
    question[0] = 1.0
    same_meaning = question.copy()
    elsewhere = np.zeros(384, dtype=np.float32)
    elsewhere[1] = 1.0
    rows = [
        _row(1, {"stopcock": 1, "water": 1, "main": 1}),  # every word, no vector
        _row(2, {"kitchen": 1, "sink": 1}, same_meaning),  # no word, the same meaning
        _row(3, {"water": 1}, elsewhere),  # one common word, another meaning
    ] + [_row(10 + n, {"water": 1, "meter": 1}, elsewhere) for n in range(20)]

    scored = {line.pk: line.relevance for line in retrieval.scored(
        rows, _asked({"stopcock", "water", "main"}, question))}  # fmt: skip

    assert scored[1] >= retrieval.RELEVANCE_FLOOR
    assert scored[2] >= retrieval.RELEVANCE_FLOOR
    assert scored[3] < retrieval.RELEVANCE_FLOOR


def test_a_word_every_line_holds_says_little_and_a_rare_one_much():
    rows = [_row(n, {"maya": 1, "run": 1}) for n in range(30)]
    rows.append(_row(99, {"maya": 1, "marathon": 1}))

    scored = retrieval.scored(rows, _asked({"maya", "marathon"}))

    assert scored[0].pk == 99
    assert scored[1].relevance < scored[0].relevance / 2


def test_retrieve_reads_in_no_more_round_trips_than_context(home, django_assert_max_num_queries):
    _conversation(home, pages=True)
    question = "What is Daniel's cat called?"
    retrieval.context(memory=home, question=question, reader=SYSTEM)  # warm: lexemes, model

    with django_assert_max_num_queries(3):
        retrieval.context(memory=home, question=question, reader=SYSTEM)
    with django_assert_max_num_queries(3):  # the facts built from the rows it ranked
        found = retrieval.retrieve(memory=home, question=question, reader=SYSTEM)
    assert found[0].kind == Fact.objects.as_system("the test").get(pk=found[0].pk).kind


def test_a_reply_carries_part_of_the_line_it_replies_to_and_only_a_reply():
    question = np.zeros(384, dtype=np.float32)
    question[0] = 1.0
    asked = _asked({"dissertation"}, question)
    elsewhere = np.zeros(384, dtype=np.float32)
    elsewhere[1] = 1.0

    def said(pk, words, at):
        return search.Row(pk, "", "fact", 0.6, 1, 0, 0, [], elsewhere, words, "note", at)

    asking = said(40, {"dissertation": 1}, 1_000)  # "What will your dissertation be on?"
    reply = said(41, {"harbour": 1, "porpois": 1}, 1_030)  # the next turn, 30 s later
    later = said(42, {"seal": 1}, 1_030 + retrieval.REPLY_WINDOW_S + 60)  # a reply to a reply
    apart = said(44, {"kiln": 1}, 1_060)  # after a line that is not among the candidates

    scored = {line.pk: line.relevance for line in retrieval.scored(
        [asking, reply, later, apart], asked)}  # fmt: skip

    assert scored[40] >= retrieval.ANSWER_FLOOR
    assert scored[41] == pytest.approx(retrieval.REPLY_SHARE * scored[40])
    assert scored[42] < retrieval.RELEVANCE_FLOOR
    assert scored[44] < retrieval.RELEVANCE_FLOOR
