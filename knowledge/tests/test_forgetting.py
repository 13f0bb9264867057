"""Forgetting reaches everything: the facts follow the memory document."""

from knowledge.models import Fact
from memory import actions, consolidator, revisions
from memory.models import DocumentRevision
from memory.taught import Statement


def _file(home):
    run = consolidator.request_consolidation(memory=home, trigger="cli", send=False).run
    consolidator.execute(run.pk)


def _text(home):
    return DocumentRevision.objects.current(home).text


def test_filing_marks_facts_filed_and_in_the_document(home):
    fact = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact

    _file(home)

    fact.refresh_from_db()
    assert fact.status == "filed"
    assert fact.in_document


def test_a_line_you_delete_from_the_document_stops_its_fact_being_used(home):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact
    sarah = actions.learn(
        Statement.typed(memory=home, text="Sarah is a light sleeper.", origin="typed")
    ).fact
    _file(home)
    current = DocumentRevision.objects.current(home)

    revisions.save_user_edit(
        memory=home,
        text=current.text.replace("- The loft is warm.\n", ""),
        base_generation=current.generation,
    )

    assert list(Fact.objects.live()) == [sarah]
    loft.refresh_from_db()
    assert loft.forgotten_reason == "its line is no longer in the memory document"


def test_an_undo_that_brings_the_line_back_brings_the_fact_back(home):
    loft = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact
    _file(home)
    current = DocumentRevision.objects.current(home)
    edit = revisions.save_user_edit(
        memory=home,
        text=current.text.replace("- The loft is warm.\n", ""),
        base_generation=current.generation,
    )[0]

    revisions.undo_change(memory=home, number=edit.number)

    loft.refresh_from_db()
    assert loft.status == "filed"
    assert loft in Fact.objects.live()


def test_clearing_the_memory_forgets_everything_but_corrections(home):
    plain = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact
    correction = actions.learn(
        Statement.typed(
            memory=home, text="The study is downstairs, not upstairs.", origin="correction"
        )
    ).fact
    _file(home)

    revisions.clear_memory(memory=home)

    assert list(Fact.objects.live()) == [correction]
    plain.refresh_from_db()
    assert plain.status == "forgotten"


def test_forget_on_a_queued_fact_drops_it_from_the_queue_and_from_what_runs_are_told(home):
    fact = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact

    message = actions.forget(fact=fact)

    assert message.startswith("Forgotten; it was still waiting to be filed")
    assert not Fact.objects.live().exists()
    fact.inbox_item.refresh_from_db()
    assert fact.inbox_item.state == "dropped"


def test_forget_on_a_filed_fact_stops_it_now_and_removes_its_line_at_the_next_filing(home):
    fact = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin="typed")
    ).fact
    actions.learn(Statement.typed(memory=home, text="Sarah is a light sleeper.", origin="typed"))
    _file(home)

    message = actions.forget(fact=fact)

    assert message == "Forgotten; its line leaves the memory document at the next filing."
    assert fact not in Fact.objects.live()
    assert "The loft is warm." in _text(home)
    _file(home)
    assert "loft" not in _text(home)


def test_a_queued_fact_is_left_alone_until_it_has_been_judged(home):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin="typed"))
    _file(home)
    waiting = actions.learn(
        Statement.typed(memory=home, text="Guests use the loft.", origin="typed")
    ).fact
    current = DocumentRevision.objects.current(home)

    revisions.save_user_edit(
        memory=home, text=current.text + "\n- My own line.\n", base_generation=current.generation
    )

    waiting.refresh_from_db()
    assert waiting.status == "queued"
    assert waiting in Fact.objects.live()
