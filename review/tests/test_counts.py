"""One count for every number (review.counts, memory.counts): House, its tiles and chart, the
Knowledge tab's measurements, the brief, the Findings tab and its badge, the status API, the
timeline and the admin show the same number for the same reader."""

from __future__ import annotations

import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from brain.tests import privacy_world
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory import actions, brief, consolidator, counts, measurements
from memory.models import Brief
from memory.taught import Statement
from review import counts as all_counts
from review import findings, guesses, status
from review.models import Event, Finding
from surfaces.house import overview

HTMX = {"HX-Request": "true"}


def _teach(home, *texts: str) -> None:
    for text in texts:
        actions.learn(Statement.typed(memory=home, text=text, origin="typed"))


def _file(home) -> None:
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    consolidator.execute(run.pk)


def _household(home) -> None:
    """Facts known, some no longer used, some waiting; findings open and closed; guesses."""
    _teach(home, "The loft is warm in summer.", "The cellar is damp in winter.")
    _file(home)
    _teach(home, "Guests sleep in the loft.", "The dog is called Biscuit.")
    forgotten = actions.learn(
        Statement.typed(memory=home, text="The shed leaks.", origin="typed")
    ).fact
    actions.forget(fact=forgotten, by=None)
    old = actions.learn(
        Statement.typed(memory=home, text="The hall light is a 9 W bulb.", origin="typed")
    ).fact
    Fact.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(weeks=5))
    for check, severity in (("water_leak", "high"), ("battery_low", "low")):
        findings.raise_finding(memory=home, check_id=check, text=f"{check}!", severity=severity)
    fixed = findings.raise_finding(
        memory=home, check_id="door_left_open", text="The door.", severity="low"
    ).finding
    findings.mark_fixed(finding=fixed, how=Finding.Settled.FIXED, by=None)
    guesses.propose_guess(memory=home, text="The office is empty on Thursdays")


def _number(page: str, name: str) -> int:
    found = re.search(rf'data-number="{name}"[^>]*>(.*?)</a>', page, flags=re.S)
    assert found, name
    return int(re.sub(r"<[^>]+>", " ", found.group(1)).split()[0].replace(",", ""))


def _measure(page: str, key: str) -> int:
    found = re.search(rf'data-measure="{key}".*?<span class="value">([\d,]+)</span>', page, re.S)
    assert found, key
    return int(found.group(1).replace(",", ""))


def test_every_surface_shows_the_same_numbers_for_the_same_reader(signed_in, home):
    _household(home)
    counted = all_counts.for_reader(home, SYSTEM)

    house = signed_in.get(reverse("home")).content.decode()
    knowledge = signed_in.get(reverse("memory:knowledge")).content.decode()
    findings_tab = signed_in.get(reverse("review:findings")).content.decode()
    badge = signed_in.get(reverse("review:badge"), headers=HTMX).content.decode()
    sensors = signed_in.get("/api/status/").json()
    said = brief.compose(home, reader=SYSTEM)
    chart = overview(home, SYSTEM).chart

    assert counted.known == 5  # the forgotten line is not known; the old one still is
    assert counted.known == _number(house, "known") == _measure(knowledge, "known")
    assert counted.known == sensors["memory_facts_learned"]["state"]
    assert counted.waiting_to_be_filed == 3
    assert (
        counted.waiting_to_be_filed == _number(house, "waiting") == _measure(knowledge, "waiting")
    )
    assert "3 lines wait to be filed" in said
    assert counted.learned_this_week == _number(house, "week") == _measure(knowledge, "week")
    assert counted.learned_this_week == chart.weeks[-1].learned
    assert (counted.findings, counted.guesses, counted.waiting_on_you) == (2, 1, 3)
    assert _number(house, "waiting-on-you") == counted.waiting_on_you
    assert f"<strong data-waiting-count>{counted.waiting_on_you}</strong>" in findings_tab
    assert f">{counted.waiting_on_you}</span>" in badge
    assert (
        sensors["findings_open_findings"]["state"]
        + len(sensors["memory_waiting_on_you"]["attributes"]["guesses"])
        == counted.waiting_on_you
    )
    assert _measure(knowledge, "guesses") == counted.guesses
    assert sum(week.raised for week in chart.weeks) == all_counts.findings_raised_since(
        home, counts.start_of(chart.weeks[0].starts)
    )


