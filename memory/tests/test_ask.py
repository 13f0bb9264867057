"""The ask bar (House → Knowledge, POST /api/ask): ask and get an answer from what is known, with
the facts it used and "this worked / this was wrong" on each; or plainly teach. The exchange is
a chat conversation, and the reflection reads it after two new messages or one that teaches."""

from __future__ import annotations

import json

import pytest

from brain.models import ModelCall
from brain.tests.stubs.messages import stub_error, stub_json, stub_text
from knowledge.models import Fact, Memory, Observation, Source
from memory import actions, ask, reflection
from memory.models import InboxItem, ReflectionRun
from memory.switches import LearningOff
from memory.taught import Statement

BEDROOM = "Sarah likes the bedroom at 19 degrees"
FRIDGE = "The garage fridge is meant to run 24/7"
QUESTION = "What temperature does Sarah like the bedroom?"
FREEZER = "the garage freezer is off in winter"


@pytest.fixture(autouse=True)
def _no_model(settings):
    """Offline unless a test brings the stub."""
    settings.ANTHROPIC_API_KEY = ""


@pytest.fixture
def known(home) -> dict[str, Fact]:
    return {
        text: actions.learn(Statement.typed(memory=home, text=text, origin="typed")).fact
        for text in (BEDROOM, FRIDGE)
    }


def _conversation() -> Source:
    return Source.objects.get(kind=Source.Kind.CONVERSATION)


# Asking ---------------------------------------------------------------------------------------


def test_a_question_is_answered_with_the_facts_it_used_in_their_own_words(home, known, alice):
    exchange = ask.exchange(memory=home, text=QUESTION, by=alice)

    assert exchange.kind == ask.ASK
    assert exchange.answer == BEDROOM
    assert exchange.facts == [known[BEDROOM]]
    assert exchange.message == "Answered from 1 fact."
    assert not ModelCall.objects.exists()


def test_a_question_nothing_answers_says_so_and_lists_no_facts(home, known):
    exchange = ask.exchange(memory=home, text="Who mows the lawn?")

    assert exchange.answer == "brain doesn't know that yet."
    assert exchange.facts == []


def test_the_exchange_is_kept_as_a_chat_conversation_turn_by_turn(home, known, alice):
    first = ask.exchange(memory=home, text=QUESTION, by=alice)
    ask.exchange(memory=home, text="Is the garage fridge on all night?", by=alice,
                 conversation=first.conversation)  # fmt: skip

    source = _conversation()
    assert (source.channel, source.person) == ("chat", alice)
    assert [(turn["role"], turn["text"]) for turn in source.turns] == [
        ("person", QUESTION),
        ("assistant", BEDROOM),
        ("person", "Is the garage fridge on all night?"),
        ("assistant", FRIDGE),
    ]


# Teaching -------------------------------------------------------------------------------------


def test_plainly_teaching_files_through_learn_citing_the_conversation_and_its_turn(
    home, known, alice
):
    exchange = ask.exchange(memory=home, text=FREEZER, by=alice)

    item = InboxItem.objects.get(text=FREEZER)
    assert exchange.kind == ask.TEACH
    assert exchange.facts == [item.fact]
    assert exchange.answer == f"Noted: “{FREEZER}”. It waits to be filed into the memory document."
    assert (item.origin, item.taught_by) == ("chat", alice)
    assert item.fact.source == exchange.conversation
    assert Observation.objects.get(fact=item.fact).turn == 0
    assert [turn["text"] for turn in exchange.conversation.turns] == [FREEZER, exchange.answer]


def test_a_preference_taught_is_filed_as_the_speakers_own_and_only_once(home, alice):
    exchange = ask.exchange(memory=home, text="I like the bedroom at 19", by=alice)

    fact = Fact.objects.get()
    assert fact.text == "Alice likes the bedroom at 19."
    assert fact.taught_by == alice
    assert exchange.facts == [fact]
    assert exchange.answer == "Learned from what you said: “Alice likes the bedroom at 19.”"
    assert exchange.reflection.state == ReflectionRun.State.FILED


