"""Export files keep working: a file written by an earlier brain imports with the result it gave
then.

``fixtures/export-2026-11.json`` was exported in November 2026 (see ``fixtures/export_2026_11.py``)
and ``fixtures/export-2026-11.imported.json`` is what importing it into an empty memory gave with
that code: every row, with its links written as the uids, names and texts they point at.
"""

import json
from pathlib import Path

import pytest

from knowledge.models import (
    Conflict,
    Episode,
    Fact,
    Membership,
    Memory,
    Observation,
    Procedure,
    Source,
    Subject,
)
from memory import portable
from memory.models import Change, DocumentRevision, InboxItem
from review.models import Event, Finding, Guess, Judgement, Rule

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
