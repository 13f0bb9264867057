"""The facts store in the export file: what it carries to another memory, and what a bad entry
changes (nothing)."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from knowledge import actions as knowledge_actions
from knowledge import passages, reembedding
from knowledge import portable as knowledge_portable
from knowledge.embedding import HashEmbedder, get_embedder
from knowledge.models import Fact, Memory, Source, Subject
from knowledge.read_layer import SYSTEM
from memory.models import InboxItem
from surfaces import portable

MINILM = "minilm-int8-v1"


@pytest.fixture
def other(db) -> Memory:
    return Memory.objects.create(slug="other", name="Other")


@pytest.fixture
def taught_home(home, alice):
    """Home with a room, a device in it, a device the house lost and a person, and facts about
    them: a thermostat setting superseded twice, a quirk with outcomes, a failure, a health note
    and a forgotten fact. Every vector is from an embedder this install does not use."""
    office = Subject.objects.create(memory=home, kind="room", name="Office", aliases=["the study"])
    lamp = Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id="light.office_lamp",
        room=office,
        aliases=["the beacon"],
    )
    kettle = Subject.objects.create(
        memory=home, kind="device", name="Kettle", entity_id="switch.kettle"
    )
    sarah = Subject.objects.create(memory=home, kind="person", name="Sarah")
    chat = Source.objects.create(
        memory=home, kind="conversation", title="Kitchen chat", reference="conv-1", text="…"
    )
    start = timezone.now() - timedelta(days=40)

    def teach(text: str, day: int, **options) -> Fact:
        fact = knowledge_actions.file_fact(
            memory=home,
            text=text,
            channel=options.pop("channel", "typed"),
            kind=options.pop("kind", "note"),
            by=alice,
            **options,
        )
        taught = start + timedelta(days=day)
        Fact.objects.filter(pk=fact.pk).update(created_at=taught, valid_from=taught)
        fact.refresh_from_db()
        return fact

    nineteen = teach("The thermostat is set to 19 degrees", 0, subjects=[office])
    twenty = teach("The thermostat is set to 20 degrees", 10, subjects=[office], source=chat)
    twenty_one = teach(
        "The thermostat is set to 21 degrees", 20, subjects=[office], source=chat, channel="voice"
    )
    knowledge_actions.supersede(old=nineteen, new=twenty)
    knowledge_actions.supersede(old=twenty, new=twenty_one)
    beacon = teach(
        "The beacon on means someone is working",
        5,
        subjects=[lamp],
        kind="quirk",
        confidence="high",
    )
    for success in (True, True, False):
        knowledge_actions.record_outcome(fact=beacon, success=success)
    teach("Boiling the kettle twice trips the fuse", 8, subjects=[kettle], outcome=False)
    teach("Sarah is a light sleeper", 12, subjects=[sarah, office], kind="health_note")
    cat = teach("The cat is called Miso", 15)
    Fact.objects.filter(pk__in=[cat.pk, beacon.pk]).update(status="filed", in_document=True)
    knowledge_actions.forget_fact(fact=cat, reason="no cat lives here")
    knowledge_actions.set_subject_presence(subject=kettle, present=False)
    Fact.objects.for_memory(home).update(embedding=[0.0] * 383 + [1.0], embedder=MINILM)
    return home


def _facts(memory: Memory) -> list[tuple]:
    """Everything a fact row says, with its links written as the texts they point at."""
    facts = (
        Fact.objects.for_memory(memory)
        .select_related("source", "superseded_by")
        .prefetch_related("subjects")
    )
    return sorted(
        (
            (
                fact.text,
                fact.normalized,
                fact.kind,
                fact.valence,
                fact.outcome,
                fact.channel,
                fact.taught_by_name,
                (fact.source.kind, fact.source.title, fact.source.reference, fact.source.text)
                if fact.source
                else None,
                fact.confidence,
                fact.prior,
                fact.support,
                fact.successes,
                fact.failures,
                fact.valid_from,
                fact.valid_to,
                fact.superseded_by.text if fact.superseded_by else None,
                fact.expires_at,
                fact.status,
                fact.forgotten_at,
                fact.forgotten_reason,
                fact.subject_removed,
                fact.in_document,
                sorted(subject.name for subject in fact.subjects.all()),
                fact.created_at,
            )
            for fact in facts
        ),
        key=lambda row: row[0],
    )


def _subjects(memory: Memory) -> list[tuple]:
    return sorted(
        (s.kind, s.name, s.entity_id, s.room.name if s.room else None, s.aliases, s.present)
        for s in Subject.objects.for_memory(memory).select_related("room")
    )


def _state(memory: Memory) -> tuple:
    links = Fact.subjects.through.objects.filter(fact__memory=memory).count()
    sources = Source.objects.filter(memory=memory).count()
    return (_facts(memory), _subjects(memory), sources, links)


def _texts(facts) -> set[str]:
    return set(facts.values_list("text", flat=True))


def _round_trip(source: Memory) -> dict:
    return portable.parse(portable.export_json(source, reader=SYSTEM))


def _entry(data: dict, text: str) -> dict:
    return next(entry for entry in data["facts"] if entry["text"] == text)


def test_facts_with_their_subjects_history_and_outcomes_reach_another_memory(taught_home, other):
    portable.import_memory(other, _round_trip(taught_home))

    assert _facts(other) == _facts(taught_home)
    assert _subjects(other) == _subjects(taught_home)
    start = Fact.objects.for_memory(taught_home).order_by("created_at").first().created_at
    for day in (-1, 1, 11, 16, 21, 60):
        moment = start + timedelta(days=day)
        assert _texts(Fact.objects.for_memory(other).as_of(moment)) == _texts(
            Fact.objects.for_memory(taught_home).as_of(moment)
        ), f"as of day {day}"
    assert _texts(Fact.objects.for_memory(other).live()) == {
        "The thermostat is set to 21 degrees",
        "The beacon on means someone is working",
        "Sarah is a light sleeper",
    }
    beacon = Fact.objects.for_memory(other).get(text__startswith="The beacon")
    assert (beacon.successes, beacon.failures, beacon.prior, beacon.confidence) == (2, 1, 0.8, 0.72)
    # One row, as at home, for the two facts citing it (besides where lines taught with no
    # source keep their passages).
    chat = Source.objects.filter(memory=other).exclude(reference=passages.LINES_REFERENCE).get()
    assert _texts(chat.facts) == {
        "The thermostat is set to 20 degrees",
        "The thermostat is set to 21 degrees",
    }


def test_imported_facts_get_vectors_from_the_current_embedder_in_the_background(
    taught_home, other, monkeypatch
):
    sent = []
    monkeypatch.setattr(knowledge_portable, "send_on_commit", lambda name, *args: sent.append(name))
    report = portable.import_memory(other, _round_trip(taught_home))

    assert sent == ["knowledge.tasks.reembed_facts"]
    assert any("computed in the background" in line for line in report)
    assert not Fact.objects.for_memory(other).filter(embedding__isnull=False).exists()
    reembedding.reembed_stale()
    embedder = get_embedder()
    assert embedder.name == HashEmbedder.name != MINILM
    for fact in Fact.objects.for_memory(other):
        assert fact.embedder == embedder.name
        assert list(fact.embedding) == pytest.approx(embedder.embed_one(fact.text), abs=1e-6)


def test_the_export_names_subjects_and_successors_not_database_ids(taught_home):
    data = _round_trip(taught_home)

    nineteen = _entry(data, "The thermostat is set to 19 degrees")
    twenty = _entry(data, "The thermostat is set to 20 degrees")
    beacon = _entry(data, "The beacon on means someone is working")
    assert nineteen["superseded_by"] == twenty["uid"]
    assert beacon["subjects"] == [
        {"kind": "device", "name": "Office lamp", "entity_id": "light.office_lamp"}
    ]
    assert "embedding" not in beacon and "id" not in beacon
    assert {s["name"]: s["room"] for s in data["subjects"]}["Office lamp"] == "Office"


def test_importing_the_same_file_twice_changes_nothing_the_second_time(taught_home, other, caplog):
    data = _round_trip(taught_home)
    portable.import_memory(other, data)
    after_first = _state(other)

    report = portable.import_memory(other, data)

    assert _state(other) == after_first
    assert "Facts: 0 added, 7 already here." in report
    assert "Subjects: 0 added, 4 already here." in report


def test_importing_an_export_into_its_own_memory_changes_nothing(taught_home):
    before = _state(taught_home)

    portable.import_memory(taught_home, _round_trip(taught_home))

    assert _state(taught_home) == before


def test_an_entry_whose_uid_is_already_here_is_kept_as_it_is_here(taught_home):
    data = _round_trip(taught_home)
    _entry(data, "The cat is called Miso")["text"] = "The cat is called Tom"
    _entry(data, "The cat is called Tom")["status"] = "filed"
    before = _state(taught_home)

    portable.import_memory(taught_home, portable.parse(json.dumps(data)))

    assert _state(taught_home) == before


def test_subjects_this_memory_already_knows_win_and_their_facts_follow_them(taught_home, other):
    desk = Subject.objects.create(
        memory=other, kind="device", name="Desk lamp", entity_id="light.office_lamp", present=False
    )

    portable.import_memory(other, _round_trip(taught_home))

    desk.refresh_from_db()
    assert (desk.name, desk.present, desk.room) == ("Desk lamp", False, None)
    assert not Subject.objects.filter(memory=other, name="Office lamp").exists()
    beacon = Fact.objects.for_memory(other).get(text__startswith="The beacon")
    assert list(beacon.subjects.all()) == [desk]
    assert beacon.subject_removed  # the lamp is gone from this house, so its fact rests


def _spoil_fact(text: str, name: str, value):
    """Set the field ``name`` of the exported fact saying ``text``; a callable value is called
    with the whole export."""

    def spoil(data: dict) -> None:
        _entry(data, text)[name] = value(data) if callable(value) else value

    return spoil


def _spoil_subject(index: int, name: str, value):
    def spoil(data: dict) -> None:
        data["subjects"][index][name] = value

    return spoil


NINETEEN = "The thermostat is set to 19 degrees"
BEACON = "The beacon on means someone is working"
# Facts are exported in the order they were taught: 19 degrees first, the beacon second.
BAD_ENTRIES = [
    pytest.param(
        _spoil_fact(NINETEEN, "uid", "not-a-uuid"), "facts entry 1 has an invalid uid", id="bad uid"
    ),
    pytest.param(
        _spoil_fact(BEACON, "kind", "rumour"),
        "facts entry 2 has an unknown kind 'rumour': use one of note, preference",
        id="bad kind",
    ),
    pytest.param(
        _spoil_fact(BEACON, "status", "maybe"),
        "facts entry 2 has an unknown status 'maybe'",
        id="bad status",
    ),
    pytest.param(
        _spoil_fact(NINETEEN, "valid_from", "last tuesday"),
        'facts entry 1 has an invalid "valid_from" (a date and time)',
        id="valid_from not a date",
    ),
    pytest.param(
        _spoil_fact(NINETEEN, "valid_to", "2025-13-45T10:00:00+00:00"),
        'facts entry 1 has an invalid "valid_to" (a date and time, or null)',
        id="valid_to in month 13",
    ),
    pytest.param(
        _spoil_fact(BEACON, "created_at", None),
        'facts entry 2 has an invalid "created_at" (a date and time)',
        id="created_at null",
    ),
    pytest.param(
        _spoil_fact(NINETEEN, "superseded_by", "5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11"),
        "facts entry 1 is superseded by '5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11', a fact the "
        "file does not hold",
        id="unknown successor",
    ),
    pytest.param(
        _spoil_fact(
            "The thermostat is set to 21 degrees",
            "superseded_by",
            lambda data: _entry(data, NINETEEN)["uid"],
        ),
        "through its successors, superseded by itself",
        id="successors in a circle",
    ),
    pytest.param(
        _spoil_fact(BEACON, "confidence", 1.5),
        'facts entry 2 has an invalid "confidence" (a number from 0 to 1)',
        id="confidence over 1",
    ),
    pytest.param(
        _spoil_fact(BEACON, "subjects", [{"kind": "planet", "name": "Mars"}]),
        "facts entry 2 names a subject by neither an entity id nor a kind and name",
        id="bad subject reference",
    ),
    pytest.param(
        _spoil_subject(0, "kind", "garage"),
        "subjects entry 1 has an unknown kind 'garage'",
        id="bad subject kind",
    ),
    pytest.param(
        _spoil_subject(1, "room", "Loft"),
        "subjects entry 2 is in the room 'Loft', which no entry names",
        id="unknown room",
    ),
    pytest.param(
        lambda data: data["inbox"].append(
            {
                "uid": "0b1e3c4d-5a6f-4e7d-8c9b-a0b1c2d3e4f5",
                "text": "The porch light is on a timer",
                "origin": "typed",
                "confidence": "medium",
                "created_at": "2026-01-02T10:00:00+00:00",
                "state": "pending",
                "fact": "the porch one",
            }
        ),
        'inbox entry 1 has an invalid "fact" (a uid, or null)',
        id="candidate's fact not a uid",
    ),
    pytest.param(
        lambda data: data.update(subjects=[s for s in data["subjects"] if s["name"] != "Kettle"]),
        "is about switch.kettle, which neither the file's subjects nor Other has",
        id="subject nowhere",
    ),
]


@pytest.mark.parametrize(("spoil", "message"), BAD_ENTRIES)
def test_a_bad_entry_is_refused_naming_it_and_nothing_is_imported(
    taught_home, other, spoil, message
):
    data = json.loads(portable.export_json(taught_home, reader=SYSTEM))
    spoil(data)
    before = (_state(other), InboxItem.objects.for_memory(other).count())

    with pytest.raises(portable.ImportRejected) as rejected:
        portable.import_memory(other, portable.parse(json.dumps(data)))

    assert message in str(rejected.value)
    assert (_state(other), InboxItem.objects.for_memory(other).count()) == before


def _cli(*args: str) -> str:
    out = io.StringIO()
    call_command("memory", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_cli_round_trip_carries_the_facts_and_a_waiting_candidate_still_files_its_fact(
    taught_home, other, tmp_path
):
    _cli("add", "The porch light is on a timer")
    path = tmp_path / "home.json"
    _cli("export", str(path))

    _cli("--memory", "other", "import", str(path))

    assert _facts(other) == _facts(taught_home)
    waiting = InboxItem.objects.for_memory(other).get(state="pending")
    assert (waiting.fact.memory, waiting.fact.text) == (other, "The porch light is on a timer")
    assert waiting.fact.uid != InboxItem.objects.for_memory(taught_home).get().fact.uid

    _cli("--memory", "other", "consolidate")

    waiting.fact.refresh_from_db()
    assert waiting.fact.status == "filed"
    assert Fact.objects.for_memory(other).count() == 8


def test_imported_facts_arrive_with_their_label_sets_so_citing_them_rewrites_no_row(
    taught_home, other
):
    """Each fact takes its passage's label set as it is written (passages.lines_for): the
    database's trigger, which works the sets out when the citations are written, finds them
    already there. Updates counted in this transaction: successors are linked after, one each."""
    from django.db import connection

    def updated() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_get_xact_tuples_updated('knowledge_fact'::regclass)")
            return cursor.fetchone()[0]

    data = _round_trip(taught_home)
    before = updated()
    portable.import_memory(other, data)

    successors = Fact.objects.for_memory(other).exclude(superseded_by=None).count()
    assert updated() - before == successors
    for fact in Fact.objects.for_memory(other):
        assert fact.label_sets == sorted({p.label_set_id or 0 for p in fact.passages.all()})
