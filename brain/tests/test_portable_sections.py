"""Export files keep working: a file written by an earlier brain imports with the result it gave
then.

``fixtures/export-2026-11.json`` was exported in November 2026 (see ``fixtures/export_2026_11.py``)
and ``fixtures/export-2026-11.imported.json`` is what importing it into an empty memory gave with
that code: every row, with its links written as the uids, names and texts they point at.
"""

import json
from pathlib import Path

import pytest

from agent import actions as agent_actions
from brain.portable import Entry, ImportRejected, Section, export_context
from brain.tests.fixtures.export_2026_11 import build
from knowledge.models import (
    Conflict,
    Episode,
    Fact,
    Membership,
    Memory,
    Observation,
    Permission,
    Procedure,
    Source,
    Subject,
)
from knowledge.read_layer import SYSTEM
from memory.models import Change, DocumentRevision, InboxItem
from review.models import Event, Finding, Guess, Judgement, Rule
from surfaces import portable

FIXTURES = Path(__file__).parent / "fixtures"
NOVEMBER_2026 = FIXTURES / "export-2026-11.json"


def _iso(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


def imported(memory: Memory) -> dict:
    """Everything an import wrote into ``memory``, as plain JSON values, in a stable order."""
    revision = DocumentRevision.objects.current(memory)
    return {
        "subjects": [
            [
                s.kind,
                s.name,
                s.entity_id,
                s.room.name if s.room else None,
                s.aliases,
                s.present,
                _iso(s.removed_at),
            ]
            for s in Subject.objects.for_memory(memory).select_related("room").order_by("name")
        ],
        "sources": [
            [s.kind, s.title, s.reference, s.text, _iso(s.created_at)]
            for s in Source.objects.filter(memory=memory).order_by("title", "created_at")
        ],
        "facts": [
            [
                str(f.uid),
                f.text,
                f.normalized,
                f.kind,
                f.valence,
                f.outcome,
                f.channel,
                f.taught_by_name,
                f.source.title if f.source else None,
                f.confidence,
                f.prior,
                f.support,
                f.successes,
                f.failures,
                _iso(f.valid_from),
                _iso(f.valid_to),
                str(f.superseded_by.uid) if f.superseded_by else None,
                _iso(f.expires_at),
                f.status,
                _iso(f.forgotten_at),
                f.forgotten_reason,
                f.subject_removed,
                f.in_document,
                sorted(s.name for s in f.subjects.all()),
                _iso(f.created_at),
            ]
            for f in Fact.objects.for_memory(memory)
            .select_related("source", "superseded_by")
            .prefetch_related("subjects")
            .order_by("uid")
        ],
        "document": [revision.generation, revision.kind, revision.text, revision.voice],
        "changes": [
            [c.number, c.source, c.summary, c.operations, c.author_name, _iso(c.created_at)]
            for c in Change.objects.for_memory(memory).order_by("number")
            if c.summary != "Imported the memory document from an export"
        ],
        "inbox": [
            [
                str(i.uid),
                i.text,
                i.action,
                i.origin,
                i.confidence,
                i.taught_by_name,
                _iso(i.created_at),
                i.state,
                str(i.fact.uid) if i.fact else None,
            ]
            for i in InboxItem.objects.for_memory(memory).select_related("fact").order_by("uid")
        ],
        "findings": [
            [
                str(f.uid),
                f.check_id,
                f.entity_id,
                f.subject.name if f.subject else None,
                f.severity,
                f.text,
                f.is_todo,
                f.protected,
                f.state,
                f.settled_how,
                _iso(f.first_raised_at),
                _iso(f.last_raised_at),
                _iso(f.settled_at),
                _iso(f.suppressed_until),
                f.times_raised,
                f.reason,
            ]
            for f in Finding.objects.for_memory(memory).select_related("subject").order_by("uid")
        ],
        "rules": [
            [
                str(r.uid),
                r.check_id,
                r.scope,
                r.entity_id,
                r.subject.name if r.subject else None,
                r.room.name if r.room else None,
                _iso(r.until),
                r.reason,
                r.origin,
                str(r.finding.uid) if r.finding else None,
                _iso(r.created_at),
                _iso(r.removed_at),
            ]
            for r in Rule.objects.for_memory(memory)
            .select_related("subject", "room", "finding")
            .order_by("uid")
        ],
        "guesses": [
            [
                str(g.uid),
                g.text,
                g.normalized,
                g.state,
                _iso(g.created_at),
                _iso(g.answered_at),
                g.reason,
                g.embedder,
                g.embedding is not None,
            ]
            for g in Guess.objects.for_memory(memory).order_by("uid")
        ],
        "judgements": [
            [
                j.check_id,
                j.subject.entity_id if j.subject else None,
                j.raised,
                j.marked_not_a_problem,
                _iso(j.renewed_at),
                j.fact.text if j.fact else None,
            ]
            for j in Judgement.objects.filter(memory=memory)
            .select_related("subject", "fact")
            .order_by("check_id")
        ],
        "counts": {
            model.__name__: model.objects.filter(**{lookup: memory}).count()
            for model, lookup in (
                (Observation, "fact__memory"),
                (Conflict, "memory"),
                (Episode, "memory"),
                (Procedure, "memory"),
                (Membership, "memory"),
                (Event, "memory"),
                (DocumentRevision, "memory"),
            )
        },
        "core": memory.core,
    }


@pytest.fixture
def restored(db) -> Memory:
    return Memory.objects.create(slug="restored", name="Restored")


def test_a_file_exported_in_november_2026_imports_with_the_result_it_gave_then(restored):
    report = portable.import_memory(restored, portable.parse(NOVEMBER_2026.read_bytes()))

    assert report == [
        "Subjects: 8 added, 0 already here.",
        "Facts: 16 added, 0 already here.",
        # New since: vectors are computed after the import, not during it.
        "Vectors for the 16 new facts are being computed in the background; `brain reembed` "
        "does it now.",
        "Change log: 14 added, 0 already here.",
        "Document: imported.",
        "Inbox: 18 added, 0 already here.",
        "Findings: 6 added, 0 already here.",
        "Rules: 4 added, 0 already here.",
        "Answered guesses: 2 added, 0 already here.",
        "Judgements: 1 added, 0 already here.",
    ]
    expected = json.loads((FIXTURES / "export-2026-11.imported.json").read_text())
    result = json.loads(json.dumps(imported(restored)))
    for part in expected:
        assert result[part] == expected[part], part
    live = Fact.objects.for_memory(restored).live().values_list("text", flat=True)
    assert "The thermostat in the office is set to 21 degrees." in live
    assert "The thermostat in the office is set to 19 degrees." not in live


def test_the_november_2026_file_imported_twice_adds_nothing_the_second_time(restored):
    data = portable.parse(NOVEMBER_2026.read_bytes())
    portable.import_memory(restored, data)
    first = imported(restored)

    report = portable.import_memory(restored, data)

    assert imported(restored) == first
    assert all("0 added" in line or line == "Document: unchanged." for line in report), report


# Sections declared from their models -----------------------------------------------------------


class SourceEntry(Entry):
    class Meta(Entry.Meta):
        model = Source
        fields = ("kind", "title", "reference", "created_at")
        extra_kwargs = {"created_at": {"required": True}}


class SourcesSection(Section):
    """A section as an app would declare one: the columns, and nothing about their checks."""

    key = "sources"
    entries = SourceEntry

    def rows(self, memory, reader):
        return (
            Source.objects.as_system("the test section exports every source")
            .filter(memory=memory)
            .order_by("pk")
        )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"title": "x" * 301}, 'has an invalid "title" (text, not empty, at most 300 characters)'),
        ({"title": "  "}, 'sources entry 1 has an empty "title"'),
        ({"kind": "fax"}, "has an unknown kind 'fax': use one of conversation, typed, terminal"),
        ({"kind": None}, 'has an invalid "kind" (one of conversation'),
        ({"created_at": "2026-02-30T10:00:00"}, 'has an invalid "created_at" (a date and time)'),
        ({"reference": 7}, 'has an invalid "reference" (text, at most 300 characters)'),
    ],
)
def test_a_declared_section_takes_its_checks_from_the_model(entry, message):
    good = {"kind": "typed", "title": "Kitchen chat", "created_at": "2026-11-02T10:00:00+00:00"}

    with pytest.raises(ImportRejected) as refused:
        SourcesSection().check([{**good, **entry}])

    assert message in str(refused.value)