def test_learned_this_week_is_since_monday_and_is_the_charts_last_bar(home, settings):
    settings.TIME_ZONE = "UTC"
    _teach(home, "The loft is warm in summer.", "The cellar is damp in winter.")
    monday = counts.start_of(counts.week_starts())
    before = Fact.objects.order_by("pk").first()
    Fact.objects.filter(pk=before.pk).update(created_at=monday - timedelta(hours=1))

    assert counts.learned_this_week(home, SYSTEM) == 1
    assert overview(home, SYSTEM).chart.weeks[-1].learned == 1
    assert overview(home, SYSTEM).chart.weeks[-2].learned == 1
    measured = {
        m.key: m.value for m in measurements.measure(home, all_counts.for_reader(home, SYSTEM))
    }
    assert measured["week"] == "1"


def test_the_brief_never_states_a_number_that_is_no_longer_true(home):
    _teach(home, *(f"Shelf {n} holds {n} boxes." for n in range(1, 6)))
    written = brief.write(home)
    assert "5 lines wait to be filed" in written.text
    assert brief.for_today(home, SYSTEM) == (written.text, written.written_at)

    _file(home)
    _teach(home, "The loft is warm in summer.")
    shown, written_at = brief.for_today(home, SYSTEM)

    assert written_at is None
    assert "1 line waits to be filed" in shown
    assert counts.waiting_to_be_filed(home, SYSTEM) == 1
    assert Brief.objects.count() == 1


def test_a_model_written_brief_is_shown_while_its_numbers_hold(home):
    _teach(home, "The loft is warm in summer.")
    numbers = brief.compose(home, reader=SYSTEM)
    words = "Good morning! 1 fact was learned: “The loft is warm in summer”; 1 line waits."
    assert re.findall(r"\d+", words) == ["1", "1"] == re.findall(r"\d+", numbers)
    Brief.objects.create(memory=home, text=words, composer="anthropic")

    assert brief.for_today(home, SYSTEM)[0] == words
    _teach(home, "The cellar is damp in winter.")
    assert brief.for_today(home, SYSTEM)[0] != words


def test_the_brief_ends_each_sentence_once_and_quotes_once(home):
    _teach(home, "“The office” means the back bedroom.")
    _file(home)

    said = brief.compose(home, reader=SYSTEM)

    assert ".”." not in said and "““" not in said
    assert "most recently “‘The office’ means the back bedroom”." in said


def test_a_guess_on_the_timeline_counts_the_findings_that_wait_too(home):
    findings.raise_finding(memory=home, check_id="water_leak", text="Water!", severity="high")
    guess = guesses.propose_guess(memory=home, text="The office is empty on Thursdays").guess
    guesses.answer_guess(guess=guess, answer="yes", by=None)

    answered = Event.objects.as_system("the test reads its events").order_by("-pk").first()

    assert answered.text.endswith("(1 waits on you)")
    assert "nothing waits on you" not in answered.text
    assert status.sensors(home, reader=SYSTEM)["findings_open_findings"]["state"] == 1


def test_the_admin_says_how_many_of_its_facts_house_counts_as_known(signed_in, home):
    _household(home)

    page = signed_in.get(reverse("admin:knowledge_fact_changelist")).content.decode()

    known = counts.known(home, SYSTEM)
    assert f'data-in-use="{known}"' in page
    assert f"{known} in use — what House counts as facts known" in page
    assert f"{counts.no_longer_used(home, SYSTEM)} no longer used" in page


def test_each_reader_is_shown_their_own_numbers_on_every_surface(client, db):
    world = privacy_world.build()
    for name in ("sales", "hr", "norole"):
        person = world.people[name]
        client.force_login(person)
        house = client.get(reverse("home"), {"memory": "team"}).content.decode()
        knowledge = client.get(reverse("memory:knowledge"), {"memory": "team"}).content.decode()
        sensors = client.get("/api/status/", {"memory": "team"}).json()

        counted = all_counts.for_reader(world.team, person)
        assert _number(house, "known") == counted.known == _measure(knowledge, "known"), name
        assert sensors["memory_facts_learned"]["state"] == counted.known, name
        assert _number(house, "waiting") == counted.waiting_to_be_filed, name
        assert _number(house, "week") == counted.learned_this_week, name
    sales = all_counts.for_reader(world.team, world.people["sales"]).known
    assert sales > all_counts.for_reader(world.team, world.people["norole"]).known == 0
