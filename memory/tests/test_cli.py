"""`brain memory …` from the terminal: what each verb prints, and how it refuses."""

import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection

from brain.testing import database_url
from knowledge.models import Fact, Memory
from memory import consolidator, document, revisions
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem

WRAPPER = Path(django_settings.BASE_DIR) / "bin" / "brain"
EDITED = document.TEMPLATE + "- The boiler is in the cellar.\n"


@pytest.fixture(autouse=True)
def offline(settings):
    """Passes run by rule, with no model: the same answer on every machine."""
    settings.ANTHROPIC_API_KEY = ""


def brain(*args: str) -> str:
    """Run `brain memory ARGS` in this process; returns what it printed on stdout."""
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _document(memory: Memory) -> str:
    return DocumentRevision.objects.current(memory).text


def _counts(memory: Memory) -> tuple[int, int, int]:
    return (
        DocumentRevision.objects.filter(memory=memory).count(),
        InboxItem.objects.for_memory(memory).count(),
        Change.objects.for_memory(memory).count(),
    )


def _filed(*facts: str) -> None:
    for fact in facts:
        brain("add", fact)
    assert brain("consolidate").startswith(f"Filed {len(facts)} item")


# list, add, inbox, hypotheses -----------------------------------------------------------------


def test_list_prints_the_memory_document(home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)

    assert brain("list") == EDITED


def test_a_new_memory_lists_the_empty_template(home):
    assert brain("list") == document.TEMPLATE


def test_add_queues_a_fact_from_the_terminal_with_its_confidence(home):
    out = brain("add", "The loft  is warm", "--confidence", "high")

    item = InboxItem.objects.get()
    assert out == f"Queued #{item.pk}: The loft is warm\n"
    assert (item.text, item.origin, item.confidence, item.state) == (
        "The loft is warm",
        "terminal",
        "high",
        "pending",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "   "], "A fact can't be empty: say what brain should remember."),
        (["add", "x" * 1001], "That fact is 1,001 characters; the limit is 1,000."),
        (["add", "Fine", "--confidence", "sure"], "invalid choice: 'sure'"),
        (["forget", ""], "A fact can't be empty"),
    ],
    ids=["empty", "over-long", "bad confidence", "empty forget"],
)
def test_add_refuses_a_bad_fact_and_queues_nothing(home, args, message):
    with pytest.raises(CommandError) as refused:
        brain(*args)

    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not InboxItem.objects.exists()


def test_inbox_lists_what_waits_with_labels_and_a_count(home):
    brain("add", "The loft is warm", "--confidence", "low")
    brain("forget", "The shed is cold")

    lines = brain("inbox").splitlines()

    assert len(lines) == 3
    assert re.fullmatch(
        r"#\d+  \d{4}-\d\d-\d\d \d\d:\d\d  The loft is warm  \(from the terminal, low\)", lines[0]
    )
    assert lines[1].endswith("The shed is cold  (to forget, from the terminal, medium)")
    assert lines[2] == "2 waiting to be filed."


def test_an_empty_inbox_says_so(home):
    assert brain("inbox") == "Nothing is waiting to be filed.\n"


def test_hypotheses_with_none_proposed_says_so(home):
    assert brain("hypotheses") == "No guesses yet: brain has not proposed any.\n"


def test_hypotheses_lists_the_guesses_brain_proposed_with_their_ids(home):
    from review import guesses  # guesses live above memory; the command finds them by name

    asked = guesses.propose_guess(memory=home, text="The garage fridge is meant to run 24/7")

    listed = brain("hypotheses")

    assert f"#{asked.guess.pk}  The garage fridge is meant to run 24/7 — right?" in listed
    assert listed.endswith("1 waiting on you: brain memory confirm N, or reject N --reason …\n")


def test_an_unknown_memory_is_refused_by_name(home):
    with pytest.raises(CommandError, match=r"There is no memory called 'nope'\."):
        brain("--memory", "nope", "list")


# consolidate, log, undo, forget ---------------------------------------------------------------


