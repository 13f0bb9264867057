"""The facts REST API: what an automation or an agent sees."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from knowledge.models import Fact, Membership, Permission
from memory.actions import learn
from memory.taught import Statement


@pytest.fixture
def api(client, admin_user):
    client.force_login(admin_user)
    return client


def _teach(home, text, **kwargs):
    return learn(
        Statement.typed(memory=home, text=text, origin=kwargs.pop("origin", "typed"), **kwargs)
    ).fact


def test_an_administrator_adds_a_fact_and_it_is_queued(api, home):
    response = api.post(
        "/api/memory/add",
        {"fact": "Guests use the loft.", "confidence": "high"},
        content_type="application/json",
    )

    assert response.status_code == 201
    body = response.json()
    assert body["verdict"] == "novel" and body["queued"] is True
    fact = Fact.objects.get(pk=body["fact"])
    assert (fact.channel, fact.prior) == ("api", 0.8)


def test_saying_it_again_is_200_with_more_support_not_a_new_row(api, home):
    api.post("/api/memory/add", {"fact": "Guests use the loft."}, content_type="application/json")

    again = api.post(
        "/api/memory/add", {"fact": "guests use the loft"}, content_type="application/json"
    )

    assert again.status_code == 200
    assert again.json()["support"] == 2
    assert Fact.objects.count() == 1


def test_a_person_who_may_only_read_may_not_add_and_is_told_why(client, alice, home):
    Membership.objects.create(memory=home, user=alice, permission=Permission.READ)
    client.force_login(alice)

    response = client.post(
        "/api/memory/add", {"fact": "Guests use the loft."}, content_type="application/json"
    )

    assert response.status_code == 403
    assert "permission to teach" in response.json()["detail"]
    assert not Fact.objects.exists()


def test_an_automation_with_a_token_may_add(client, alice, home):
    token = Token.objects.create(user=alice)

    response = client.post(
        "/api/memory/add",
        {"fact": "The dog gets fed at 7 and 17."},
        content_type="application/json",
        headers={"Authorization": f"Token {token.key}"},
    )

    assert response.status_code == 201


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"fact": ""}, "fact"),
        ({"fact": "x" * 5000}, "the limit is 1,000"),
        ({"fact": "It hums.", "subjects": ["sensor.nowhere"]}, "has no subject 'sensor.nowhere'"),
        ({"fact": "It hums.", "verdict": "contradiction"}, "needs the id of the fact"),
        ({"fact": "It hums.", "verdict": "contradiction", "target": 99999}, "not a live fact"),
        ({"fact": "The door code is 1234"}, "brain does not keep secrets"),
    ],
)
def test_bad_input_to_add_is_a_400_naming_the_problem(api, home, body, message):
    response = api.post("/api/memory/add", body, content_type="application/json")

    assert response.status_code == 400
    assert message in str(response.json())
    assert not Fact.objects.exists()


def test_the_list_searches_by_a_devices_nickname_and_filters_and_sorts(api, home, office_lamp):
    lamp = _teach(home, "The office lamp flickers when the heater runs.")
    other = _teach(home, "The kettle is descaled monthly.", origin="voice")
    other_certain = Fact.objects.filter(pk=other.pk)
    other_certain.update(confidence=0.9)

    by_nickname = api.get("/api/facts/", {"q": "beacon"}).json()["results"]
    by_channel = api.get("/api/facts/", {"channel": "voice"}).json()["results"]
    certain = api.get("/api/facts/", {"sort": "certain"}).json()["results"]
    devices = api.get("/api/facts/", {"subject_kind": "device"}).json()["results"]

    assert [f["id"] for f in by_nickname] == [lamp.pk]
    assert by_nickname[0]["subjects"][0]["entity_id"] == "light.office_lamp"
    assert [f["id"] for f in by_channel] == [other.pk]
    assert [f["id"] for f in certain] == [other.pk, lamp.pk]
    assert [f["id"] for f in devices] == [lamp.pk]


def test_the_list_pages_with_a_cursor_in_a_bounded_number_of_queries(api, home, office_lamp):
    for text in (
        "The office lamp uses a warm bulb.",
        "Sarah reads in the office lamp light.",
        "The office lamp is dimmed at dusk.",
        "The beacon stays off in summer.",
        "Dust gathers on the office lamp shade.",
        "The office lamp cord is frayed.",
        "The office lamp was bought in Lyon.",
    ):
        _teach(home, text)

    with CaptureQueriesContext(connection) as queries:
        first = api.get("/api/facts/", {"page_size": 3}).json()
    second = api.get(first["next"]).json()

    assert len(first["results"]) == 3 and len(second["results"]) == 3
    assert not {f["id"] for f in first["results"]} & {f["id"] for f in second["results"]}
    assert len(queries) <= 6  # session, user, memory, page, subjects: not one per fact


def test_as_of_answers_what_was_believed_then(api, home):
    old = _teach(home, "The thermostat is set to 19 degrees.")
    _teach(home, "The thermostat is set to 21 degrees.")
    old.refresh_from_db()

    then = api.get("/api/facts/", {"as_of": old.created_at.isoformat()}).json()["results"]
    now = api.get("/api/facts/").json()["results"]

    assert [f["text"] for f in then] == ["The thermostat is set to 19 degrees."]
    assert [f["text"] for f in now] == ["The thermostat is set to 21 degrees."]


@pytest.mark.parametrize(
    "params",
    [{"sort": "random"}, {"status": "maybe"}, {"subject": "light.nowhere"}, {"as_of": "yesterday"}],
)
def test_a_bad_filter_is_a_400_naming_it(api, home, params):
    response = api.get("/api/facts/", params)

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert next(iter(params)) in detail or "no subject" in detail


def test_explain_outcome_and_forget(api, home):
    fact = _teach(home, "Rebooting the hub fixes the Zigbee dropouts.")

    story = api.get(f"/api/facts/{fact.pk}/").json()
    outcome = api.post(
        f"/api/facts/{fact.pk}/outcome", {"success": True}, content_type="application/json"
    ).json()
    forgotten = api.post(f"/api/memory/facts/{fact.pk}/forget").json()

    assert story["text"] == fact.text and story["believed"] is True
    assert outcome["successes"] == 1 and outcome["confidence"] > 0.6
    assert forgotten["detail"].startswith("Forgotten")
    assert api.get(f"/api/facts/{fact.pk}/").json()["believed"] is False
    assert api.get("/api/facts/999999/").status_code == 404


def test_context_over_http_and_its_bad_budgets(api, home):
    fact = _teach(home, "The hall light is warm white.")

    block = api.post(
        "/api/context",
        {"question": "hall light", "token_budget": 300},
        content_type="application/json",
    ).json()
    too_small = api.post(
        "/api/context", {"question": "hall", "token_budget": 0}, content_type="application/json"
    )
    too_big = api.post(
        "/api/context", {"question": "hall", "token_budget": 10**9}, content_type="application/json"
    )

    assert block["fact_ids"] == [fact.pk]
    assert f"[{fact.pk}] The hall light is warm white." in block["text"]
    assert too_small.status_code == 400 and too_big.status_code == 400
    assert "token_budget must be between" in too_small.json()["detail"]


def test_strangers_get_a_4xx_never_a_500(client, home):
    assert client.get("/api/facts/").status_code in (401, 403)
    assert client.post("/api/memory/add", {"fact": "x"}).status_code in (401, 403)