def test_a_column_the_file_leaves_out_takes_the_models_default_and_a_required_one_is_named():
    section = SourcesSection()
    entry = {"kind": "typed", "title": "Kitchen chat", "created_at": "2026-11-02T10:00:00+00:00"}

    section.check([entry])

    assert section.values(entry)["reference"] == ""  # the file predates the column
    with pytest.raises(ImportRejected, match='sources entry 1 has no "title"'):
        section.check([{"kind": "typed", "created_at": "2026-11-02T10:00:00+00:00"}])


def test_a_declared_section_writes_each_column_once_under_its_key(db):
    memory = Memory.objects.create(slug="sources", name="Sources")
    Source.objects.create(memory=memory, kind="typed", title="Kitchen chat")

    [entry] = SourcesSection().dump(memory, export_context(SYSTEM))

    assert set(entry) == {"kind", "title", "reference", "created_at"}
    assert entry["created_at"] == Source.objects.get().created_at.isoformat()


# The whole memory, agent memory and grants included ---------------------------------------------


@pytest.fixture(autouse=True)
def offline(settings):
    settings.ANTHROPIC_API_KEY = ""
    settings.HA_URL = ""


@pytest.fixture
def lived_in(db, alice, admin_user) -> Memory:
    return build(Memory.objects.default(), alice, admin_user)


