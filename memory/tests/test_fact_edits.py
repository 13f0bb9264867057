"""A person changes a fact's words: judged by the gate like any write, logged, and undoable."""

import pytest
from django.core.exceptions import ValidationError

from knowledge.models import Fact, Subject
from memory import actions, consolidator, fact_edits, revisions
from memory.models import Change, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

LAMP = "The office lamp turns off at 23:00."
LATER = "The office lamp turns off at 23:30."


def _filed(home, *texts, by=None) -> list[Fact]:
    learned = [
        actions.learn(Statement.typed(memory=home, text=text, origin=Origin.TYPED, by=by)).fact
        for text in texts
    ]
    consolidator.execute(
        consolidator.request_consolidation(memory=home, trigger="cli", send=False).run.pk
    )
    for fact in learned:
        fact.refresh_from_db()
    return learned


def _document(home) -> str:
    return DocumentRevision.objects.current(home).text


def _live(home) -> list[str]:
    return sorted(Fact.objects.for_memory(home).live().values_list("text", flat=True))


def test_an_edited_fact_says_the_new_words_in_the_document_and_the_log(home, alice):
    (old,) = _filed(home, LAMP)

    edited = fact_edits.edit_fact(fact=old, text=LATER, by=alice)

    assert f"- {LATER}\n" in _document(home)
    assert LAMP not in _document(home)
    assert _live(home) == [LATER]
    new = Fact.objects.get(pk=edited.fact.pk)
    assert (new.status, new.in_document, new.taught_by) == ("filed", True, alice)
    assert new.inbox_item.state == InboxItem.State.FILED
    change = Change.objects.for_memory(home).newest_first().first()
    assert change.summary == f"Edited fact #{old.pk}: “{LAMP}” now reads “{LATER}”"
    assert change.author == alice
    assert edited.change == change
    assert edited.message == (
        f"Fact #{old.pk} now reads “{LATER}” (fact #{new.pk}). "
        f"Change #{change.number} in the log undoes it."
    )


def test_undoing_an_edit_brings_the_old_words_and_their_fact_back(home, alice):
    (old,) = _filed(home, LAMP)
    edited = fact_edits.edit_fact(fact=old, text=LATER, by=alice)

    revisions.undo_change(memory=home, number=edited.change.number, by=alice)

    assert f"- {LAMP}\n" in _document(home)
    assert LATER not in _document(home)
    assert _live(home) == [LAMP]
    old.refresh_from_db()
    assert (old.status, old.in_document, old.valid_to) == ("filed", True, None)


def test_the_gate_judges_the_new_words_against_the_other_facts(home, alice):
    bedroom, loft = _filed(home, "The bedroom is kept at 19 degrees at night.", "The loft is warm.")

    edited = fact_edits.edit_fact(
        fact=loft, text="The bedroom is kept at 21 degrees at night.", by=alice
    )

    assert edited.learned.verdict == "contradiction"
    assert edited.learned.superseded == bedroom
    assert _live(home) == ["The bedroom is kept at 21 degrees at night."]
    assert "It replaces “The bedroom is kept at 19 degrees at night.”" in edited.message
    removal = InboxItem.objects.get(action=InboxItem.Action.FORGET)
    assert (removal.text, removal.state) == (bedroom.text, InboxItem.State.PENDING)


def test_words_another_fact_already_says_strengthen_it_and_the_old_line_goes(home, alice):
    hall, old = _filed(home, "The hall light is on a timer.", LAMP)

    edited = fact_edits.edit_fact(fact=old, text="The hall light is on a timer.", by=alice)

    assert edited.fact == hall
    hall.refresh_from_db()
    assert hall.support == 2
    assert _live(home) == ["The hall light is on a timer."]
    assert _document(home).count("The hall light is on a timer.") == 1
    assert LAMP not in _document(home)
    assert edited.message.startswith(f"Fact #{old.pk} now says what fact #{hall.pk} already said")


