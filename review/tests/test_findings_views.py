"""The Findings tab over plain requests and htmx requests (the browser tests click it)."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from knowledge.models import Fact, Subject
from review import findings as review_findings
from review import guesses as review_guesses
from review.models import Event, Finding, Guess, Rule

HTMX = {"HX-Request": "true"}
FRIDGE = "The garage fridge is meant to run 24/7"


@pytest.fixture
def landing(home) -> Subject:
    hall = Subject.objects.create(memory=home, kind="room", name="Hall")
    return Subject.objects.create(
        memory=home,
        kind="device",
        name="Landing motion",
        entity_id="binary_sensor.landing_motion",
        room=hall,
    )


def _raise(home, text, severity="medium", check="motion-at-night", entity="", **kwargs) -> Finding:
    raised = review_findings.raise_finding(
        memory=home, check_id=check, text=text, severity=severity, entity_id=entity, **kwargs
    )
    assert raised.finding is not None, raised.message
    return raised.finding


def _guess(home, text=FRIDGE) -> Guess:
    proposed = review_guesses.propose_guess(memory=home, text=text)
    assert proposed.guess is not None, proposed.message
    return proposed.guess


def _events(response) -> dict:
    return json.loads(response.headers.get("HX-Trigger", "{}"))


def _toast(response) -> dict:
    return _events(response).get("showToast", {})


def _page(client) -> str:
    return client.get(reverse("review:findings")).content.decode()


def _post(client, name, pk, data=None, htmx=True):
    return client.post(reverse(name, args=[pk]), data or {}, headers=HTMX if htmx else {})


# The list ------------------------------------------------------------------------------------


def test_the_list_puts_high_stakes_first_then_the_guesses_then_the_rest(signed_in, home):
    _raise(home, "The hall light was left on all night", "low", check="light-left-on")
    _raise(home, "The landing sensor battery is at 12%", "medium", check="battery-low")
    _raise(home, "The kitchen door was open for 3 hours", "high", check="door-open")
    _guess(home)

    page = _page(signed_in)

    order = [
        page.index("The kitchen door was open for 3 hours"),
        page.index(f"{FRIDGE} — right?"),
        page.index("The landing sensor battery is at 12%"),
        page.index("The hall light was left on all night"),
    ]
    assert order == sorted(order)
    assert "4</strong> waiting on you" in page
    assert reverse("review:timeline") in page


def test_a_finding_shows_its_subject_severity_first_raise_times_raised_and_its_return(
    signed_in, home, landing
):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    review_findings.mark_fixed(finding=finding)
    Finding.objects.filter(pk=finding.pk).update(settled_at=timezone.now() - timedelta(days=12))
    _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)

    page = _page(signed_in)

    assert "Landing motion" in page
    assert "Medium" in page
    assert "first raised" in page
    assert "raised 3 times" in page
    assert "back after 12 days" in page


def test_a_protected_finding_is_marked_and_offers_only_this_sensor(signed_in, home, landing):
    _raise(home, "Water under the sink", "high", check="leak", entity=landing.entity_id)

    page = _page(signed_in)

    assert ">always raised</span>" in page and ">protected<" not in page
    assert 'value="sensor"' in page
    assert 'value="device"' not in page
    assert 'value="everywhere"' not in page


def test_the_room_scope_is_offered_only_for_something_in_a_known_room(signed_in, home, landing):
    _raise(home, "Motion at night", entity=landing.entity_id)
    assert 'value="room"' in _page(signed_in)

    Finding.objects.all().delete()
    _raise(home, "Something odd")
    assert 'value="room"' not in _page(signed_in)


def test_the_page_costs_the_same_number_of_queries_for_3_or_30_findings(
    signed_in, home, landing, django_assert_max_num_queries
):
    def fill(start, count):
        for n in range(start, start + count):
            _raise(home, f"Problem {n}", ["high", "medium", "low"][n % 3], check=f"check-{n}")
            if n % 2:
                _raise(home, f"On the landing {n}", check=f"landing-{n}", entity=landing.entity_id)

    fill(0, 3)
    _guess(home)
    rule_finding = _raise(home, "Motion", check="motion", entity=landing.entity_id)
    review_findings.not_a_problem(finding=rule_finding, reason="The cat")
    with django_assert_max_num_queries(10) as small:
        signed_in.get(reverse("review:findings"))
    fill(3, 27)
    _guess(home, "Sarah is a light sleeper")
    with django_assert_max_num_queries(len(small.captured_queries)):
        response = signed_in.get(reverse("review:findings"))
    assert response.content.decode().count('data-kind="finding"') == 30 + 15


def test_someone_signed_out_is_sent_to_sign_in(client, home):
    response = client.get(reverse("review:findings"))

    assert response.status_code == 302
    assert "/login/" in response["Location"]


# Not a problem ---------------------------------------------------------------------------------


def test_not_a_problem_with_htmx_makes_a_rule_and_the_card_leaves(signed_in, home, landing):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    other = _raise(home, "The kitchen door was open", check="door-open")

    response = _post(
        signed_in, "review:not-a-problem", finding.pk, {"reason": "It's the cat", "scope": "sensor"}
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert f'id="finding-{finding.pk}"' not in body
    assert f'id="finding-{other.pk}"' in body
    assert "findingsChanged" in _events(response)
    assert _toast(response) == {
        "text": "Not a problem: brain won't raise “Movement at night” on Landing motion.",
        "level": "success",
    }
    rule = Rule.objects.get()
    assert (rule.scope, rule.reason, rule.until, rule.finding_id) == (
        "sensor",
        "It's the cat",
        None,
        finding.pk,
    )
    finding.refresh_from_db()
    assert finding.state == Finding.State.NOT_A_PROBLEM


def test_not_a_problem_without_javascript_redirects_back_with_a_message(signed_in, home, landing):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)

    response = _post(
        signed_in,
        "review:not-a-problem",
        finding.pk,
        {"scope": "device", "until": "month"},
        htmx=False,
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("review:findings")
    page = signed_in.get(response["Location"]).content.decode()
    assert "Not a problem: brain won&#x27;t raise every check on Landing motion until" in page
    rule = Rule.objects.get()
    assert rule.scope == "device"
    assert timedelta(days=29) < rule.until - timezone.now() <= timedelta(days=30)
    assert "Rules you set" in page and "every check on Landing motion" in page


@pytest.mark.parametrize("htmx", [True, False])
def test_a_wide_rule_is_asked_about_before_it_is_made(signed_in, home, landing, htmx):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    data = {"reason": "Pets", "scope": "everywhere", "until": "season"}

    asked = _post(signed_in, "review:not-a-problem", finding.pk, data, htmx=htmx)

    assert asked.status_code == 200
    body = asked.content.decode()
    assert (
        "This stops “Movement at night” being raised anywhere in the house, for a season"
        " — make this rule?"
    ) in body
    assert 'name="confirmed" value="yes"' in body
    assert "Make this rule" in body
    assert not Rule.objects.exists()
    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN

    made = _post(signed_in, "review:not-a-problem", finding.pk, {**data, "confirmed": "yes"}, htmx)

    assert made.status_code == (200 if htmx else 302)
    rule = Rule.objects.get()
    assert (rule.scope, rule.reason) == ("everywhere", "Pets")
    assert timedelta(days=90) < rule.until - timezone.now() <= timedelta(days=91)


def test_the_room_question_names_the_room(signed_in, home, landing):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)

    asked = _post(signed_in, "review:not-a-problem", finding.pk, {"scope": "room"})

    assert "being raised anywhere in Hall, for good — make this rule?" in asked.content.decode()
    _post(signed_in, "review:not-a-problem", finding.pk, {"scope": "room", "confirmed": "yes"})
    assert Rule.objects.get().room == landing.room


def test_cancel_on_the_question_brings_the_card_back_as_it_was(signed_in, home):
    finding = _raise(home, "Motion on the landing at 3am")

    response = signed_in.get(reverse("review:findings"), headers=HTMX)

    body = response.content.decode()
    assert body.lstrip().startswith('<div id="findings-list">')
    assert f'id="finding-{finding.pk}"' in body
    assert "make this rule?" not in body


def test_until_a_date_lasts_until_that_day_begins(signed_in, home):
    finding = _raise(home, "Motion on the landing at 3am")
    day = timezone.localdate() + timedelta(days=20)

    _post(
        signed_in,
        "review:not-a-problem",
        finding.pk,
        {"until": "date", "until_date": day.isoformat()},
    )

    until = timezone.localtime(Rule.objects.get().until)
    assert (until.date(), until.hour, until.minute) == (day, 0, 0)


@pytest.mark.parametrize("day", ["", "not a date", "2020-01-01"])
@pytest.mark.parametrize("htmx", [True, False])
def test_a_date_that_is_missing_or_past_comes_back_with_the_reason_kept(signed_in, home, day, htmx):
    finding = _raise(home, "Motion on the landing at 3am")

    response = _post(
        signed_in,
        "review:not-a-problem",
        finding.pk,
        {"reason": "The cat again", "until": "date", "until_date": day},
        htmx=htmx,
    )

    assert response.status_code == 200
    body = response.content.decode()
    assert "Pick the date the rule should last until." in body or "Pick a date after today." in body
    assert 'value="The cat again"' in body
    assert not Rule.objects.exists()


@pytest.mark.parametrize("scope", ["device", "room", "everywhere"])
def test_a_protected_finding_is_never_silenced_beyond_its_sensor(signed_in, home, landing, scope):
    finding = _raise(home, "Water under the sink", "high", check="leak", entity=landing.entity_id)

    response = _post(
        signed_in, "review:not-a-problem", finding.pk, {"scope": scope, "confirmed": "yes"}
    )

    assert response.status_code == 200
    assert "never silenced beyond one sensor" in response.content.decode()
    assert _toast(response)["level"] == "error"
    assert not Rule.objects.exists()
    finding.refresh_from_db()
    assert finding.state == Finding.State.OPEN


def test_a_protected_finding_can_be_not_a_problem_on_its_own_sensor(signed_in, home, landing):
    finding = _raise(home, "Water under the sink", "high", check="leak", entity=landing.entity_id)

    _post(signed_in, "review:not-a-problem", finding.pk, {"scope": "sensor", "reason": "A test"})

    assert Rule.objects.get().scope == "sensor"


def test_not_a_problem_on_a_house_wide_finding_keeps_it_quiet_on_the_next_pass(signed_in, home):
    # A finding about no device once made a rule that covered nothing: it came back every pass.
    finding = _raise(home, "Descale the kettle", "low", check="descale", is_todo=True)

    _post(signed_in, "review:not-a-problem", finding.pk, {"scope": "sensor"})

    again = review_findings.raise_finding(
        memory=home, check_id="descale", text="Descale the kettle", severity="low"
    )
    assert again.outcome == "quiet"
    assert "0</strong> waiting on you" in _page(signed_in)


# Fixed, got it, done ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "note"),
    [
        ("fixed", "Marked fixed: “The fridge door is open” is quiet while it stays fixed."),
        ("got_it", "Got it: “The fridge door is open” is quiet while it stays fixed."),
        ("done", "Done: “The fridge door is open”."),
    ],
)
def test_fixed_got_it_and_done_settle_the_finding_while_it_stays_fixed(signed_in, home, how, note):
    finding = _raise(home, "The fridge door is open", is_todo=how == "done")

    response = _post(signed_in, "review:mark-fixed", finding.pk, {"how": how})

    assert response.status_code == 200
    assert f'id="finding-{finding.pk}"' not in response.content.decode()
    assert _toast(response) == {"text": note, "level": "success"}
    assert "findingsChanged" in _events(response)
    finding.refresh_from_db()
    assert (finding.state, finding.settled_how) == (Finding.State.SUPPRESSED, how)
    assert not Rule.objects.exists()


def test_a_to_do_offers_done_and_a_problem_offers_fixed_and_got_it(signed_in, home):
    _raise(home, "Replace the smoke alarm battery", check="todo-battery", is_todo=True)
    page = _page(signed_in)
    assert 'value="done"' in page and 'value="fixed"' not in page

    Finding.objects.all().delete()
    _raise(home, "The fridge door is open")
    page = _page(signed_in)
    assert 'value="fixed"' in page and 'value="got_it"' in page and 'value="done"' not in page


def test_fixed_without_javascript_redirects_back_with_a_message(signed_in, home):
    finding = _raise(home, "The fridge door is open")

    response = _post(signed_in, "review:mark-fixed", finding.pk, {"how": "fixed"}, htmx=False)

    assert response.status_code == 302
    page = signed_in.get(response["Location"]).content.decode()
    assert "Marked fixed: “The fridge door is open”" in page
    assert "0</strong> waiting on you" in page


def test_settling_a_finding_someone_already_settled_says_so_and_changes_nothing(signed_in, home):
    finding = _raise(home, "The fridge door is open")
    review_findings.mark_fixed(finding=finding, how="got_it")

    fixed = _post(signed_in, "review:mark-fixed", finding.pk, {"how": "fixed"})
    wrong = _post(signed_in, "review:not-a-problem", finding.pk, {"scope": "sensor"})

    for response in (fixed, wrong):
        assert response.status_code == 200
        assert _toast(response)["level"] == "error"
        assert "already settled" in _toast(response)["text"]
        assert f'id="finding-{finding.pk}"' not in response.content.decode()
    finding.refresh_from_db()
    assert finding.settled_how == "got_it"
    assert not Rule.objects.exists()


# Guesses -------------------------------------------------------------------------------------


def test_yes_files_the_guess_as_a_memory_line(signed_in, home):
    guess = _guess(home)

    response = _post(signed_in, "review:answer-guess", guess.pk, {"answer": "yes"})

    assert response.status_code == 200
    assert f'id="guess-{guess.pk}"' not in response.content.decode()
    assert _toast(response) == {"text": f"“{FRIDGE}”: Filed as known.", "level": "success"}
    guess.refresh_from_db()
    assert guess.state == Guess.State.CONFIRMED
    assert Fact.objects.filter(text__startswith=FRIDGE).count() == 1


def test_no_with_a_reason_without_javascript_keeps_the_reason_as_a_correction(signed_in, home):
    guess = _guess(home)

    response = _post(
        signed_in,
        "review:answer-guess",
        guess.pk,
        {"answer": "no", "reason": "It is switched off in winter"},
        htmx=False,
    )

    assert response.status_code == 302
    page = signed_in.get(response["Location"]).content.decode()
    assert "won&#x27;t ask that again. Your reason is kept as a correction." in page
    guess.refresh_from_db()
    assert (guess.state, guess.reason) == (Guess.State.REJECTED, "It is switched off in winter")
    assert Fact.objects.filter(text__startswith="It is switched off in winter").exists()


def test_dismiss_puts_the_guess_to_sleep_and_a_waiting_one_takes_its_place(signed_in, home):
    first = _guess(home)
    _guess(home, "The loft is used by guests")
    _guess(home, "Sarah is a light sleeper")
    waiting = _guess(home, "The dog is fed at 7 and 17")
    assert waiting.state == Guess.State.WAITING

    response = _post(signed_in, "review:dismiss-guess", first.pk)

    body = response.content.decode()
    assert f'id="guess-{first.pk}"' not in body
    assert f'id="guess-{waiting.pk}"' in body
    assert _toast(response)["text"].startswith("Dismissed for now")
    first.refresh_from_db()
    assert first.state == Guess.State.SLEEPING


def test_the_second_of_two_people_answering_is_told_and_nothing_is_filed_twice(
    client, home, admin_user, alice
):
    guess = _guess(home)
    client.force_login(admin_user)
    _post(client, "review:answer-guess", guess.pk, {"answer": "yes"})
    client.force_login(alice)

    response = _post(client, "review:answer-guess", guess.pk, {"answer": "no", "reason": "Nope"})
    dismissed = _post(client, "review:dismiss-guess", guess.pk)

    assert response.status_code == 200
    assert _toast(response) == {
        "text": "That guess was already confirmed by ada.",
        "level": "error",
    }
    assert _toast(dismissed)["level"] == "error"
    assert Fact.objects.filter(text__startswith=FRIDGE).count() == 1
    assert not Fact.objects.filter(text__startswith="Nope").exists()
    guess.refresh_from_db()
    assert (guess.state, guess.answered_by) == (Guess.State.CONFIRMED, admin_user)


def test_a_reason_that_cannot_be_kept_comes_back_with_the_text(signed_in, home):
    guess = _guess(home)
    secret = "The alarm code is 4321"

    response = _post(signed_in, "review:answer-guess", guess.pk, {"answer": "no", "reason": secret})

    assert response.status_code == 200
    body = response.content.decode()
    assert "brain does not keep secrets" in body
    assert f'value="{secret}"' in body
    assert _toast(response)["level"] == "error"
    guess.refresh_from_db()
    assert guess.state == Guess.State.OPEN


# Rules you set -----------------------------------------------------------------------------------


def test_rules_you_set_lists_each_active_rule_with_reason_who_when_and_until(
    signed_in, home, landing, admin_user
):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    review_findings.not_a_problem(finding=finding, by=admin_user, reason="It's the cat")
    old = _raise(home, "The porch light is on", check="light-on", entity=landing.entity_id)
    older = review_findings.not_a_problem(finding=old, until="month")
    Rule.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=3))
    gone = review_findings.not_a_problem(finding=_raise(home, "Gone", check="gone"))
    review_findings.remove_rule(rule=gone)

    page = _page(signed_in)

    assert "Not raised: “Movement at night” on Landing motion" in page
    shown = page.split("<main")[1].replace('data-check="motion-at-night"', "")
    assert "motion-at-night" not in shown
    assert "“It&#x27;s the cat”" in page
    assert "ada" in page and "for good" in page
    assert "until " in page
    assert "“Gone”" not in page
    assert ">Undo</button>" in page
    assert ">Let brain raise it again</button>" in page


@pytest.mark.parametrize("htmx", [True, False])
def test_undo_removes_the_rule_so_brain_may_raise_it_again(signed_in, home, landing, htmx):
    finding = _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)
    rule = review_findings.not_a_problem(finding=finding)

    response = _post(signed_in, "review:remove-rule", rule.pk, htmx=htmx)

    rule.refresh_from_db()
    assert rule.removed_at is not None
    if htmx:
        assert f'id="rule-{rule.pk}"' not in response.content.decode()
        assert _toast(response)["text"] == (
            "Removed the rule: brain may raise “Movement at night” on Landing motion again."
        )
    else:
        assert response.status_code == 302
    assert _raise(home, "Motion on the landing at 3am", entity=landing.entity_id)


def test_the_rules_region_and_the_badge_can_be_read_on_their_own(signed_in, home):
    _raise(home, "The fridge door is open")
    _guess(home)

    badge = signed_in.get(reverse("review:badge"), headers=HTMX).content.decode()
    rules = signed_in.get(reverse("review:rules"), headers=HTMX).content.decode()

    assert 'id="badge-findings"' in badge and ">2</span>" in badge
    assert 'hx-trigger="findingsChanged from:body"' in badge
    assert 'id="rules"' in rules


def test_the_nav_badge_listens_for_findings_changing(signed_in, home):
    _raise(home, "The fridge door is open")

    page = _page(signed_in)

    assert 'id="badge-findings" hx-get="/findings/badge"' in page


def test_an_empty_badge_is_hidden(signed_in, home):
    assert " hidden>0</span>" in signed_in.get(reverse("review:badge")).content.decode()


# The timeline ----------------------------------------------------------------------------------


def test_the_timeline_shows_events_newest_first_fifty_a_page(signed_in, home):
    start = timezone.now() - timedelta(days=1)
    Event.objects.bulk_create(
        Event(
            memory=home,
            kind=Event.Kind.LEARNED if n % 2 else Event.Kind.FINDING,
            text=f"Event number {n:03d}",
            created_at=start + timedelta(minutes=n),
        )
        for n in range(60)
    )

    first = signed_in.get(reverse("review:timeline")).content.decode()
    second = signed_in.get(reverse("review:timeline"), {"page": 2}).content.decode()

    assert first.index("Event number 059") < first.index("Event number 010")
    assert first.count('class="event ') == 50
    assert "Event number 009" not in first
    assert second.count('class="event ') == 10
    assert "Event number 000" in second
    assert "Page 2 of 2" in second
    assert signed_in.get(reverse("review:timeline"), {"page": "zzz"}).status_code == 200


def test_the_timeline_shows_what_the_actions_recorded(signed_in, home):
    _raise(home, "The fridge door is open")

    page = signed_in.get(reverse("review:timeline")).content.decode()

    assert "The fridge door is open" in page and "brain_finding" in page


# Unknown ids and bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("review:not-a-problem", {"scope": "sensor"}),
        ("review:mark-fixed", {"how": "fixed"}),
        ("review:answer-guess", {"answer": "yes"}),
        ("review:dismiss-guess", {}),
        ("review:remove-rule", {}),
    ],
)
def test_an_unknown_id_is_a_404(signed_in, home, name, data):
    assert _post(signed_in, name, 999_999, data).status_code == 404


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("review:not-a-problem", {"scope": "the moon"}),
        ("review:not-a-problem", {"until": "forever"}),
        ("review:mark-fixed", {"how": "ignored"}),
        ("review:mark-fixed", {}),
        ("review:answer-guess", {"answer": "maybe"}),
        ("review:answer-guess", {}),
    ],
)
@pytest.mark.parametrize("htmx", [True, False])
def test_a_value_no_form_sends_is_a_400_and_changes_nothing(signed_in, home, name, data, htmx):
    finding = _raise(home, "The fridge door is open")
    guess = _guess(home)
    pk = guess.pk if name == "review:answer-guess" else finding.pk

    response = _post(signed_in, name, pk, data, htmx=htmx)

    assert response.status_code == 400
    if htmx:
        assert _toast(response)["level"] == "error"
    finding.refresh_from_db()
    guess.refresh_from_db()
    assert (finding.state, guess.state) == (Finding.State.OPEN, Guess.State.OPEN)


def test_actions_refuse_get_and_pages_refuse_post(signed_in, home):
    finding = _raise(home, "The fridge door is open")

    assert signed_in.get(reverse("review:mark-fixed", args=[finding.pk])).status_code == 405
    assert signed_in.post(reverse("review:findings")).status_code == 405
    assert signed_in.post(reverse("review:timeline")).status_code == 405


def test_deep_review_starts_from_the_knowledge_tab_and_reports_in_words(
    client, admin_user, django_capture_on_commit_callbacks
):
    from review import tasks
    from review.models import DeepReview

    client.force_login(admin_user)
    assert 'hx-post="/findings/deep-review"' in client.get("/knowledge/").content.decode()
    with django_capture_on_commit_callbacks():
        running = client.post("/findings/deep-review", headers={"HX-Request": "true"})
    assert "Deep review running…" in running.content.decode()
    review = DeepReview.objects.get()

    tasks.deep_review(review.pk)

    done = client.get(f"/findings/deep-review/{review.pk}", headers={"HX-Request": "true"})
    assert "Deep review of Home read" in done.content.decode()
    assert "findingsChanged" in done["HX-Trigger"]
    assert "every 2s" not in done.content.decode()