def test_teaching_a_secret_is_refused_and_nothing_is_kept(home, alice):
    with pytest.raises(Exception, match="brain does not keep secrets"):
        ask.exchange(memory=home, text="the wifi password is hunter2-blue-77", by=alice)

    assert not Source.objects.filter(kind=Source.Kind.CONVERSATION).exists()
    assert not InboxItem.objects.exists()


# The reflection after a turn -------------------------------------------------------------------


def test_the_reflection_reads_after_two_new_messages_not_after_one(home, known, alice):
    first = ask.exchange(memory=home, text=QUESTION, by=alice)
    assert first.reflection is None

    second = ask.exchange(
        memory=home, text="And the garage fridge?", by=alice, conversation=first.conversation
    )

    assert second.reflection is not None
    assert second.reflection.since_turn == 0
    reflection.execute(second.reflection.pk)
    second.reflection.refresh_from_db()
    assert second.reflection.read_to == 4
    third = ask.exchange(
        memory=home, text="What about the loft?", by=alice, conversation=first.conversation
    )
    assert third.reflection is None  # one new message since it last looked


def test_a_question_that_plainly_teaches_is_read_at_once(home, known, alice):
    exchange = ask.exchange(
        memory=home, text="I like the bedroom at 19. What is it set to now?", by=alice
    )

    assert exchange.kind == ask.ASK
    assert exchange.reflection is not None
    reflection.execute(exchange.reflection.pk)
    assert Fact.objects.filter(text="Alice likes the bedroom at 19.", taught_by=alice).exists()


# The kill switch ------------------------------------------------------------------------------


def test_with_learning_off_a_question_is_answered_and_teaching_is_refused(home, known, alice):
    Memory.objects.filter(pk=home.pk).update(learning=False)
    home.refresh_from_db()

    answered = ask.exchange(memory=home, text=QUESTION, by=alice)
    with pytest.raises(LearningOff, match="Learning is switched off for Home"):
        ask.exchange(memory=home, text=FREEZER, by=alice)

    assert answered.answer == BEDROOM
    assert answered.conversation is None  # nothing new is kept
    assert not Source.objects.filter(kind=Source.Kind.CONVERSATION).exists()
    assert not InboxItem.objects.filter(text=FREEZER).exists()


# With a model ---------------------------------------------------------------------------------


def test_with_a_model_the_answer_is_short_and_cites_the_facts_it_relied_on(home, known, llm_stub):
    bedroom = known[BEDROOM].pk
    llm_stub.script(stub_json({"answer": f"Sarah likes it at 19 degrees [{bedroom}].",
                               "used": [bedroom, 999999]}))  # fmt: skip

    exchange = ask.exchange(memory=home, text=QUESTION)

    assert exchange.answer == f"Sarah likes it at 19 degrees [{bedroom}]."
    assert exchange.facts == [known[BEDROOM]]  # an id it was not given is dropped
    assert ModelCall.objects.get().task == "ask"
    prompt = llm_stub.requests[0].prompt
    assert f"[{bedroom}] {BEDROOM}" in prompt
    assert prompt.endswith(f"Question: {QUESTION}")


@pytest.mark.parametrize(
    ("reply", "note"),
    [
        (stub_error(500, "api_error", "Internal error"), "The model could not be used ("),
        (stub_text("Sarah likes it warm."), "The model could not be used ("),
        (stub_json({"answer": "", "used": []}), "The model's answer was not used (it gave no"),
        (stub_json({"answer": "warm " * 300, "used": []}), "over 800 characters"),
    ],
    ids=["failing", "not JSON", "empty", "over-long"],
)
def test_a_model_that_fails_leaves_the_facts_in_their_own_words(home, known, llm_stub, reply, note):
    llm_stub.script(reply)

    exchange = ask.exchange(memory=home, text=QUESTION)

    assert exchange.answer == BEDROOM
    assert exchange.facts == [known[BEDROOM]]
    assert note in exchange.note


# POST /api/ask ---------------------------------------------------------------------------------