def test_consolidate_runs_a_pass_here_and_prints_what_it_filed(home):
    brain("add", "The loft is warm.")
    brain("add", "Sarah is a light sleeper.")

    out = brain("consolidate")

    assert out == "Filed 2 items. Lines 2 added.\n"
    assert "- The loft is warm." in _document(home)
    assert "- Sarah is a light sleeper." in _document(home)
    assert brain("inbox") == "Nothing is waiting to be filed.\n"
    run = ConsolidationRun.objects.get()
    assert (run.trigger, run.state) == ("cli", "filed")


def test_consolidate_with_nothing_waiting_says_so(home):
    assert brain("consolidate") == "Filed 0 items. Nothing was waiting to be filed.\n"


def test_consolidate_refuses_while_a_pass_is_already_running(home):
    running = consolidator.request_consolidation(memory=home, trigger="api", send=False).run

    with pytest.raises(CommandError, match=rf"A pass is already running.*pass #{running.pk}"):
        brain("consolidate")

    assert ConsolidationRun.objects.count() == 1


def test_consolidate_refuses_when_learning_is_off(home):
    home.learning = False
    home.save(update_fields=["learning"])
    brain("add", "The loft is warm.")

    with pytest.raises(CommandError, match="Learning is switched off for Home"):
        brain("consolidate")

    assert not ConsolidationRun.objects.exists()
    assert InboxItem.objects.pending().count() == 1


def test_log_lists_numbered_changes_newest_first(home):
    _filed("The loft is warm.", "Sarah is a light sleeper.")

    lines = brain("log").splitlines()

    assert len(lines) == 2
    assert re.fullmatch(r"#2  \d{4}-\d\d-\d\d \d\d:\d\d  Added under \w+: “.+”", lines[0])
    assert lines[1].startswith("#1  ")
    assert {lines[0].split("“")[1], lines[1].split("“")[1]} == {
        "The loft is warm.”",
        "Sarah is a light sleeper.”",
    }


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_log_refuses_a_limit_below_one(home, limit):
    with pytest.raises(CommandError, match=r"^--limit must be 1 or more\.$"):
        brain("log", "--limit", limit)


def test_an_empty_log_says_so(home):
    assert brain("log") == "Nothing has changed yet.\n"


def test_undo_reverts_exactly_that_change_and_logs_it(home):
    _filed("The loft is warm.")
    _filed("Sarah is a light sleeper.")

    out = brain("undo", "1")

    assert out == "#3  Undid change #1: Added under Rooms: “The loft is warm.”\n"
    assert "The loft is warm." not in _document(home)
    assert "- Sarah is a light sleeper." in _document(home)
    assert brain("log").splitlines()[2].endswith("(undone)")


def test_undo_refuses_an_unknown_or_already_undone_change(home):
    _filed("The loft is warm.")
    brain("undo", "1")
    before = _counts(home)

    with pytest.raises(CommandError, match=r"^There is no change #99 in the log of Home\.$"):
        brain("undo", "99")
    with pytest.raises(CommandError, match=r"^Change #1 was already undone by change #2\.$"):
        brain("undo", "1")

    assert _counts(home) == before


def test_forget_queues_a_removal_that_the_next_pass_applies(home):
    _filed("The loft is warm.", "Sarah is a light sleeper.")

    out = brain("forget", "The loft is warm")

    item = InboxItem.objects.get(action="forget")
    loft = Fact.objects.get(text="The loft is warm.")
    assert out == (
        f"Queued #{item.pk} for removal: The loft is warm\n"
        f"Forgotten now, everywhere: fact #{loft.pk} “The loft is warm.” is no longer believed.\n"
    )
    assert loft.status == "forgotten"  # believed no more at once, everywhere
    assert "The loft is warm." in _document(home)  # the line goes at the next pass

    assert brain("consolidate") == "Filed 1 item. Lines 1 removed.\n"
    assert "loft" not in _document(home)
    assert "- Sarah is a light sleeper." in _document(home)


# edit, clear ----------------------------------------------------------------------------------