def test_editing_a_fact_still_waiting_replaces_what_waits_and_the_log_undoes_it(home, alice):
    """An edit is always logged (issue 13): a fact with no line in the document yet gets a
    curating change whose undo brings the old words back, waiting as they were."""
    old = actions.learn(Statement.typed(memory=home, text=LAMP, origin=Origin.TYPED, by=alice)).fact

    edited = fact_edits.edit_fact(fact=old, text=LATER, by=alice)

    waiting = InboxItem.objects.for_memory(home).pending()
    assert list(waiting.values_list("text", flat=True)) == [LATER]
    assert InboxItem.objects.get(fact=old).state == InboxItem.State.DROPPED
    assert _live(home) == [LATER]
    change = Change.objects.get()
    assert change.summary == f"Edited fact #{old.pk}: “{LAMP}” now reads “{LATER}”"
    assert edited.message.endswith(
        f"It waits to be filed. Change #{change.number} in the log undoes it."
    )

    revisions.undo_change(memory=home, number=change.number, by=alice)

    assert _live(home) == [LAMP]
    assert list(waiting.values_list("text", flat=True)) == [LAMP]


def test_an_edit_keeps_what_the_fact_is_about_and_its_kind(home, alice):
    lamp = Subject.objects.create(
        memory=home, kind="device", name="Office lamp", entity_id="light.office_lamp"
    )
    old = actions.learn(
        Statement.typed(
            memory=home, text="It turns off at 23:00.", origin=Origin.TYPED, subjects=[lamp.pk]
        )
    ).fact
    Fact.objects.filter(pk=old.pk).update(kind=Fact.Kind.QUIRK)
    old.refresh_from_db()

    new = fact_edits.edit_fact(fact=old, text="It turns off at 23:30.", by=alice).fact

    assert list(new.subjects.all()) == [lamp]
    assert new.kind == Fact.Kind.QUIRK


def test_a_failure_keeps_its_avoid_label_in_the_document(home, alice):
    learned = actions.learn(
        Statement.typed(
            memory=home, text="Rebooting the router at noon", origin=Origin.TYPED, outcome=False
        )
    )
    consolidator.execute(
        consolidator.request_consolidation(memory=home, trigger="cli", send=False).run.pk
    )
    assert "- Avoid: Rebooting the router at noon" in _document(home)

    fact_edits.edit_fact(fact=learned.fact, text="Rebooting the router at lunchtime", by=alice)

    assert "- Avoid: Rebooting the router at lunchtime" in _document(home)
    assert "noon" not in _document(home)


def test_a_secret_in_the_new_words_is_refused_and_nothing_changes(home, alice):
    (old,) = _filed(home, LAMP)
    before = _document(home)

    with pytest.raises(ValidationError, match="brain does not keep secrets"):
        fact_edits.edit_fact(fact=old, text="The wifi password is hunter2", by=alice)

    assert _live(home) == [LAMP]
    assert _document(home) == before


def test_a_refusal_from_the_gate_puts_the_old_fact_back(home, alice, monkeypatch):
    (old,) = _filed(home, LAMP)

    def refuse(statement):
        raise ValidationError("refused")

    monkeypatch.setattr(actions, "learn", refuse)
    with pytest.raises(ValidationError):
        fact_edits.edit_fact(fact=old, text=LATER, by=alice)

    old.refresh_from_db()
    assert (old.status, old.forgotten_reason) == ("filed", "")


def test_a_forgotten_fact_cannot_be_edited(home, alice):
    (old,) = _filed(home, LAMP)
    actions.forget(fact=old, by=alice)

    with pytest.raises(fact_edits.CannotEdit, match="not in use"):
        fact_edits.edit_fact(fact=old, text=LATER, by=alice)


def test_the_same_words_change_nothing(home, alice):
    (old,) = _filed(home, LAMP)

    edited = fact_edits.edit_fact(fact=old, text=f"  {LAMP} ", by=alice)

    assert edited.message == "Nothing changed: those are the words it already has."
    assert _live(home) == [LAMP]
    assert Change.objects.count() == 1  # the pass's, no more
