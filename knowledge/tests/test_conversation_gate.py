"""What people say is not all memory: taught through ``learn`` turn by turn, a greeting, thanks
or small talk is refused with its reason; two people's words are two facts however alike they
read; a change of a stated value, owner, date or state replaces the old line or asks, and is
never merged into it. The judge runs with MiniLM here, as the app judges with its default
embedder: meaning is what merged the other speaker's news into a greeting."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from knowledge import retrieval
from knowledge.actions import file_fact
from knowledge.gate import Said, relate
from knowledge.models import Conflict, Fact
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement


@pytest.fixture(autouse=True)
def minilm(settings):
    settings.BRAIN_EMBEDDER = "minilm"


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create_user(username="dana", password="x")


@pytest.fixture
def omar(django_user_model):
    return django_user_model.objects.create_user(username="omar", password="x")


def said(home, text, by=None, origin="chat"):
    return learn(Statement.typed(memory=home, text=text, origin=origin, by=by))


def _believed(fact: Fact) -> bool:
    return Fact.objects.live().filter(pk=fact.pk).exists()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("Hi! Great to see you, what's new?", "a greeting"),
        ("Hey Omar, long time no see!", "a greeting"),
        ("Thanks, really appreciate the support!", "thanks"),
        ("Cheers for sorting that out, you're a star.", "thanks"),
        ("See you next week, take care!", "a goodbye"),
        ("Haha, that's brilliant. Good for you!", "small talk"),
        ("I'm good thanks, how about you?", "small talk"),
    ],
)
def test_a_greeting_thanks_or_small_talk_is_refused_saying_what_it_is(home, dana, line, reason):
    with pytest.raises(ValidationError, match=f"That is {reason}, not something to remember"):
        said(home, line, by=dana)

    assert not Fact.objects.exists()


def test_a_question_said_in_a_conversation_tells_nothing_and_is_refused(home, dana):
    with pytest.raises(ValidationError, match="That asks something and tells nothing"):
        said(home, "Oh wow, congratulations! When do you start?", by=dana)


def test_the_greeting_and_thanks_around_a_statement_are_left_out_of_the_fact(home, dana):
    learned = said(home, "Hi Omar! I started at the county library on Monday. Thanks again!", dana)

    assert learned.fact.text == "I started at the county library on Monday."


def test_one_speakers_news_is_never_merged_into_the_other_speakers_greeting(home, dana, omar):
    # A greeting kept before the gate knew talk from facts.
    greeting = file_fact(
        memory=home,
        text="Hey! So good to see you, what's been happening?",
        channel="chat",
        kind="note",
        by=omar,
    )

    news = said(home, "I got laid off from the bank yesterday, so it's been a rough week.", dana)

    assert news.verdict == "novel", news.reason
    greeting.refresh_from_db()
    assert greeting.support == 1
    assert _believed(news.fact)


def test_thanks_with_words_in_it_never_retires_a_line(home, dana, omar):
    newsletter = said(home, "Omar looks after the club newsletter.", omar, origin="typed").fact

    relation = relate(
        Said(newsletter.text, "omar"),
        Said("Thanks so much for all the support with the newsletter from everyone!", "dana"),
    )

    assert relation.verdict == "novel", relation.reason
    assert _believed(newsletter)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("I love walking in the Peak District.", "I love walking in the Peak District too!"),
        ("My brother lives in Dublin.", "My sister lives in Dublin."),
        ("I'm training for the Leeds 10k in May.", "I'm training for the Leeds half in May."),
        ("We're moving house in the spring.", "We moved house last spring."),
    ],
)
def test_two_people_saying_alike_things_are_two_facts_both_believed(
    home, dana, omar, first, second
):
    theirs = said(home, first, dana)
    mine = said(home, second, omar)

    assert mine.verdict in ("novel", "conflict"), mine.reason
    assert _believed(theirs.fact) and _believed(mine.fact)


def test_one_person_saying_a_house_fact_another_said_in_other_words_strengthens_it(
    home, dana, omar
):
    first = said(home, "The bins go out on Tuesday evenings.", dana)
    again = said(home, "The bins go out every Tuesday evening.", omar)

    assert again.verdict == "same", again.reason
    assert again.fact.pk == first.fact.pk


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "The router is plugged in in the study.",
            "The router is on the landing now, wired, not in the study.",
        ),
        ("Amir looks after the payroll exports.", "Amir passed the payroll exports on to Beth."),
        ("The kitchen refit starts on 4 May.", "The kitchen refit has been pushed back to 19 May."),
        ("Our broadband is on the 150 Mb plan.", "We moved our broadband to the 900 Mb plan."),
        ("The school fete is on 21 June.", "The school fete slipped to 28 June."),
        ("Nadia runs the allotment rota.", "Nadia handed the allotment rota over to Joe."),
        ("The guest bed is in the loft.", "The guest bed is in the study now, not the loft."),
        ("Our water bill is £38 a month.", "The water company put our bill up to £45 a month."),
    ],
)
def test_a_change_replaces_the_old_line_or_asks_and_is_never_merged_into_it(home, before, after):
    old = said(home, before, origin="typed").fact
    new = said(home, after, origin="typed")

    assert new.verdict in ("contradiction", "conflict"), new.reason
    old.refresh_from_db()
    if new.verdict == "contradiction":
        assert old.superseded_by_id == new.fact.pk and not _believed(old)
        block = retrieval.context(memory=home, question=before, reader=SYSTEM).text
        assert before not in block
    else:
        assert Conflict.objects.filter(old=old, new=new.fact, state="open").exists()


def test_a_role_is_passed_on_only_where_a_role_is_named(home, dana):
    role = said(home, "Priti maintains the analytics dashboard.", origin="typed").fact
    unrelated = said(home, "Priti's dashboard work is appreciated by everyone.", origin="typed")
    taken = said(home, "Kemal took over the analytics dashboard from Priti.", origin="typed")

    assert unrelated.verdict != "contradiction"
    assert taken.verdict == "contradiction", taken.reason
    role.refresh_from_db()
    assert role.superseded_by_id == taken.fact.pk


def test_the_reflection_over_a_conversation_leaves_talk_out_saying_what_it_was(home, dana):
    from memory import conversations, reflection

    source = conversations.record_conversation(
        memory=home,
        channel="chat",
        person=dana,
        messages=[
            {"text": "Remember that thanks so much for all the help!"},
            {"text": "Remember that the spare keys are in the kitchen drawer."},
        ],
    ).source

    run = reflection.reflect(source)

    assert [entry["text"] for entry in run.filed] == ["The spare keys are in the kitchen drawer."]
    assert any("thanks, not a fact" in note for note in run.notes)


def test_an_import_brings_talk_kept_as_facts_but_does_not_believe_it(home, dana):
    from knowledge.models import Memory
    from knowledge.read_layer import SYSTEM as system
    from surfaces import portable

    file_fact(memory=home, text="Hi! Lovely to see you all.", channel="chat", kind="note", by=dana)
    learn(
        Statement.typed(
            memory=home, text="The spare keys are in the kitchen drawer.", origin="typed"
        )
    )
    garden = Memory.objects.create(slug="garden", name="Garden")

    report = portable.import_memory(garden, portable.export_memory(home, reader=system))

    greeting = Fact.objects.get(memory=garden, text="Hi! Lovely to see you all.")
    keys = Fact.objects.get(memory=garden, text="The spare keys are in the kitchen drawer.")
    assert not _believed(greeting) and greeting.forgotten_reason == "a greeting, not a fact"
    assert _believed(keys)
    assert any("were talk, not facts" in line for line in report)


def test_two_lines_that_deny_the_same_holder_of_two_things_do_not_replace_each_other():
    relation = relate(
        Said("The framework contract is now owned by Marta, not Luca."),
        Said("The quarterly forecast is now owned by Marta, not Luca."),
    )

    assert relation.verdict not in ("contradiction", "refinement", "same"), relation.reason
