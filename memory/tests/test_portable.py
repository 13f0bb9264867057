"""Export and import at the function level: what a file carries, and what a bad file changes."""

import copy
import json
import uuid

import pytest
from django.core.exceptions import ValidationError

from knowledge.models import Memory
from knowledge.read_layer import SYSTEM
from memory import actions, consolidator, document, revisions
from memory.composers.base import Composition
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin
from surfaces import portable

TAUGHT = document.TEMPLATE.replace("## Rooms\n", "## Rooms\n\n- The loft is warm.\n")
VOICE = "- The loft: warm (as the composer put it)\n"


@pytest.fixture
def other(db) -> Memory:
    return Memory.objects.create(slug="other", name="Other")


@pytest.fixture
def taught_home(home, alice, admin_user, scripted):
    """Home after one filed pass (with a voice the composer wrote), one fact still waiting and
    one dropped."""
    actions.add_to_inbox(
        memory=home, text="The loft is warm.", origin=Origin.VOICE, confidence="high", by=alice
    )
    scripted(Composition(document=TAUGHT, voice=VOICE))
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)
    run = ConsolidationRun.objects.get(pk=request.run.pk)
    assert run.state == "filed", run.reason
    actions.add_to_inbox(
        memory=home,
        text="Sarah is a light sleeper.",
        origin=Origin.TYPED,
        confidence="low",
        by=admin_user,
    )
    dropped = actions.add_to_inbox(memory=home, text="The shed is cold.", origin=Origin.CHAT)
    actions.drop_inbox_item(item=dropped)
    return home


def _memory_lines(report: list[str]) -> list[str]:
    """The report's lines for this app's sections (the facts store reports its own)."""
    return [line for line in report if line.split(":")[0] in ("Change log", "Document", "Inbox")]


def _inbox(memory: Memory) -> list[tuple]:
    return list(
        InboxItem.objects.for_memory(memory)
        .in_filing_order()
        .values_list("text", "state", "origin", "confidence", "taught_by_name")
    )


def _log(memory: Memory) -> list[str]:
    return list(
        Change.objects.for_memory(memory).order_by("number").values_list("summary", flat=True)
    )


def _snapshot(memory: Memory) -> tuple:
    current = DocumentRevision.objects.current(memory)
    return (current.generation, current.text, _inbox(memory), _log(memory))


def _round_trip(source: Memory) -> dict:
    return portable.parse(portable.export_json(source, reader=SYSTEM))


def test_an_export_carries_the_document_voice_inbox_and_log_into_another_memory(taught_home, other):
    report = _memory_lines(portable.import_memory(other, _round_trip(taught_home)))

    current = DocumentRevision.objects.current(other)
    assert current.text == TAUGHT
    assert current.voice == VOICE
    assert _inbox(other) == [
        ("The loft is warm.", "filed", "voice", "high", "alice"),
        ("Sarah is a light sleeper.", "pending", "typed", "low", "ada"),
        ("The shed is cold.", "dropped", "chat", "medium", ""),
    ]
    assert _log(other) == [
        "Added under Rooms: “The loft is warm.”",
        "Imported the memory document from an export",
    ]
    assert report == [
        "Change log: 1 added, 0 already here.",
        "Document: imported.",
        "Inbox: 3 added, 0 already here.",
    ]
    assert _inbox(taught_home) == _inbox(other)  # the source memory keeps its own


def test_importing_the_same_file_twice_changes_nothing_the_second_time(taught_home, other):
    data = _round_trip(taught_home)
    portable.import_memory(other, data)
    after_first = _snapshot(other)

    report = _memory_lines(portable.import_memory(other, data))

    assert _snapshot(other) == after_first
    assert report == [
        "Change log: 0 added, 1 already here.",
        "Document: unchanged.",
        "Inbox: 0 added, 3 already here.",
    ]


def test_importing_an_export_into_its_own_memory_changes_nothing(taught_home):
    before = _snapshot(taught_home)

    portable.import_memory(taught_home, _round_trip(taught_home))

    assert _snapshot(taught_home) == before


def test_a_document_with_content_is_kept_unless_replacing_is_asked_for(taught_home, other):
    mine = "# Memory\n\n## House\n\n- The boiler is in the cellar.\n"
    revisions.save_user_edit(memory=other, text=mine, base_generation=0)
    data = _round_trip(taught_home)

    report = _memory_lines(portable.import_memory(other, data))

    assert DocumentRevision.objects.current(other).text == mine
    assert "Document: kept yours (it is not empty); pass --replace-memory" in report[1]

    portable.import_memory(other, data, replace_memory=True)

    assert DocumentRevision.objects.current(other).text == TAUGHT
    assert DocumentRevision.objects.filter(memory=other, text=mine).exists()  # kept as revision
    assert _log(other)[-1] == "Imported the memory document from an export"