def _texts(episodes) -> list[tuple]:
    return sorted(
        (
            e.text,
            e.outcome,
            e.occurred_at,
            e.created_at,
            e.distilled_at is None,
            e.recorded_by_name,
            e.restates.text if e.restates else None,
        )
        for e in episodes.select_related("restates")
    )


def agent_memory(memory: Memory) -> dict:
    """What the sections added in this version carry, with links written as texts."""
    return {
        "episodes": _texts(Episode.objects.for_memory(memory)),
        "observations": sorted(
            (
                o.fact.text,
                o.kind,
                o.text,
                o.said_by_name,
                o.channel,
                o.outcome,
                o.created_at,
                o.episode.text if o.episode else None,
                o.source.title if o.source else None,
            )
            for o in Observation.objects.filter(fact__memory=memory).select_related(
                "fact", "episode", "source"
            )
        ),
        "conflicts": sorted(
            (c.old.text, c.new.text, c.reason, c.state, c.resolution, c.settled_by_name)
            for c in Conflict.objects.for_memory(memory).select_related("old", "new")
        ),
        "procedures": sorted(
            Procedure.objects.for_memory(memory).values_list(
                "task", "steps", "text", "normalized", "successes", "failures", "confidence"
            )
        ),
        "core": Memory.objects.get(pk=memory.pk).core,
        "grants": sorted(
            Membership.objects.filter(memory=memory).values_list("user__username", "permission")
        ),
        "events": sorted(
            (
                e.kind,
                e.text,
                e.created_at,
                e.pushed_at,
                sorted((k, v) for k, v in e.data.items() if k not in ("finding", "fact")),
            )
            for e in Event.objects.for_memory(memory)
        ),
    }


def _facts_by_text(memory: Memory) -> list[list]:
    """Every fact as ``imported`` reads it, its uid and its successor's left out: folded into a
    second memory of the same install, a fact's uid is derived from the one it had."""
    return sorted([*row[1:16], *row[17:]] for row in imported(memory)["facts"])


def _fold(source: Memory, target: Memory, **options) -> list[str]:
    return portable.import_memory(
        target, portable.parse(portable.export_json(source, reader=SYSTEM)), **options
    )


@pytest.fixture
def other(db) -> Memory:
    return Memory.objects.create(slug="other", name="Other")


def test_episodes_observations_procedures_the_core_grants_and_the_timeline_reach_another_memory(
    lived_in, other
):
    report = _fold(lived_in, other)

    assert agent_memory(other) == agent_memory(lived_in)
    assert {
        "Episodes: 3 added, 0 already here.",
        "Procedures: 1 added, 0 already here.",
        "Core: imported.",
        "Grants: 1 added, 0 already here.",
    } <= set(report)
    assert _facts_by_text(other) == _facts_by_text(lived_in)
    # A belief distilled from an episode still cites it, in the memory it was folded into.
    router = Fact.objects.for_memory(other).get(text="Restarting the router fixed the wifi.")
    [cited] = [o.episode for o in router.observations.all() if o.episode]
    assert (cited.memory, cited.text, cited.outcome) == (other, router.text, "ok")
    assert _what_events_name(other) == _what_events_name(lived_in) != []


def _what_events_name(memory: Memory) -> list[tuple]:
    """Each timeline event about a finding, with the check and memory of the finding it names."""
    return sorted(
        (event.text, finding.check_id, finding.memory.slug == memory.slug)
        for event in Event.objects.for_memory(memory).filter(kind=Event.Kind.FINDING)
        for finding in [Finding.objects.get(pk=event.data["finding"])]
    )


def test_a_waiting_episode_imported_is_distilled_by_the_sleep_pass_of_its_new_memory(
    lived_in, other
):
    _fold(lived_in, other)
    [waiting] = Episode.objects.for_memory(other).pending()

    agent_actions.sleep(memory=other)

    belief = Fact.objects.for_memory(other).get(text=waiting.text)
    assert [o.episode for o in belief.observations.all()] == [waiting]


def test_importing_the_whole_memory_twice_or_into_itself_adds_nothing(lived_in, other):
    data = portable.parse(portable.export_json(lived_in, reader=SYSTEM))
    portable.import_memory(other, data)
    first = (agent_memory(other), imported(other))

    report = portable.import_memory(other, data)
    portable.import_memory(lived_in, data)

    assert (agent_memory(other), imported(other)) == first
    assert "Episodes: 0 added, 3 already here." in report
    assert "Observations: 0 added, 17 already here." in report
    assert "Core: unchanged." in report
    assert agent_memory(lived_in) == agent_memory(other)


