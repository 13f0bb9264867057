"""`make demo`: a hand-written household, loaded into any memory through the same actions as
everything else, twice without harm, and every line of it its own fact."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from knowledge.models import Fact, Memory, Source
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator
from memory.models import ConsolidationRun, InboxItem
from memory.taught import Statement
from review import counts, demo_household
from review.models import Finding, Guess

HOUSEHOLD = demo_household.read()
WAITING = sum(len(m.lines) for m in HOUSEHOLD.moments if m.waiting)


def _demo(slug: str) -> str:
    out = StringIO()
    call_command("demo", "--memory", slug, stdout=out)
    return out.getvalue()


def _state(memory: Memory) -> dict:
    return {
        "facts": Fact.objects.for_memory(memory).count(),
        "known": Fact.objects.for_memory(memory).live().count(),
        "waiting": InboxItem.objects.for_memory(memory).pending().count(),
        "sources": Source.objects.filter(memory=memory).count(),
        "findings": Finding.objects.for_memory(memory).count(),
        "guesses": Guess.objects.for_memory(memory).count(),
    }


def _expired_health_notes(memory: Memory) -> int:
    return Fact.objects.for_memory(memory).filter(status=Fact.Status.EXPIRED).count()


def test_the_demo_loads_into_two_memories_and_a_second_load_adds_nothing(home):
    _demo("home")
    first = _state(home)
    _demo("demo")
    second_memory = Memory.objects.get(slug="demo")

    output = _demo("home")

    assert _state(home) == first
    assert _state(second_memory) == first
    assert "nothing new, the demo household was already here" in output
    assert first["facts"] == len(HOUSEHOLD.lines)
    assert first["waiting"] == WAITING
    assert first["guesses"] == len(HOUSEHOLD.guesses)
    assert first["findings"] == len(HOUSEHOLD.findings)


def test_make_demo_counts_the_lines_it_teaches_and_ends_with_a_summary(home):
    total = len(HOUSEHOLD.lines)

    output = _demo("home")

    assert f"Teaching 1/{total} lines" in output
    assert f"Teaching {total}/{total} lines" in output
    assert len([line for line in output.splitlines() if line.startswith("Teaching")]) <= 12
    assert f"taught {total} lines" in output
    assert output.rstrip().endswith("Open / to see the house.")
    # The numbers House then shows, not a count of its own (it said 9 findings beside a chart of 8).
    counted = counts.for_reader(home, SYSTEM)
    assert f"{counted.known:,} facts known, {counted.waiting_to_be_filed} waiting" in output
    assert f"{counted.findings} findings and {counted.guesses} guesses wait on you." in output


def test_every_hand_written_line_survives_the_gate_as_a_fact_of_its_own(home):
    loaded = demo_household.load(home, household=HOUSEHOLD)

    assert loaded.misjudged == []
    expired = _expired_health_notes(home)
    assert expired >= 5  # "some expired health notes": the battery levels of months ago
    assert Fact.objects.for_memory(home).live().count() == (
        len(HOUSEHOLD.lines) - len(HOUSEHOLD.corrections) - expired
    )
    for line in HOUSEHOLD.corrections:
        old = Fact.objects.for_memory(home).get(text=line.replaces)
        assert old.superseded_by.text == line.text


def test_the_household_reads_like_a_family_not_a_template():
    texts = [line.text for line in HOUSEHOLD.lines]
    openings = {" ".join(text.split()[:4]) for text in texts}

    assert len(texts) >= 200
    assert len(set(texts)) == len(texts)
    # "Guests sleep in the back bedroom / in the kitchen / in the cellar…": no opening repeated
    # more than a handful of times.
    assert len(openings) > 0.9 * len(texts)


def test_the_demo_waits_for_a_pass_the_worker_is_running_instead_of_racing_it(home, monkeypatch):
    """`make run`'s worker may be filing the memory when the demo asks for a pass: the demo
    used to carry on as if it had filed, edit the document on top of a generation the worker
    was replacing, and stop with DocumentChanged; now it waits for that pass, then files."""
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))
    workers_pass = consolidator.request_consolidation(
        memory=home, trigger=ConsolidationRun.Trigger.EARLY, send=False
    ).run
    ConsolidationRun.objects.filter(pk=workers_pass.pk).update(
        claimed_at=timezone.now(), executor="worker-host:4242"
    )
    waited = []

    def worker_finishes(seconds: float) -> None:
        waited.append(seconds)
        ConsolidationRun.objects.filter(pk=workers_pass.pk).update(claimed_at=None)
        consolidator.execute(workers_pass.pk)

    monkeypatch.setattr(demo_household.time, "sleep", worker_finishes)

    output = _demo("home")

    assert waited
    assert InboxItem.objects.for_memory(home).pending().count() == WAITING
    assert ConsolidationRun.objects.get(pk=workers_pass.pk).state == "filed"
    assert "facts known" in output


def test_a_pass_asked_for_with_no_worker_running_is_run_by_the_demo_not_waited_for(
    home, monkeypatch
):
    """Early filing asks the worker for a pass at 20 waiting lines; with no `make run` going
    nobody takes it, and the demo must file it itself rather than wait for a worker."""
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))
    asked = consolidator.request_consolidation(
        memory=home, trigger=ConsolidationRun.Trigger.EARLY, send=False
    ).run

    def no_waiting(seconds: float) -> None:
        raise AssertionError("the demo waited for a worker that is not there")

    monkeypatch.setattr(demo_household.time, "sleep", no_waiting)

    _demo("home")

    assert ConsolidationRun.objects.get(pk=asked.pk).state == "filed"
    assert InboxItem.objects.for_memory(home).pending().count() == WAITING