def test_post_api_ask_answers_with_the_fact_ids_and_goes_on_with_the_conversation(
    signed_in, home, known
):
    first = signed_in.post("/api/ask", {"text": QUESTION}, content_type="application/json")
    body = first.json()
    again = signed_in.post(
        "/api/ask",
        {"text": FREEZER, "conversation": body["conversation"]},
        content_type="application/json",
    )

    assert first.status_code == 200
    assert (body["kind"], body["answer"]) == ("ask", BEDROOM)
    assert [fact["id"] for fact in body["facts"]] == [known[BEDROOM].pk]
    assert again.json()["kind"] == "teach"
    assert again.json()["conversation"] == body["conversation"]
    assert len(_conversation().turns) == 4


def test_post_api_ask_refuses_what_it_cannot_use(signed_in, home, known, django_user_model):
    other = django_user_model.objects.create_user(username="tom", password="x")
    theirs = ask.exchange(memory=home, text=QUESTION, by=other).conversation

    empty = signed_in.post("/api/ask", {"text": "  "}, content_type="application/json")
    long = signed_in.post("/api/ask", {"text": "x" * 1001}, content_type="application/json")
    not_mine = signed_in.post(
        "/api/ask", {"text": QUESTION, "conversation": theirs.pk}, content_type="application/json"
    )

    assert empty.status_code == 400
    assert long.status_code == 400
    assert not_mine.status_code == 404
    assert (
        not_mine.json()["detail"]
        == f"There is no conversation #{theirs.pk} of yours from the ask bar."
    )


def test_with_learning_off_api_ask_answers_and_teaching_is_a_409(signed_in, home, known):
    Memory.objects.filter(pk=home.pk).update(learning=False)

    asked = signed_in.post("/api/ask", {"text": QUESTION}, content_type="application/json")
    taught = signed_in.post("/api/ask", {"text": FREEZER}, content_type="application/json")

    assert asked.status_code == 200
    assert asked.json()["answer"] == BEDROOM
    assert taught.status_code == 409
    assert taught.json()["detail"] == (
        "Learning is switched off for Home: nothing is filed until it is back on."
    )


def test_someone_who_may_only_read_may_ask_and_may_not_teach(
    client, home, known, django_user_model, settings
):
    settings.BRAIN_DEFAULT_PERMISSION = "read"
    client.force_login(django_user_model.objects.create_user(username="guest", password="x"))

    asked = client.post("/api/ask", {"text": QUESTION}, content_type="application/json")
    taught = client.post("/api/ask", {"text": FREEZER}, content_type="application/json")

    assert asked.status_code == 200
    assert taught.status_code == 403
    assert not InboxItem.objects.filter(text=FREEZER).exists()


# The ask bar on the page ----------------------------------------------------------------------


def test_the_ask_bar_answers_in_place_and_this_was_wrong_moves_confidence(signed_in, home, known):
    bedroom = known[BEDROOM]
    page = signed_in.get("/knowledge/").content.decode()
    assert 'id="ask"' in page

    answered = signed_in.post(
        "/knowledge/ask", {"text": QUESTION}, headers={"HX-Request": "true"}
    ).content.decode()

    assert BEDROOM in answered
    assert f'id="ask-fact-{bedroom.pk}"' in answered
    assert f"#{bedroom.pk}" not in answered  # no model answered: no [id] to match a line to
    assert "probably" in answered and "confidence 0.60" not in answered
    assert "This was wrong" in answered
    wrong = signed_in.post(
        f"/knowledge/ask/facts/{bedroom.pk}/outcome",
        {"success": "0"},
        headers={"HX-Request": "true"},
    )
    bedroom.refresh_from_db()
    assert bedroom.confidence < 0.6
    toast = json.loads(wrong.headers["HX-Trigger"])["showToast"]["text"]
    assert toast == f"Noted that “{BEDROOM}” was wrong: brain is not sure of it now."
    assert f'data-confidence="{bedroom.confidence:.2f}"' in wrong.content.decode()
    assert ">not sure<" in wrong.content.decode()


def test_the_ask_bar_works_without_javascript(signed_in, home, known):
    answered = signed_in.post("/knowledge/ask", {"text": QUESTION}, follow=True)

    page = answered.content.decode()
    assert answered.redirect_chain[-1][0] == "/knowledge/#ask"
    assert "You asked: " + QUESTION in page
    assert BEDROOM in page
    worked = signed_in.post(
        f"/knowledge/ask/facts/{known[BEDROOM].pk}/outcome", {"success": "1"}, follow=True
    )
    assert f"Noted that “{BEDROOM}” worked: brain " in worked.content.decode()


