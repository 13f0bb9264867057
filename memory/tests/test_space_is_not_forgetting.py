"""The document is a summary, the facts are the memory: a line a pass leaves out to fit the cap
is not withdrawn. Only what a person withdrew (a deleted line, forget, clear, undo) reaches the
facts."""

from __future__ import annotations

import pytest
from django.urls import reverse

from knowledge import provenance, retrieval
from knowledge.models import Fact
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator, document, revisions
from memory.composers.base import Composition
from memory.demo import household_facts
from memory.models import Change, ConsolidationRun, DocumentRevision, Origin
from memory.taught import Statement

LEFT_OUT = "not in the document: left out for space"


def _pass(home) -> ConsolidationRun:
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


@pytest.fixture
def small(home):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    return home


def test_under_steady_teaching_the_lines_dropped_to_fit_leave_their_facts_recallable(small):
    taught = []
    texts = household_facts(40, seed=11)
    for start in range(0, len(texts), 5):
        for text in texts[start : start + 5]:
            taught.append(
                actions.learn(Statement.typed(memory=small, text=text, origin=Origin.TYPED)).fact
            )
        run = _pass(small)
        assert run.state == "filed", run.reason

    assert document.size_bytes(_document(small)) <= small.max_bytes
    dropped = [note for note in run.notes if note.startswith("dropped to fit memory_max_kb")]
    ids = {fact.pk for fact in taught}
    assert not Fact.objects.filter(pk__in=ids, status="forgotten").exists()
    evicted = list(Fact.objects.live().filter(pk__in=ids, in_document=False).order_by("pk"))
    assert dropped and len(evicted) >= 10  # most of 40 facts cannot fit in 1 KB
    for fact in (evicted[0], evicted[-1]):
        assert fact.text not in _document(small)
        recalled = retrieval.context(
            memory=small, question=fact.text, token_budget=2000, reader=SYSTEM
        )
        assert fact.pk in recalled.fact_ids
        assert fact.text in recalled.text
        assert provenance.explain(fact, reader=SYSTEM)["document"] == LEFT_OUT
        assert provenance.explain(fact, reader=SYSTEM)["believed"] is True


def test_a_line_a_pass_leaves_out_keeps_its_fact_live(home, scripted):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    actions.learn(
        Statement.typed(memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED)
    )
    actions.learn(
        Statement.typed(memory=home, text="The cellar floods in March.", origin=Origin.TYPED)
    )
    _pass(home)
    actions.learn(
        Statement.typed(
            memory=home, text="The garage freezer is off in winter.", origin=Origin.TYPED
        )
    )

    def leave_the_loft_out(*, document, **_):
        text = document.replace("- The loft is warm.\n", "")
        text = text.replace("## Devices\n", "## Devices\n- The garage freezer is off in winter.\n")
        return Composition(document=text, voice="")

    scripted(leave_the_loft_out)

    run = _pass(home)

    assert run.state == "filed", run.reason
    assert "loft" not in _document(home)
    loft.refresh_from_db()
    assert (loft.status, loft.in_document) == ("filed", False)
    assert loft in Fact.objects.live()
    assert (
        loft.pk
        in retrieval.context(memory=home, question="Is the loft warm?", reader=SYSTEM).fact_ids
    )
    assert provenance.explain(loft, reader=SYSTEM)["why_not"] is None
    assert provenance.explain(loft, reader=SYSTEM)["document"] == LEFT_OUT


def test_undoing_the_pass_that_left_a_line_out_puts_its_fact_back_in_the_document(home, scripted):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    actions.learn(
        Statement.typed(memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED)
    )
    actions.learn(
        Statement.typed(memory=home, text="The cellar floods in March.", origin=Origin.TYPED)
    )
    _pass(home)
    actions.learn(
        Statement.typed(
            memory=home, text="The garage freezer is off in winter.", origin=Origin.TYPED
        )
    )
    scripted(
        lambda *, document, **_: Composition(
            document=document.replace("- The loft is warm.\n", ""), voice=""
        )
    )
    _pass(home)
    removal = Change.objects.for_memory(home).newest_first().first()

    revisions.undo_change(memory=home, number=removal.number)

    loft.refresh_from_db()
    assert (loft.status, loft.in_document) == ("filed", True)
    assert provenance.explain(loft, reader=SYSTEM)["document"] == "in the document"


def test_the_facts_list_says_which_facts_were_left_out_for_space(
    client, admin_user, home, scripted
):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    sarah = actions.learn(
        Statement.typed(memory=home, text="Sarah is a light sleeper.", origin=Origin.TYPED)
    ).fact
    scripted(
        lambda *, document, **_: Composition(
            document=document.replace("## People\n", "## People\n- Sarah is a light sleeper.\n"),
            voice="",
        )
    )
    _pass(home)
    client.force_login(admin_user)

    html = client.get(reverse("memory:facts"), headers={"HX-Request": "true"}).content.decode()

    loft_row = html[html.index(f'id="fact-{loft.pk}"') :].split("</li>")[0]
    sarah_row = html[html.index(f'id="fact-{sarah.pk}"') :].split("</li>")[0]
    assert LEFT_OUT in loft_row
    assert LEFT_OUT not in sarah_row


def test_a_line_a_person_deletes_still_forgets_its_fact(home):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    _pass(home)
    current = DocumentRevision.objects.current(home)

    revisions.save_user_edit(
        memory=home,
        text=current.text.replace("- The loft is warm.\n", ""),
        base_generation=current.generation,
    )

    loft.refresh_from_db()
    assert loft.status == "forgotten"
    assert provenance.explain(loft, reader=SYSTEM)["document"] is None


def test_forgetting_the_last_line_of_the_document_leaves_the_empty_template(home):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    _pass(home)
    assert document.content_lines(_document(home)) == ["- The loft is warm."]

    actions.forget(fact=loft)
    run = _pass(home)

    assert run.state == "filed", run.reason
    assert _document(home) == document.TEMPLATE
    assert loft not in Fact.objects.live()
    assert (
        "loft"
        not in retrieval.context(memory=home, question="Is the loft warm?", reader=SYSTEM).text
    )


def test_an_empty_answer_that_was_not_asked_for_is_still_refused(home, scripted):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    actions.learn(
        Statement.typed(memory=home, text="The cellar floods in March.", origin=Origin.TYPED)
    )
    _pass(home)
    loft = Fact.objects.get(text="The loft is warm.")
    actions.forget(fact=loft)
    scripted(Composition(document=document.TEMPLATE, voice=""))

    run = _pass(home)

    assert run.state == "refused"
    assert "empty document" in run.reason
    assert "cellar" in _document(home)