def test_a_grant_to_a_person_this_install_does_not_know_is_skipped_and_named(lived_in, other):
    data = json.loads(portable.export_json(lived_in, reader=SYSTEM))
    data["grants"].append({"person": "zoe", "permission": "administer"})

    report = portable.import_memory(other, portable.parse(json.dumps(data)))

    assert (
        "Grants: 1 added, 0 already here; 1 skipped, for people this install has no account "
        "for (zoe)."
    ) in report
    assert list(Membership.objects.filter(memory=other).values_list("user__username", flat=True))
    assert not Membership.objects.filter(user__username="zoe").exists()


def test_a_grant_this_memory_already_has_for_that_person_wins(lived_in, other, alice):
    Membership.objects.create(memory=other, user=alice, permission=Permission.READ)

    report = _fold(lived_in, other)

    assert Membership.objects.get(memory=other, user=alice).permission == Permission.READ
    assert "Grants: 0 added, 1 already here." in report


def test_a_core_with_content_is_kept_unless_replacing_is_asked_for(lived_in, other):
    Memory.objects.filter(pk=other.pk).update(core="I work for the Smiths.")

    report = _fold(lived_in, other)

    assert Memory.objects.get(pk=other.pk).core == "I work for the Smiths."
    assert any(line.startswith("Core: kept yours (it is not empty)") for line in report)

    _fold(lived_in, other, replace_memory=True)

    assert Memory.objects.get(pk=other.pk).core == lived_in.core


def _spoil(section: str, index: int, **values):
    def spoil(data: dict) -> None:
        data[section][index].update(values)

    return spoil


BAD_ENTRIES = [
    pytest.param(
        _spoil("episodes", 0, outcome="success"),
        "episodes entry 1 has an unknown outcome 'success': use one of ok, fail, unknown",
        id="episode outcome",
    ),
    pytest.param(
        _spoil("episodes", 0, text="x" * 2001),
        'episodes entry 1 has an invalid "text" (text, not empty, at most 2,000 characters)',
        id="episode too long",
    ),
    pytest.param(
        _spoil("episodes", 0, restates="5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11"),
        "episodes entry 1 restates '5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11', an episode the file "
        "does not hold",
        id="restates nothing",
    ),
    pytest.param(
        _spoil("observations", 0, episode="5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11"),
        "cites the episode '5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11', which the file does not hold",
        id="observation cites nothing",
    ),
    pytest.param(
        _spoil("observations", 0, fact="5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11"),
        "observations entry 1 names the fact '5f0c6f5e-8d2a-4b9e-9a57-0d7c1f3e2b11' as its fact",
        id="observation of no fact",
    ),
    pytest.param(
        _spoil("procedures", 0, steps=[]),
        "procedures entry 1 has no steps",
        id="procedure without steps",
    ),
    pytest.param(
        _spoil("procedures", 0, confidence=1.2),
        'procedures entry 1 has an invalid "confidence" (a number from 0 to 1)',
        id="procedure confidence",
    ),
    pytest.param(
        _spoil("grants", 0, permission="owner"),
        "grants entry 1 has an unknown permission 'owner': use one of none, read, teach, curate, "
        "administer",
        id="unknown permission",
    ),
    pytest.param(
        lambda data: data.update(core={"text": "x" * 1001}),
        'The core has an invalid "text" (text, at most 1,000 characters)',
        id="core too long",
    ),
    pytest.param(
        _spoil("conflicts", 0, resolution="both"),
        'conflicts entry 1 has a "resolution" exactly when it is settled',
        id="open conflict with a resolution",
    ),
    pytest.param(
        _spoil("events", 0, data={"finding": 12}),
        'events entry 1 has an invalid "finding" in its data (a uid, or null)',
        id="event naming a row by number",
    ),
]


@pytest.mark.parametrize(("spoil", "message"), BAD_ENTRIES)
def test_a_bad_entry_of_a_new_section_is_refused_naming_it_and_nothing_is_imported(
    lived_in, other, spoil, message
):
    data = json.loads(portable.export_json(lived_in, reader=SYSTEM))
    spoil(data)
    before = (agent_memory(other), imported(other))

    with pytest.raises(ImportRejected) as refused:
        portable.import_memory(other, portable.parse(json.dumps(data)))

    assert message in str(refused.value)
    assert (agent_memory(other), imported(other)) == before


def test_every_key_an_export_writes_is_checked_on_import(lived_in):
    data = portable.export_memory(lived_in, reader=SYSTEM)

    for section in portable.sections():
        if not section.many:
            continue  # the document, the core and the labels: one object each
        declared = set(section.entry.fields)
        declared |= {"source", "subjects"} if section.key in ("facts", "observations") else set()
        assert data[section.key], f"the lived-in memory has no {section.key}"
        for entry in data[section.key]:
            assert set(entry) <= declared, (section.key, set(entry) - declared)
