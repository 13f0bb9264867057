"""Plain words for every measurement and state a page shows: never a choice's code or its
capitalised label dropped into a sentence ("last filed: Filed")."""

from __future__ import annotations

import re

from django.urls import reverse
from django.utils import timezone

from memory import actions, consolidator
from memory.models import ConsolidationRun
from memory.taught import Statement
from review.models import Event


def _measure(page: str, key: str) -> str:
    found = re.search(rf'data-measure="{key}".*?<span class="label">(.*?)</span>', page, flags=re.S)
    assert found, f"no {key} measurement on the page"
    return found.group(1)


def _file(home) -> None:
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)


def test_the_last_measurement_after_a_filed_pass_reads_last_filed_and_nothing_more(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))
    _file(home)

    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    assert _measure(page, "filed") == "last filed"
    assert "Filed" not in _measure(page, "filed")


def test_a_pass_that_failed_or_timed_out_is_said_in_a_sentence(signed_in, home):
    now = timezone.now()
    ConsolidationRun.objects.create(
        memory=home,
        trigger="cli",
        state="timed_out",
        started_at=now,
        finished_at=now,
        lease_expires_at=now,
    )

    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    assert _measure(page, "filed") == "last pass timed out"


def test_the_timeline_never_shows_an_event_code_without_saying_what_it_is(signed_in, home):
    Event.objects.create(memory=home, kind=Event.Kind.LEARNED, text="brain learned: the loft")
    Event.objects.create(
        memory=home,
        kind=Event.Kind.FINDING,
        text="Water under the sink",
        pushed_at=timezone.now(),
    )

    page = signed_in.get(reverse("review:timeline")).content.decode()

    assert "· brain_learned" not in page
    assert "sent to Home Assistant as" in page and "“brain_finding”" in page


def test_the_timeline_does_not_speak_of_home_assistant_when_nothing_went_there(
    signed_in, home, settings
):
    settings.HA_URL, settings.HA_TOKEN = "", ""
    Event.objects.create(memory=home, kind=Event.Kind.LEARNED, text="brain learned: the loft")

    page = signed_in.get(reverse("review:timeline")).content.decode()
    text = re.sub(r"<[^>]+>", " ", page.split("<main", 1)[1])

    assert "Home Assistant" not in text and "brain_learned" not in text


def test_a_count_of_one_takes_the_singular(signed_in, home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))

    page = signed_in.get(reverse("memory:knowledge")).content.decode()

    assert _measure(page, "known") == "fact known"
    assert _measure(page, "rules") == "rules you set"