def test_teaching_with_learning_off_is_refused_on_the_page_with_the_text_kept(
    signed_in, home, known
):
    Memory.objects.filter(pk=home.pk).update(learning=False)

    refused = signed_in.post(
        "/knowledge/ask", {"text": FREEZER}, headers={"HX-Request": "true"}
    ).content.decode()

    assert "Learning is switched off for Home" in refused
    assert f'value="{FREEZER}"' in refused
    assert not InboxItem.objects.filter(text=FREEZER).exists()


# Passages -------------------------------------------------------------------------------------


@pytest.fixture
def notes(home, django_user_model):
    """A note everyone in the household reads, one only Sarah's role reads, and Tom, who may
    read the memory and holds no role."""
    from knowledge import passages
    from knowledge.models import Label, Membership, Permission, Role

    manual = Source.objects.create(memory=home, kind=Source.Kind.NOTE, title="House manual")
    passages.add(manual, ["The water stopcock is under the stairs, behind the hoover."])
    private = Label.objects.create(memory=home, name="Private", meaning="Sarah's own notes.")
    Role.objects.create(memory=home, name="Sarah").labels.add(private)
    diary = Source.objects.create(memory=home, kind=Source.Kind.NOTE, title="Sarah's notes")
    passages.add(
        diary, ["The water stopcock's spare key is in the blue flowerpot."], labels=[private]
    )
    tom = django_user_model.objects.create_user(username="tom")
    Membership.objects.create(memory=home, user=tom, permission=Permission.READ)
    return tom


def test_the_ask_bar_reads_the_notes_a_person_may_read_and_only_those(home, notes, admin_user):
    everything = ask.exchange(memory=home, text="Where is the water stopcock?", by=admin_user)
    exchange = ask.exchange(memory=home, text="Where is the water stopcock?", by=notes)

    assert len(everything.passages) == 2  # the flowerpot is relevant: only Tom may not read it

    assert exchange.knows
    assert [found.text for found in exchange.passages] == [
        "The water stopcock is under the stairs, behind the hoover."
    ]
    assert exchange.answer == (
        "From “House manual”: The water stopcock is under the stairs, behind the hoover."
    )
    assert "flowerpot" not in exchange.answer


def test_the_page_links_a_passage_the_answer_used_to_its_source(signed_in, home, notes):
    page = signed_in.post(
        "/knowledge/ask", {"text": "Where is the water stopcock?"}, headers={"HX-Request": "true"}
    ).content.decode()

    assert "From the household's documents" in page
    assert "behind the hoover" in page
    assert "#passage-0" in page


def test_a_models_answer_keeps_only_the_ids_it_was_given(home, known, llm_stub):
    bedroom = known[BEDROOM].pk
    llm_stub.script(stub_json({"answer": f"19 degrees [{bedroom}], or 22 [999999].",
                               "used": [bedroom, 999999]}))  # fmt: skip

    exchange = ask.exchange(memory=home, text=QUESTION)

    assert exchange.answer == f"19 degrees [{bedroom}], or 22."
    assert exchange.facts == [known[BEDROOM]]


def test_with_a_model_a_question_nothing_is_relevant_to_costs_no_call(home, known, llm_stub):
    exchange = ask.exchange(memory=home, text="Who mows the lawn?")

    assert exchange.answer == "brain doesn't know that yet."
    assert not ModelCall.objects.exists()


def test_not_knowing_the_ask_bar_shows_the_nearest_lines_it_has_as_just_that(signed_in, home):
    actions.learn(
        Statement.typed(
            memory=home, text="The boiler was replaced by a heat pump in 2021.", origin="typed"
        )
    )

    page = signed_in.post(
        "/knowledge/ask", {"text": "When is the boiler serviced?"}, headers={"HX-Request": "true"}
    ).content.decode()

    assert "brain doesn&#x27;t know that yet." in page or "brain doesn't know that yet." in page
    assert "The nearest lines it has, which do not answer it" in page
    assert "replaced by a heat pump" in page