@pytest.fixture
def editor(monkeypatch, tmp_path):
    """Point $EDITOR at a script that appends ``line`` to the file it is given; edits are
    written under tmp_path."""
    script = tmp_path / "append.py"
    script.write_text(
        "import sys\nwith open(sys.argv[2], 'a') as f:\n    f.write(sys.argv[1] + '\\n')\n"
    )
    edits = tmp_path / "edits"
    edits.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(edits))
    monkeypatch.delenv("VISUAL", raising=False)

    def appending(line: str) -> Path:
        monkeypatch.setenv("EDITOR", f"{sys.executable} {script} '{line}'")
        return edits

    return appending


def test_edit_saves_what_the_editor_wrote_as_your_edit(home, editor):
    edits = editor("- The boiler is in the cellar.")

    out = brain("edit")

    assert out == "#1  You edited the document: added “The boiler is in the cellar.”\n"
    assert _document(home) == EDITED
    assert DocumentRevision.objects.current(home).kind == "edit"
    assert list(edits.iterdir()) == []  # the temporary file is gone once saved


def test_edit_over_the_cap_is_refused_naming_the_limit_and_keeps_your_text(home, editor):
    home.memory_max_kb = 1
    home.save(update_fields=["memory_max_kb"])
    long_line = "- " + "The boiler is in the cellar. " * 40
    editor(long_line)

    with pytest.raises(CommandError) as refused:
        brain("edit")

    message = str(refused.value)
    assert "over its limit of 1 KB (1,024 bytes). Nothing was saved" in message
    kept = Path(re.search(r"Your text is kept in (\S+\.md)\.$", message).group(1))
    assert kept.read_text() == document.TEMPLATE + long_line + "\n"
    assert _document(home) == document.TEMPLATE
    assert not DocumentRevision.objects.exists()


def test_edit_saves_nothing_when_the_editor_fails(home, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "false")

    with pytest.raises(CommandError, match="false exited with an error; nothing was saved"):
        brain("edit")

    assert not DocumentRevision.objects.exists()


def test_edit_with_an_editor_that_is_not_installed_says_so_in_one_line(home, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "no-such-editor --wait")

    with pytest.raises(CommandError) as refused:
        brain("edit")

    assert str(refused.value) == (
        "Cannot start the editor 'no-such-editor --wait' (No such file or directory): set "
        "$EDITOR or $VISUAL. Nothing was saved."
    )
    assert list(tmp_path.iterdir()) == []
    assert not DocumentRevision.objects.exists()


def test_edit_that_changes_nothing_says_so(home, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "true")

    assert brain("edit") == "No changes.\n"
    assert not DocumentRevision.objects.exists()


def test_clear_without_confirm_refuses_and_keeps_the_document(home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)

    with pytest.raises(CommandError, match="run it again with --confirm"):
        brain("clear")

    assert _document(home) == EDITED


def test_clear_keeps_the_old_document_as_a_revision_and_undo_brings_it_back(home):
    revisions.save_user_edit(memory=home, text=EDITED, base_generation=0)

    out = brain("clear", "--confirm")

    assert out == "#2  Cleared the memory document (the old one is kept as revision 1)\n"
    assert brain("list") == document.TEMPLATE
    assert DocumentRevision.objects.get(memory=home, generation=1).text == EDITED

    assert brain("undo", "2").startswith("#3  Undid change #2: Cleared the memory document")
    assert brain("list") == EDITED


def test_clearing_an_empty_memory_says_so(home):
    assert brain("clear", "--confirm") == "The memory document was already empty.\n"
    assert not Change.objects.exists()


# export, import -------------------------------------------------------------------------------


@pytest.fixture
def other(db) -> Memory:
    return Memory.objects.create(slug="other", name="Other")


@pytest.fixture
def exported(home, tmp_path) -> Path:
    """Home with one fact filed and one waiting, exported to a file."""
    _filed("The loft is warm.")
    brain("add", "Sarah is a light sleeper.")
    path = tmp_path / "home.json"
    assert brain("export", str(path)) == f"Exported Home to {path}.\n"
    return path


def test_export_writes_one_file_with_the_document_voice_inbox_and_log(home, exported):
    data = json.loads(exported.read_text())

    assert (data["format"], data["version"]) == ("brain-export", 1)
    assert data["document"]["text"] == _document(home)
    assert data["document"]["voice"] == "- The loft is warm.\n"
    assert [(e["text"], e["state"], e["origin"]) for e in data["inbox"]] == [
        ("The loft is warm.", "filed", "terminal"),
        ("Sarah is a light sleeper.", "pending", "terminal"),
    ]
    assert [c["summary"] for c in data["changes"]] == ["Added under Rooms: “The loft is warm.”"]


