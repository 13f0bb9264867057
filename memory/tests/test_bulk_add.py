"""POST /api/memory/add/bulk: many statements in one request, added whole or not at all, each
once, recalled at once and embedded in the background; refusals name the statement."""

import pytest

from knowledge import reembedding, retrieval
from knowledge.models import Fact, Membership, Observation, Permission, Subject
from knowledge.read_layer import SYSTEM
from memory.bulk import MAX_STATEMENTS
from surfaces import portable

BULK = "/api/memory/add/bulk"
ROOMS = ["kitchen", "hall", "loft", "garage", "study", "cellar", "landing", "porch"]


def _post(client, facts, **more):
    return client.post(BULK, {"facts": facts, **more}, content_type="application/json")


def _inventory(count: int) -> list[str]:
    return [
        f"Storage box {n} in the {ROOMS[n % len(ROOMS)]} holds spare bulbs." for n in range(count)
    ]


@pytest.fixture
def quiet(monkeypatch):
    """What the import asks of the worker, kept instead of sent."""
    sent: list[str] = []
    from knowledge import portable as knowledge_portable

    monkeypatch.setattr(knowledge_portable, "send_on_commit", lambda name, *args: sent.append(name))
    return sent


def test_a_thousand_statements_are_added_in_one_request_and_recalled_at_once(
    signed_in, home, admin_user, quiet
):
    response = _post(signed_in, _inventory(1_000))

    assert response.status_code == 201
    assert response.json()["added"] == 1_000
    assert response.json()["known"] == 0
    facts = Fact.objects.for_memory(home).live()
    assert facts.count() == 1_000
    assert set(facts.values_list("status", "in_document", "channel").distinct()) == {
        ("filed", False, "api")
    }
    assert Observation.objects.filter(fact__memory=home).count() == 1_000
    box = facts.get(text="Storage box 17 in the hall holds spare bulbs.")
    assert box.taught_by_name == admin_user.get_username()
    assert box.source.title.startswith("1,000 statements sent at once by ada")
    block = retrieval.context(
        memory=home, question="Which box holds spare bulbs, box 17?", reader=SYSTEM
    )
    assert box.pk in block.fact_ids


def test_their_vectors_come_after_the_request_from_the_background(signed_in, home, quiet):
    _post(signed_in, _inventory(20))

    assert quiet == ["knowledge.tasks.reembed_facts"]
    assert not Fact.objects.for_memory(home).filter(embedding__isnull=False).exists()
    reembedding.reembed_stale()
    assert not Fact.objects.for_memory(home).filter(embedding__isnull=True).exists()


def test_words_already_known_or_said_twice_in_the_request_are_counted_not_added_again(
    signed_in, home, quiet
):
    _post(signed_in, ["The loft hatch sticks in wet weather."])

    response = _post(
        signed_in,
        [
            "The loft hatch sticks in wet weather.",
            "The porch light is on a timer.",
            "the porch light is on a timer",
        ],
    )

    assert response.json() == {
        "added": 1,
        "known": 2,
        "refused": 0,
        "not_facts": {},
        "judged": {},
        "detail": "Added 1 facts; 2 already known. They are recalled now; their vectors are "
        "computed in the background.",
    }
    assert Fact.objects.for_memory(home).count() == 2


def test_a_secret_anywhere_refuses_the_whole_request_naming_the_statement(signed_in, home):
    facts = [*_inventory(10), "The alarm code is 4921, remember it."]

    response = _post(signed_in, facts)

    assert response.status_code == 400
    assert "Statement 11" in response.json()["detail"]
    assert not Fact.objects.exists()


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (["The kettle is blue.", "   "], "Statement 2: A fact can't be empty"),
        ([], "facts"),
        (["x"] * (MAX_STATEMENTS + 1), str(MAX_STATEMENTS)),
    ],
)
def test_an_empty_statement_none_at_all_or_too_many_are_refused_naming_what_is_wrong(
    signed_in, home, facts, said
):
    response = _post(signed_in, facts)

    assert response.status_code == 400
    assert said in str(response.json())
    assert not Fact.objects.exists()


def test_each_fact_is_about_what_it_names_and_what_the_request_names(signed_in, home, quiet):
    kitchen = Subject.objects.create(memory=home, kind=Subject.Kind.ROOM, name="kitchen")
    sarah = Subject.objects.create(memory=home, kind=Subject.Kind.PERSON, name="Sarah")

    _post(signed_in, ["The kitchen bin is emptied on Mondays."], subjects=["Sarah"])

    fact = Fact.objects.get(memory=home)
    assert set(fact.subjects.all()) == {kitchen, sarah}
    assert _post(signed_in, ["Anything."], subjects=["the moon"]).status_code == 400


def test_someone_who_may_only_read_cannot_add(client, home, alice):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    client.force_login(alice)

    response = _post(client, ["The kettle is blue."])

    assert response.status_code == 403
    assert not Fact.objects.exists()


def test_a_bulk_add_is_not_judged_against_what_is_known(signed_in, home, quiet):
    """As documented: no statement retires another; both stay live for a person to see."""
    _post(signed_in, ["The boiler is serviced in March."])
    _post(signed_in, ["The boiler is serviced in October."])

    assert Fact.objects.for_memory(home).live().count() == 2


def test_what_a_bulk_add_wrote_travels_in_the_export(signed_in, home, quiet):
    _post(signed_in, _inventory(3))

    exported = portable.export_memory(home, reader=SYSTEM)

    assert len(exported["facts"]) == 3
    assert len(exported["observations"]) == 3


def test_greetings_thanks_and_questions_in_a_bulk_add_are_not_added_and_are_counted(
    signed_in, home, quiet
):
    response = _post(
        signed_in,
        [
            "Hi! Great to see you, what's new?",
            "Thanks, really appreciate the support!",
            "Is the loft insulated?",
            "Hi Jo! The spare keys hang by the back door.",
        ],
    )

    body = response.json()
    assert (body["added"], body["refused"]) == (1, 3)
    assert body["not_facts"] == {"a greeting": 1, "thanks": 1, "a question": 1}
    assert "3 were talk or questions, not facts" in body["detail"]
    (fact,) = Fact.objects.for_memory(home)
    assert fact.text == "The spare keys hang by the back door."


def test_a_change_in_a_bulk_add_replaces_what_it_changes(signed_in, home, quiet):
    _post(signed_in, ["The school fete is on 21 June.", "Nadia runs the allotment rota."])

    body = _post(
        signed_in,
        ["The school fete slipped to 28 June.", "The shed roof leaks in heavy rain."],
    ).json()

    assert body["added"] == 2 and body["judged"] == {"contradiction": 1}
    old = Fact.objects.get(text="The school fete is on 21 June.")
    assert old.superseded_by.text == "The school fete slipped to 28 June."
    assert not Fact.objects.live().filter(pk=old.pk).exists()


def test_a_change_later_in_the_same_request_replaces_the_line_before_it(signed_in, home, quiet):
    body = _post(
        signed_in,
        ["Nadia runs the allotment rota.", "Nadia handed the allotment rota over to Joe."],
    ).json()

    assert body["added"] == 2 and body["judged"] == {"contradiction": 1}
    old = Fact.objects.get(text="Nadia runs the allotment rota.")
    assert old.superseded_by is not None
