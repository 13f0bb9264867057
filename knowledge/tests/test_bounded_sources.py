"""Bounded work per source (knowledge/sources.py MAX_PASSAGES, memory/compiling.py's turns and
queue): a text that cuts into too many passages is refused at once, naming the limit, with
nothing written; a source compiles in turns on a queue of its own, which `make run` gives a
worker of its own, so a large upload never holds back another memory's filing pass.

Seen before: a 1.2 MB .txt of blank-line-separated "line" took 140 s to answer the upload and
332 s of a worker to compile; while two ran, another memory's filing pass waited."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from brain import run, testing
from brain.celery import app
from knowledge import compile_requests, sources
from knowledge.models import CompileRun, Memory, Passage, Source
from memory import compiling, consolidator
from memory.models import ConsolidationRun, InboxItem, Origin

LINES = ("line\n\n" * 200_000).encode()  # 1.2 MB: 200,000 passages


def _counts() -> tuple[int, int]:
    return (
        Source.objects.as_system("counting what an upload wrote").count(),
        Passage.objects.as_system("counting what an upload wrote").count(),
    )


@pytest.mark.django_db
def test_a_text_of_too_many_passages_is_refused_at_once_naming_the_limit(home, admin_user):
    before = _counts()
    started = time.monotonic()

    with pytest.raises(ValidationError) as refused:
        sources.add_source(memory=home, by=admin_user, upload=sources.Upload("lines.txt", LINES))

    assert time.monotonic() - started < 5  # it took 104 s to cut before anything was written
    assert refused.value.messages == [
        "“lines.txt” cuts into 200,000 passages; a source may hold at most 2,000 (about 400 KB "
        "of prose). Add it as several smaller sources: nothing was added."
    ]
    assert _counts() == before


@pytest.mark.django_db
def test_the_api_refuses_it_in_a_400_naming_the_limit(signed_in):
    from django.core.files.uploadedfile import SimpleUploadedFile

    before = _counts()
    started = time.monotonic()

    response = signed_in.post(
        "/api/sources/", {"file": SimpleUploadedFile("lines.txt", LINES, "text/plain")}
    )

    assert time.monotonic() - started < 10
    assert response.status_code == 400
    assert "a source may hold at most 2,000" in response.json()["detail"]
    assert _counts() == before


@pytest.mark.django_db
def test_up_to_the_limit_is_added(home, admin_user, monkeypatch):
    monkeypatch.setattr(sources, "MAX_PASSAGES", 30)
    text = "".join(f"Shelf {n} holds the blue pots.\n\n" for n in range(30))

    added = sources.add_source(memory=home, by=admin_user, text=text)
    too_many = "cuts into 31 passages; a source may hold at most 30"
    with pytest.raises(ValidationError, match=too_many):
        sources.add_source(memory=home, by=admin_user, text=text + "Shelf 30 is empty.")

    assert len(added.passages) == 30


# Turns ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_long_compile_works_in_turns_going_on_where_it_stopped(
    home, admin_user, settings, monkeypatch
):
    settings.BRAIN_COMPILE_TURN_S = 0  # every turn ends after its first call's worth
    sent: list[tuple] = []
    monkeypatch.setattr(compiling, "send_on_commit", lambda *args: sent.append(args))
    monkeypatch.setattr(compile_requests, "send_on_commit", lambda *args: None)
    text = "".join(f"Shelf {n} in the shed holds the blue pots.\n\n" for n in range(50))
    source = sources.add_source(memory=home, by=admin_user, text=text).source
    compile_run = compile_requests.latest(source)

    compiling.execute(compile_run.pk)

    compile_run.refresh_from_db()
    assert compile_run.is_running and compile_run.claimed_at is None and not compile_run.executor
    assert (compile_run.passages_done, compile_run.passages_total) == (
        compiling.MAX_PASSAGES_PER_CALL,
        50,
    )
    assert compile_run.message == "Compiling: 20 of 50 passages"
    assert sent == [(compile_requests.TASK, compile_run.pk)]

    compiling.execute(compile_run.pk)
    compiling.execute(compile_run.pk)

    compile_run.refresh_from_db()
    assert compile_run.state == CompileRun.State.COMPILED
    assert compile_run.passages_done == 50 and compile_run.facts_filed == 50
    assert len(sent) == 2  # two turns handed over, the third finished


@pytest.mark.django_db
def test_only_the_process_holding_a_run_hands_it_over(home, admin_user, monkeypatch):
    monkeypatch.setattr(compiling, "send_on_commit", lambda *args: pytest.fail("sent"))
    source = sources.add_source(memory=home, by=admin_user, text="The loft is warm.").source
    compile_run = compile_requests.latest(source)
    CompileRun.objects.filter(pk=compile_run.pk).update(executor="elsewhere:1")

    compiling._hand_over(compile_run)

    compile_run.refresh_from_db()
    assert compile_run.executor == "elsewhere:1"


# The queue --------------------------------------------------------------------------------------


def test_compiling_goes_to_its_own_queue_and_every_other_task_to_the_default():
    route = app.amqp.router.route

    assert route({}, compile_requests.TASK)["queue"].name == run.COMPILE_QUEUE
    assert route({}, "memory.tasks.consolidate")["queue"].name == run.DEFAULT_QUEUE


def test_make_run_starts_a_worker_for_each_queue():
    programs = {program.name: program.argv for program in run.programs(8000, debug=False)}

    assert programs["worker"][programs["worker"].index("-Q") + 1] == run.DEFAULT_QUEUE
    assert programs["compiler"][programs["compiler"].index("-Q") + 1] == run.COMPILE_QUEUE


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_large_uploads_never_hold_back_another_memorys_filing_pass(admin_user):
    """The workers as `make run` starts them, on the test database and broker: two sources of
    300 passages compile in memory A (in turns of 3 s) while memory B's filing pass is asked
    for; B's pass is filed while A's compiles are still going."""
    programs = {program.name: program.argv for program in run.programs(8000, debug=False)}
    garden = Memory.objects.create(slug="garden", name="Garden")
    home = Memory.objects.default()
    for number in range(3):
        InboxItem.objects.create(
            memory=home, text=f"The attic hatch {number} sticks in winter.", origin=Origin.TYPED
        )
    text = "".join(f"Bed {n} of the garden grows {n} rows of beans.\n\n" for n in range(300))
    extra = {"BRAIN_COMPILE_TURN_S": "3"}

    with (
        testing.celery_worker(
            connection.settings_dict,
            program=programs["worker"],
            name="brain-worker",
            extra_env=extra,
        ),
        testing.celery_worker(
            connection.settings_dict,
            program=programs["compiler"],
            name="brain-compiler",
            extra_env=extra,
        ) as compiler,
    ):
        uploads = [
            sources.add_source(memory=garden, by=admin_user, text=text, title=f"beds {n}").source
            for n in range(2)
        ]
        testing.wait_until(
            lambda: all(compile_requests.latest(s).passages_done for s in uploads),
            timeout=120,
            message="the compiles never started",
        )
        asked = consolidator.request_consolidation(
            memory=home, trigger=ConsolidationRun.Trigger.CLI, send=True
        )
        filed = testing.wait_until(
            lambda: ConsolidationRun.objects.filter(
                pk=asked.run.pk, state=ConsolidationRun.State.FILED
            ).exists(),
            timeout=60,
            message="the filing pass waited behind the compiles",
        )
        still_compiling = [compile_requests.latest(s) for s in uploads]

        assert filed
        assert any(r.is_running and r.passages_done < 300 for r in still_compiling)
        assert compiler.poll() is None