def test_export_without_a_file_prints_the_same_json(home, exported):
    printed = json.loads(brain("export"))
    written = json.loads(exported.read_text())

    del printed["exported_at"], written["exported_at"]
    assert printed == written


def test_import_into_a_fresh_memory_brings_everything_and_twice_changes_nothing(
    home, exported, other
):
    out = brain("--memory", "other", "import", str(exported))

    assert out.splitlines()[-4:] == [
        "Change log: 1 added, 0 already here.",
        "Document: imported.",
        "Inbox: 2 added, 0 already here.",
        "Timeline: 2 added, 0 already here.",  # what brain learned, one event a fact
    ]
    assert _document(other) == _document(home)
    assert brain("--memory", "other", "inbox").splitlines()[-1] == "1 waiting to be filed."
    after_first = _counts(other)

    out = brain("--memory", "other", "import", str(exported))

    assert out.splitlines()[-4:] == [
        "Change log: 0 added, 1 already here.",
        "Document: unchanged.",
        "Inbox: 0 added, 2 already here.",
        "Timeline: 0 added, 2 already here.",
    ]
    assert "Facts: 0 added," in out
    assert _counts(other) == after_first


def test_import_keeps_a_document_with_content_unless_told_to_replace_it(home, exported, other):
    mine = document.TEMPLATE + "- The boiler is in the cellar.\n"
    revisions.save_user_edit(memory=other, text=mine, base_generation=0)

    out = brain("--memory", "other", "import", str(exported))

    assert "Document: kept yours (it is not empty); pass --replace-memory" in out
    assert _document(other) == mine

    out = brain("--memory", "other", "import", str(exported), "--replace-memory")

    assert "Document: imported." in out
    assert _document(other) == _document(home)
    assert DocumentRevision.objects.filter(memory=other, text=mine).exists()


def _broken(exported: Path, change) -> Path:
    data = json.loads(exported.read_text())
    change(data)
    exported.write_text(json.dumps(data))
    return exported


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda path: path.write_text('{"format": "brain-export", '), "it is not valid JSON"),
        (
            lambda path: _broken(path, lambda data: data.update(format="backup")),
            "This is not a brain export: its \"format\" is not 'brain-export'.",
        ),
        (
            lambda path: _broken(path, lambda data: data.update(version=2)),
            "This export is version 2; this brain reads version 1.",
        ),
        (
            lambda path: _broken(path, lambda data: data["inbox"][1].update(origin="fax")),
            "inbox entry 2 has an unknown origin 'fax': use one of insight, voice, chat",
        ),
        (
            lambda path: path.unlink(),
            "No such file or directory",
        ),
    ],
    ids=["malformed JSON", "wrong format", "wrong version", "bad origin", "missing file"],
)
def test_import_of_a_bad_file_names_the_problem_and_imports_nothing(
    home, exported, other, spoil, message
):
    spoil(exported)

    with pytest.raises(CommandError) as refused:
        brain("--memory", "other", "import", str(exported))

    assert message in str(refused.value)
    assert "\n" not in str(refused.value)
    assert _counts(other) == (0, 0, 0)


# The wrapper script, as a person runs it ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_brain_wrapper_adds_and_lists_from_a_real_shell():
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(WRAPPER), "memory", *args], env=env, capture_output=True, text=True, timeout=60
        )

    added = run("add", "The loft is warm", "--confidence", "high")
    assert added.returncode == 0, added.stderr
    assert re.fullmatch(r"Queued #\d+: The loft is warm\n", added.stdout)

    listed = run("inbox")
    assert listed.returncode == 0, listed.stderr
    assert "The loft is warm  (from the terminal, high)" in listed.stdout
    assert listed.stdout.endswith("1 waiting to be filed.\n")

    refused = run("add", "")
    assert refused.returncode != 0
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "CommandError: A fact can't be empty: say what brain should remember."
    ]
    assert InboxItem.objects.count() == 1