def test_an_empty_imported_document_never_replaces_one_with_content(taught_home, other):
    data = _round_trip(other)  # a fresh memory: the template, headings only

    report = _memory_lines(portable.import_memory(taught_home, data, replace_memory=True))

    assert DocumentRevision.objects.current(taught_home).text == TAUGHT
    assert report[1] == "Document: unchanged."


def _valid(taught_home) -> dict:
    return json.loads(portable.export_json(taught_home, reader=SYSTEM))


def _with(data: dict, path: tuple, value) -> str:
    changed = copy.deepcopy(data)
    target = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(changed)


BAD_FILES = [
    pytest.param(lambda data: b'{"format": "brain-export",', "it is not valid JSON", id="not JSON"),
    pytest.param(lambda data: json.dumps([data]), "This is not a brain export", id="a list"),
    pytest.param(
        lambda data: _with(data, ("format",), "notes-export"),
        "its \"format\" is not 'brain-export'",
        id="wrong format",
    ),
    pytest.param(
        lambda data: _with(data, ("version",), 2),
        "This export is version 2; this brain reads version 1",
        id="version 2",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 0, "uid"), "not-a-uuid"),
        "inbox entry 1 has an invalid uid",
        id="bad uid",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 1, "created_at"), "last tuesday"),
        'inbox entry 2 has an invalid "created_at" (a date and time)',
        id="created_at not a date",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 1, "created_at"), "2025-13-45T10:00:00+00:00"),
        'inbox entry 2 has an invalid "created_at" (a date and time)',
        id="created_at in month 13",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 2, "origin"), "carrier pigeon"),
        "inbox entry 3 has an unknown origin 'carrier pigeon'",
        id="bad origin",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 0, "text"), "x" * 1001),
        'inbox entry 1 has an invalid "text" (text, not empty, at most 1,000 characters)',
        id="over-long fact",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 0, "taught_by"), None),
        'inbox entry 1 has an invalid "taught_by"',
        id="taught_by null",
    ),
    pytest.param(
        lambda data: _with(data, ("inbox", 1, "uid"), data["inbox"][0]["uid"]),
        "inbox entry 2 repeats the uid of an earlier entry",
        id="repeated uid",
    ),
    pytest.param(
        lambda data: _with(data, ("changes", 0, "operations"), [{"op": "move", "line": "x"}]),
        "changes entry 1 has an invalid operation",
        id="invalid operation",
    ),
    pytest.param(
        lambda data: _with(data, ("changes", 0, "author"), 7),
        'changes entry 1 has an invalid "author"',
        id="author a number",
    ),
    pytest.param(
        lambda data: _with(data, ("document", "voice"), "x" * 2049),
        "voice distillate is 2,049 bytes; the limit is 2,048",
        id="voice over 2 KB",
    ),
]


@pytest.mark.parametrize(("make", "message"), BAD_FILES)
def test_a_bad_file_is_rejected_naming_the_problem_and_imports_nothing(
    taught_home, other, make, message
):
    before = _snapshot(other)

    with pytest.raises(portable.ImportRejected) as rejected:
        portable.import_memory(other, portable.parse(make(_valid(taught_home))))

    assert message in str(rejected.value)
    assert _snapshot(other) == before


def test_a_document_over_the_target_cap_imports_nothing_at_all(taught_home, other):
    other.memory_max_kb = 1
    other.save(update_fields=["memory_max_kb"])
    data = _valid(taught_home)
    data["document"]["text"] = TAUGHT + "".join(
        f"- Fact number {n} about the house.\n" for n in range(60)
    )
    before = _snapshot(other)

    with pytest.raises(ValidationError, match="over its limit of 1 KB "):
        portable.import_memory(other, portable.parse(json.dumps(data)))

    # The change log section is loaded before the document: it was rolled back with it.
    assert _snapshot(other) == before
    assert not Change.objects.for_memory(other).exists()


def test_a_hand_written_entry_with_a_fresh_uid_is_added(taught_home):
    data = _valid(taught_home)
    entry = {**data["inbox"][1], "uid": str(uuid.uuid4()), "text": "The cat is called Miso."}
    data["inbox"].append(entry)

    report = _memory_lines(portable.import_memory(taught_home, portable.parse(json.dumps(data))))

    assert report[2] == "Inbox: 1 added, 3 already here."
    assert (
        InboxItem.objects.for_memory(taught_home)
        .pending()
        .filter(text="The cat is called Miso.")
        .exists()
    )


def test_a_file_holding_a_nul_character_is_refused_before_anything_is_written(home):
    raw = json.dumps(portable.export_memory(home, reader=SYSTEM)).replace(
        '"format"', '"note": "bad\\u0000byte", "format"', 1
    )

    with pytest.raises(portable.ImportRejected, match="NUL character"):
        portable.parse(raw)
