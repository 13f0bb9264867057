"""Findings, rules, guesses, the sensors and the timeline over HTTP at /api/: answers, refusals
(4xx naming the problem, never a 500) and what each one changes."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from knowledge.models import Fact, Membership, Memory, Permission, Subject
from memory import actions as memory_actions
from memory.models import InboxItem, Origin
from memory.taught import Statement
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import Event, Finding, Guess, Rule

HALL = "binary_sensor.hall_motion"
FRIDGE = "The garage fridge is meant to run 24/7"


@pytest.fixture
def hallway(home) -> Subject:
    return Subject.objects.create(memory=home, kind=Subject.Kind.ROOM, name="Hallway")


@pytest.fixture
def hall_motion(home, hallway) -> Subject:
    return Subject.objects.create(
        memory=home, kind=Subject.Kind.DEVICE, name="Hall motion", entity_id=HALL, room=hallway
    )


@pytest.fixture
def api(client, alice, home):
    """Alice, whom the administrator lets curate this memory (set rules, mark findings)."""
    Membership.objects.create(memory=home, user=alice, permission=Permission.CURATE)
    client.force_login(alice)
    return client


def _post(api, path: str, data: dict | None = None):
    return api.post(f"/api/{path}", data or {}, content_type="application/json")


def _raise(home, check="night_motion", entity_id=HALL, severity="low", text=None) -> Finding:
    raised = review_findings.raise_finding(
        memory=home,
        check_id=check,
        entity_id=entity_id,
        severity=severity,
        text=text or f"{check} on {entity_id or 'the house'}",
    )
    assert raised.finding is not None, raised.message
    return raised.finding


def _guess(home, text=FRIDGE) -> Guess:
    proposed = review_guesses.propose_guess(memory=home, text=text)
    assert proposed.guess is not None, proposed.message
    return proposed.guess


# Who may call it ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "findings/"),
        ("post", "findings/"),
        ("post", "findings/1/not-a-problem"),
        ("post", "findings/1/fixed"),
        ("get", "rules/"),
        ("delete", "rules/1"),
        ("get", "guesses/"),
        ("post", "guesses/1/answer"),
        ("post", "guesses/1/dismiss"),
        ("get", "status/"),
        ("get", "timeline/"),
    ],
)
def test_someone_not_signed_in_is_refused_everywhere(client, home, method, path):
    data = {"check": "leak", "severity": "high", "text": "Water under the sink"}
    response = getattr(client, method)(f"/api/{path}", data, content_type="application/json")

    assert response.status_code in (401, 403)
    assert not Finding.objects.exists()


def test_an_automation_raises_a_finding_with_its_api_token(client, alice, home):
    token = Token.objects.create(user=alice)

    response = client.post(
        "/api/findings/",
        {"check": "battery_low", "severity": "medium", "text": "The porch sensor is at 8%"},
        content_type="application/json",
        headers={"Authorization": f"Token {token.key}"},
    )

    assert response.status_code == 201
    assert Finding.objects.get().text == "The porch sensor is at 8%"


# Raising a finding ----------------------------------------------------------------------------


def test_a_new_finding_answers_201_with_the_finding(api, home, hall_motion):
    response = _post(
        api,
        "findings/",
        {
            "check": "night_motion",
            "entity_id": HALL,
            "severity": "low",
            "text": "Motion on the hall landing at 3am",
            "todo": True,
        },
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["outcome"], body["detail"]) == ("new", "Raised.")
    finding = body["finding"]
    assert finding["id"] == Finding.objects.get().pk
    assert (finding["check"], finding["entity_id"], finding["subject"]) == (
        "night_motion",
        HALL,
        "Hall motion",
    )
    assert (finding["severity"], finding["state"], finding["times_raised"]) == ("low", "open", 1)
    assert (finding["todo"], finding["protected"]) == (True, False)


def test_a_finding_already_open_answers_200_and_is_counted_not_repeated(api, home, hall_motion):
    finding = _raise(home)

    response = _post(
        api,
        "findings/",
        {"check": "night_motion", "entity_id": HALL, "severity": "low", "text": "Again at 4am"},
    )

    assert response.status_code == 200
    assert response.json()["outcome"] == "again"
    assert response.json()["detail"] == "Already waiting on you (raised 2 times)."
    assert response.json()["finding"]["id"] == finding.pk
    assert Finding.objects.count() == 1


def test_a_fixed_finding_that_comes_back_answers_200_saying_how_long_it_stayed_away(
    api, home, hall_motion
):
    finding = _raise(home, check="offline", text="The hall sensor is offline")
    review_findings.mark_fixed(finding=finding)
    Finding.objects.filter(pk=finding.pk).update(settled_at=timezone.now() - timedelta(days=12))

    response = _post(
        api,
        "findings/",
        {"check": "offline", "entity_id": HALL, "severity": "medium", "text": "Offline again"},
    )

    assert response.status_code == 200
    assert response.json()["outcome"] == "returned"
    assert response.json()["detail"] == "Raised again: back after 12 days."
    assert response.json()["finding"]["state"] == "open"


def test_a_finding_a_rule_keeps_quiet_answers_200_naming_the_rule(api, home, hall_motion):
    rule = review_findings.not_a_problem(finding=_raise(home), reason="it's the cat")

    response = _post(
        api,
        "findings/",
        {"check": "night_motion", "entity_id": HALL, "severity": "low", "text": "Motion again"},
    )

    assert response.status_code == 200
    body = response.json()
    assert body["outcome"] == "quiet"
    assert body["detail"].startswith(f"Not raised: rule #{rule.pk} ")
    assert body["finding"] is None
    assert Finding.objects.open().count() == 0


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"check": "x", "severity": "urgent", "text": "Hot"}, "severity"),
        ({"check": "x", "severity": "high", "text": ""}, "text"),
        ({"check": "x", "severity": "high", "text": "   "}, "text"),
        ({"check": "x", "severity": "high", "text": "y" * 1001}, "text"),
        ({"severity": "high", "text": "Hot"}, "check"),
        ({"check": "x", "text": "Hot"}, "severity"),
        ({"check": "x", "severity": "high", "text": "Hot", "protected": "maybe"}, "protected"),
    ],
)
def test_a_bad_finding_answers_400_naming_the_field(api, home, data, named):
    response = _post(api, "findings/", data)

    assert response.status_code == 400
    assert named in response.json()
    assert not Finding.objects.exists()


def test_a_finding_about_an_unknown_entity_answers_400_naming_it(api, home):
    response = _post(
        api,
        "findings/",
        {"check": "offline", "entity_id": "sensor.nowhere", "severity": "low", "text": "Gone"},
    )

    assert response.status_code == 400
    assert "'sensor.nowhere'" in response.json()["detail"]
    assert not Finding.objects.exists()


def test_a_body_that_is_not_json_answers_4xx(api, home):
    response = api.post("/api/findings/", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert not Finding.objects.exists()


def test_open_findings_are_listed_high_stakes_first_and_settled_ones_not_at_all(
    api, home, hall_motion, django_assert_max_num_queries
):
    low = _raise(home, check="night_motion", severity="low")
    high = _raise(home, check="leak", entity_id="", severity="high", text="Water by the boiler")
    medium = _raise(home, check="battery_low", severity="medium")
    review_findings.mark_fixed(finding=_raise(home, check="offline", severity="high"))

    with django_assert_max_num_queries(5):
        response = api.get("/api/findings/")

    assert response.status_code == 200
    assert [f["id"] for f in response.json()] == [high.pk, medium.pk, low.pk]
    assert response.json()[0]["protected"] is True  # a leak is never made quieter


def test_an_unknown_memory_answers_404(api, home):
    assert api.get("/api/findings/?memory=nowhere").status_code == 404


# Not a problem, fixed, and the rules ----------------------------------------------------------


def test_not_a_problem_answers_201_with_the_rule_it_made(api, home, hall_motion, alice):
    finding = _raise(home)

    response = _post(api, f"findings/{finding.pk}/not-a-problem", {"reason": "It's the cat"})

    assert response.status_code == 201
    body = response.json()
    rule = Rule.objects.get()
    assert body["id"] == rule.pk
    assert (body["check"], body["scope"], body["entity_id"], body["reason"]) == (
        "night_motion",
        "sensor",
        HALL,
        "It's the cat",
    )
    assert body["until"] is None
    assert body["description"] == "Not raised: “night_motion” on Hall motion"
    assert rule.created_by == alice
    finding.refresh_from_db()
    assert (finding.state, finding.settled_by) == ("not_a_problem", alice)


def test_a_rule_for_a_month_or_until_a_date_lasts_that_long(api, home, hall_motion):
    month = _post(api, f"findings/{_raise(home).pk}/not-a-problem", {"until": "month"})
    dated = _post(
        api,
        f"findings/{_raise(home, check='offline').pk}/not-a-problem",
        {"until": (timezone.localdate() + timedelta(days=40)).isoformat()},
    )

    assert (month.status_code, dated.status_code) == (201, 201)
    in_a_month = Rule.objects.get(pk=month.json()["id"]).until - timezone.now()
    assert timedelta(days=29) < in_a_month <= timedelta(days=30)
    until = timezone.localtime(Rule.objects.get(pk=dated.json()["id"]).until)
    assert until.date() == timezone.localdate() + timedelta(days=40)


def test_a_wide_rule_without_confirmation_answers_409_saying_it_must_be_confirmed(
    api, home, hall_motion
):
    finding = _raise(home)

    response = _post(api, f"findings/{finding.pk}/not-a-problem", {"scope": "everywhere"})

    assert response.status_code == 409
    assert "confirm" in response.json()["detail"]
    assert not Rule.objects.exists()
    finding.refresh_from_db()
    assert finding.state == "open"

    confirmed = _post(
        api, f"findings/{finding.pk}/not-a-problem", {"scope": "room", "confirm": True}
    )

    assert confirmed.status_code == 201
    assert confirmed.json()["room"] == "Hallway"


def test_a_leak_is_never_silenced_beyond_one_sensor(api, home, hall_motion):
    finding = _raise(home, check="leak", severity="high", text="Water on the floor")

    response = _post(
        api, f"findings/{finding.pk}/not-a-problem", {"scope": "device", "confirm": True}
    )

    assert response.status_code == 409
    assert "never silenced" in response.json()["detail"]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"scope": "street"}, "scope"),
        ({"until": "next tuesday"}, "until"),
        ({"until": "2030-13-45"}, "until"),
        ({"reason": "x" * 301}, "reason"),
    ],
)
def test_a_bad_not_a_problem_answers_400_naming_the_field(api, home, hall_motion, data, named):
    finding = _raise(home)

    response = _post(api, f"findings/{finding.pk}/not-a-problem", data)

    assert response.status_code == 400
    assert named in response.json()
    assert not Rule.objects.exists()


def test_a_rule_until_a_day_already_past_answers_400(api, home, hall_motion):
    finding = _raise(home)

    response = _post(api, f"findings/{finding.pk}/not-a-problem", {"until": "2020-01-01"})

    assert response.status_code == 400
    assert response.json()["detail"] == "until must be in the future."


def test_settling_a_finding_twice_answers_409_and_an_unknown_one_404(api, home, hall_motion):
    finding = _raise(home)
    assert _post(api, f"findings/{finding.pk}/fixed", {"how": "got_it"}).status_code == 200

    again = _post(api, f"findings/{finding.pk}/not-a-problem")

    assert again.status_code == 409
    assert "already settled" in again.json()["detail"]
    assert _post(api, "findings/999999/fixed").status_code == 404
    assert _post(api, "findings/999999/not-a-problem").status_code == 404


def test_fixed_answers_200_and_keeps_it_quiet_only_while_it_stays_fixed(api, home, hall_motion):
    finding = _raise(home, check="offline")

    response = _post(api, f"findings/{finding.pk}/fixed", {"how": "done"})

    assert response.status_code == 200
    assert (response.json()["state"], response.json()["settled_how"]) == ("suppressed", "done")
    assert response.json()["suppressed_until"] is not None
    assert _post(api, f"findings/{finding.pk}/fixed", {"how": "mended"}).status_code == 400


def test_rules_are_listed_and_deleting_one_lets_brain_raise_it_again(api, home, hall_motion):
    kept = review_findings.not_a_problem(finding=_raise(home, check="offline"))
    rule = review_findings.not_a_problem(finding=_raise(home))

    listed = api.get("/api/rules/")
    assert [r["id"] for r in listed.json()] == [rule.pk, kept.pk]

    response = api.delete(f"/api/rules/{rule.pk}")

    assert response.status_code == 204
    assert [r["id"] for r in api.get("/api/rules/").json()] == [kept.pk]
    assert Finding.objects.get(pk=rule.finding_id).state == "lapsed"
    assert (
        review_findings.raise_finding(
            memory=home, check_id="night_motion", entity_id=HALL, severity="low", text="Motion"
        ).outcome
        == "new"
    )
    assert api.delete(f"/api/rules/{rule.pk}").status_code == 409
    assert api.delete("/api/rules/999999").status_code == 404


# Guesses --------------------------------------------------------------------------------------


def test_open_guesses_are_listed_as_questions(api, home):
    guess = _guess(home)

    response = api.get("/api/guesses/")

    assert response.status_code == 200
    assert [(g["id"], g["question"]) for g in response.json()] == [(guess.pk, f"{FRIDGE} — right?")]


def test_a_yes_is_filed_as_known(api, home, alice):
    guess = _guess(home)

    response = _post(api, f"guesses/{guess.pk}/answer", {"answer": "Yes"})

    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["detail"]) == ("confirmed", "Filed as known.")
    fact = Fact.objects.get(pk=body["fact"])
    assert fact.text == FRIDGE
    guess.refresh_from_db()
    assert guess.answered_by == alice
    assert api.get("/api/guesses/").json() == []


def test_a_no_closes_the_guess_and_keeps_the_reason_as_a_correction(api, home):
    guess = _guess(home)

    response = _post(api, f"guesses/{guess.pk}/answer", {"answer": "no, it's the cat"})

    assert response.status_code == 200
    assert response.json()["state"] == "rejected"
    assert response.json()["detail"] == (
        "Noted: brain won't ask that again. Your reason is kept as a correction."
    )
    assert InboxItem.objects.get(text="it's the cat").origin == Origin.CORRECTION
    assert not Fact.objects.filter(text=FRIDGE).exists()


@pytest.mark.parametrize(
    "answer", ["maybe", "", "   ", "it's the cat", "Not sure", "normally, yes", "yesterday"]
)
def test_an_answer_starting_with_neither_yes_nor_no_answers_400(api, home, answer):
    guess = _guess(home)

    response = _post(api, f"guesses/{guess.pk}/answer", {"answer": answer})

    assert response.status_code == 400
    assert response.json()["detail"] == "Start the answer with yes or no."
    guess.refresh_from_db()
    assert guess.state == "open"


def test_an_answer_missing_altogether_answers_400_naming_it(api, home):
    response = _post(api, f"guesses/{_guess(home).pk}/answer", {})

    assert response.status_code == 400
    assert "answer" in response.json()


def test_answering_an_answered_guess_answers_409_naming_who_answered(api, home, admin_user):
    guess = _guess(home)
    review_guesses.answer_guess(guess=guess, answer="yes", by=admin_user)

    response = _post(api, f"guesses/{guess.pk}/answer", {"answer": "no"})

    assert response.status_code == 409
    assert response.json()["detail"] == "That guess was already confirmed by ada."


def test_an_unknown_guess_answers_404(api, home):
    assert _post(api, "guesses/999999/answer", {"answer": "yes"}).status_code == 404
    assert _post(api, "guesses/999999/dismiss").status_code == 404


def test_a_dismissed_guess_leaves_the_list_and_cannot_be_dismissed_twice(api, home):
    guess = _guess(home)

    response = _post(api, f"guesses/{guess.pk}/dismiss")

    assert response.status_code == 200
    assert api.get("/api/guesses/").json() == []
    again = _post(api, f"guesses/{guess.pk}/dismiss")
    assert again.status_code == 409
    assert "not open" in again.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_two_people_answering_the_same_guess_at_once_get_one_200_and_one_409(alice, admin_user):
    home = Memory.objects.default()
    guess = _guess(home)
    clients = []
    for user in (alice, admin_user):
        client = Client()
        client.force_login(user)
        clients.append(client)
    barrier = threading.Barrier(2)
    responses, errors = {}, []

    def answer(client: Client, who: str) -> None:
        try:
            barrier.wait()
            responses[who] = _post(client, f"guesses/{guess.pk}/answer", {"answer": "yes"})
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=answer, args=(client, who))
        for client, who in zip(clients, ("alice", "ada"), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    codes = {who: response.status_code for who, response in responses.items()}
    assert sorted(codes.values()) == [200, 409]
    winner = next(who for who, code in codes.items() if code == 200)
    loser = next(who for who, code in codes.items() if code == 409)
    assert responses[loser].json()["detail"] == f"That guess was already confirmed by {winner}."
    fact = Fact.objects.get(text=FRIDGE)
    assert fact.support == 1
    guess.refresh_from_db()
    assert (guess.state, guess.answered_by.username, guess.fact_id) == (
        "confirmed",
        winner,
        fact.pk,
    )


# The sensors and the timeline -----------------------------------------------------------------


def test_the_status_shows_the_four_sensors_after_a_few_actions(
    api, home, hall_motion, django_capture_on_commit_callbacks
):
    assert api.get("/api/status/").json()["memory_waiting_on_you"]["state"] == "off"
    with django_capture_on_commit_callbacks(execute=True):
        memory_actions.learn(
            Statement.typed(memory=home, text="Guests use the loft", origin=Origin.TYPED)
        )
    leak = _raise(home, check="leak", entity_id="", severity="high", text="Water by the boiler")
    _raise(home, check="night_motion", severity="low", text="Motion at 3am")
    review_findings.mark_fixed(finding=_raise(home, check="offline", severity="medium"))
    guess = _guess(home)

    sensors = api.get("/api/status/").json()

    assert set(sensors) == {
        "memory_waiting_on_you",
        "memory_facts_learned",
        "memory_last_learned",
        "findings_open_findings",
    }
    assert sensors["memory_waiting_on_you"] == {
        "state": "on",
        "attributes": {"guesses": [{"id": guess.pk, "question": f"{FRIDGE} — right?"}]},
    }
    assert sensors["memory_facts_learned"]["state"] == 1
    assert sensors["memory_last_learned"]["attributes"]["text"] == "Guests use the loft"
    open_findings = sensors["findings_open_findings"]
    assert open_findings["state"] == 2
    assert open_findings["attributes"]["severity"] == {"high": 1, "medium": 0, "low": 1}
    assert open_findings["attributes"]["findings"][0] == {
        "id": leak.pk,
        "severity": "high",
        "text": "Water by the boiler",
    }

    with django_capture_on_commit_callbacks(execute=True):
        _post(api, f"guesses/{guess.pk}/answer", {"answer": "yes"})
    sensors = api.get("/api/status/").json()

    assert sensors["memory_waiting_on_you"] == {"state": "off", "attributes": {"guesses": []}}
    assert sensors["memory_facts_learned"]["state"] == 2
    assert sensors["memory_last_learned"]["attributes"]["text"] == FRIDGE


def test_the_timeline_is_newest_first_one_page_at_a_time(
    api, home, hall_motion, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory_actions.learn(
            Statement.typed(memory=home, text="Guests use the loft", origin=Origin.TYPED)
        )
    _raise(home, check="night_motion", text="Motion at 3am")
    _raise(home, check="offline", text="The hall sensor is offline")
    expected = list(Event.objects.order_by("-created_at", "-pk").values_list("text", flat=True))
    assert expected == [
        "The hall sensor is offline",
        "Motion at 3am",
        "brain learned: Guests use the loft",
    ]

    first = api.get("/api/timeline/?page_size=2").json()
    second = api.get(first["next"]).json()

    assert [e["text"] for e in first["results"] + second["results"]] == expected
    assert [e["kind"] for e in first["results"]] == ["brain_finding", "brain_finding"]
    assert second["next"] is None
    assert second["results"][0]["data"]["fact"] == Fact.objects.get().pk
