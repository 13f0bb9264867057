"""The change log: every change in plain English, each undoable on its own."""

import pytest
from django.core.exceptions import ValidationError

from memory import actions, consolidator, document, revisions
from memory.models import Change, DocumentRevision, Origin


def _file(home, *texts):
    for text in texts:
        actions.add_to_inbox(memory=home, text=text, origin=Origin.TYPED)
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)


def _text(home) -> str:
    return DocumentRevision.objects.current(home).text


def _log(home) -> list[str]:
    return [f"#{c.number} {c.summary}" for c in Change.objects.for_memory(home).order_by("number")]


def test_undo_reverts_exactly_that_change_even_after_later_ones(home):
    _file(home, "The loft is warm.")
    _file(home, "Sarah is a light sleeper.")
    assert _log(home) == [
        "#1 Added under Rooms: “The loft is warm.”",
        "#2 Added under People: “Sarah is a light sleeper.”",
    ]

    undo = revisions.undo_change(memory=home, number=1)

    assert "loft" not in _text(home)
    assert "Sarah is a light sleeper." in _text(home)
    assert undo.summary == "Undid change #1: Added under Rooms: “The loft is warm.”"
    assert Change.objects.get(number=1).undone_by == undo


def test_undoing_a_replacement_brings_the_old_line_back(home):
    _file(home, "The bedroom is kept at 19 degrees at night.")
    _file(home, "The bedroom is kept at 21 degrees at night.")
    replaced = Change.objects.for_memory(home).get(number=2)
    assert replaced.summary.startswith("Replaced “The bedroom is kept at 19 degrees")

    revisions.undo_change(memory=home, number=2)

    assert "19 degrees" in _text(home)
    assert "21 degrees" not in _text(home)


def test_a_change_whose_line_moved_on_explains_why_it_cannot_be_undone(home):
    _file(home, "The bedroom is kept at 19 degrees at night.")
    _file(home, "The bedroom is kept at 21 degrees at night.")
    before = _text(home)

    with pytest.raises(revisions.CannotUndo) as refusal:
        revisions.undo_change(memory=home, number=1)

    assert str(refusal.value) == (
        "Change #1 can't be undone: “The bedroom is kept at 19 degrees at night.” is no longer "
        "in the document (change #2 changed that line since). Nothing was changed."
    )
    assert _text(home) == before


def test_undoing_twice_or_an_unknown_change_is_refused_clearly(home):
    _file(home, "The loft is warm.")
    revisions.undo_change(memory=home, number=1)

    with pytest.raises(revisions.CannotUndo, match=r"^Change #1 was already undone by change #2\."):
        revisions.undo_change(memory=home, number=1)
    with pytest.raises(revisions.CannotUndo, match=r"^There is no change #9 in the log of Home\."):
        revisions.undo_change(memory=home, number=9)


def test_an_undo_can_itself_be_undone(home):
    _file(home, "The loft is warm.")
    revisions.undo_change(memory=home, number=1)

    revisions.undo_change(memory=home, number=2)

    assert "The loft is warm." in _text(home)


def test_your_edit_is_logged_in_your_name_and_the_voice_follows_it(home, alice):
    current = DocumentRevision.objects.current(home)
    edited = current.text.replace("## Rooms\n", "## Rooms\n\n- The cellar floods in March.\n")

    changes = revisions.save_user_edit(memory=home, text=edited, base_generation=0, by=alice)

    assert [c.summary for c in changes] == [
        "You edited the document: added “The cellar floods in March.”"
    ]
    assert changes[0].author_name == "alice"
    revision = DocumentRevision.objects.current(home)
    assert revision.kind == "edit"
    assert "The cellar floods in March." in revision.voice


def test_an_edit_over_the_cap_is_refused_naming_memory_max_kb_and_nothing_is_saved(home):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])

    with pytest.raises(ValidationError, match=r"over its limit of 1 KB \(1,024 bytes\)"):
        revisions.save_user_edit(memory=home, text="- x\n" * 400, base_generation=0)

    assert not DocumentRevision.objects.filter(memory=home).exists()


def test_an_edit_of_a_document_that_moved_on_is_refused_not_merged_over(home):
    _file(home, "The loft is warm.")

    with pytest.raises(revisions.DocumentChanged, match="now at revision 1"):
        revisions.save_user_edit(memory=home, text="# Memory\n\n- Mine.\n", base_generation=0)

    assert "The loft is warm." in _text(home)


def test_a_pass_merges_around_what_you_wrote_by_hand(home):
    mine = (
        "# Memory\n\nWe moved in during 2019; the notes below are mine.\n\n"
        "## Rooms\n\n- The loft is warm.\n"
    )
    revisions.save_user_edit(memory=home, text=mine, base_generation=0)

    _file(home, "Sarah is a light sleeper.")

    text = _text(home)
    assert "We moved in during 2019; the notes below are mine.\n" in text
    assert "- The loft is warm.\n" in text
    assert "Sarah is a light sleeper." in text


def test_clearing_keeps_the_old_document_as_a_revision_and_can_be_undone(home):
    _file(home, "The loft is warm.", "Sarah is a light sleeper.")
    before = _text(home)

    change = revisions.clear_memory(memory=home)

    assert _text(home) == document.TEMPLATE
    assert change.summary == ("Cleared the memory document (the old one is kept as revision 1)")
    assert DocumentRevision.objects.get(memory=home, generation=1).text == before
    revisions.undo_change(memory=home, number=change.number)
    assert document.content_lines(_text(home)) == document.content_lines(before)
