"""A person's forget forgets: `brain memory forget "…"` stops the fact being believed at once,
everywhere (recall, explain, the facts list), and the pass that removes its line leaves it
forgotten, never "left out for space". Only space keeps a fact believed while its line goes."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from knowledge import provenance, retrieval
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator
from memory.composers.base import Composition
from memory.models import ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

LEFT_OUT = "not in the document: left out for space"


@pytest.fixture(autouse=True)
def offline(settings):
    settings.ANTHROPIC_API_KEY = ""


def brain(*args: str) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _pass(home) -> ConsolidationRun:
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


def _recalled(home, fact: Fact, question: str) -> bool:
    block = retrieval.context(memory=home, question=question, reader=SYSTEM)
    return fact.pk in block.fact_ids


@pytest.fixture
def loft(home) -> Fact:
    fact = actions.learn(
        Statement.typed(memory=home, text="Guests use the loft.", origin=Origin.TYPED)
    ).fact
    actions.learn(
        Statement.typed(memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED)
    )
    assert _pass(home).state == "filed"
    fact.refresh_from_db()
    assert fact.in_document and _recalled(home, fact, "Who uses the loft?")
    return fact


def test_brain_memory_forget_stops_the_fact_being_believed_at_once(home, loft):
    out = brain("forget", "Guests use the loft")

    loft.refresh_from_db()
    assert loft.status == Fact.Status.FORGOTTEN
    assert f"fact #{loft.pk}" in out and "no longer believed" in out
    assert not _recalled(home, loft, "Who uses the loft?")
    explained = provenance.explain(loft, reader=SYSTEM)
    assert explained["believed"] is False
    assert explained["document"] != LEFT_OUT


def test_the_pass_that_removes_a_forgotten_line_leaves_its_fact_forgotten(home, loft):
    brain("forget", "Guests use the loft")

    run = _pass(home)

    assert run.state == "filed", run.reason
    assert "loft" not in _document(home)
    loft.refresh_from_db()
    assert loft.status == Fact.Status.FORGOTTEN
    assert provenance.explain(loft, reader=SYSTEM)["document"] != LEFT_OUT
    assert not _recalled(home, loft, "Who uses the loft?")


def test_a_forget_queued_for_a_line_forgets_its_fact_when_the_pass_removes_it(home, loft):
    # A forget queued as the terminal queued it before: the line's words, nothing more.
    actions.add_to_inbox(
        memory=home, text="guests use the loft", origin=Origin.TERMINAL, action="forget"
    )

    assert _pass(home).state == "filed"

    loft.refresh_from_db()
    assert "loft" not in _document(home)
    assert loft.status == Fact.Status.FORGOTTEN
    assert provenance.explain(loft, reader=SYSTEM)["document"] != LEFT_OUT


def test_forgetting_a_line_no_fact_says_only_queues_its_removal(home, loft):
    out = brain("forget", "The shed is cold")

    assert out.startswith("Queued #")
    assert InboxItem.objects.filter(action="forget", text="The shed is cold").exists()
    loft.refresh_from_db()
    assert loft.status == Fact.Status.FILED


def test_a_line_a_pass_leaves_out_for_space_still_keeps_its_fact(home, loft, scripted):
    actions.learn(
        Statement.typed(memory=home, text="The cellar floods in March.", origin=Origin.TYPED)
    )
    scripted(
        lambda *, document, **_: Composition(
            document=document.replace("- Guests use the loft.\n", ""), voice=""
        )
    )

    _pass(home)

    loft.refresh_from_db()
    assert (loft.status, loft.in_document) == (Fact.Status.FILED, False)
    assert provenance.explain(loft, reader=SYSTEM)["document"] == LEFT_OUT
