"""The facts store in the portable export: its subjects, and every fact with its history.

Two sections for ``settings.BRAIN_EXPORT_SECTIONS`` (the machinery is ``brain.portable``; the
memory app runs it). Subjects load before facts, because facts name their subjects.

- ``subjects``: matched by entity id, then by kind and name. Import adds the ones this memory
  does not know and never changes or removes one it does: the house as this install knows it
  wins.
- ``facts``: matched by uid. Import adds the ones this memory does not hold (an existing uid
  wins, and importing the same file twice adds nothing), links each to its successor once every
  row exists, ties it to this memory's subjects, and embeds it again with the current embedder:
  vectors are never carried, because another install may embed differently.

Every entry is checked before anything is written; a bad one raises ImportRejected naming it.
A subject reference is resolved while loading, inside the import's transaction, so one this
memory cannot resolve still leaves nothing written.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import F, Prefetch

from brain.portable import (
    ImportOptions,
    ImportRejected,
    check_entries,
    in_batches,
    is_datetime,
    is_name,
    is_optional_datetime,
    is_uuid,
    placements,
    require,
    when,
)
from knowledge import statements
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory, Source, Subject

logger = logging.getLogger(__name__)

NAME_CHARS = Subject._meta.get_field("name").max_length
ENTITY_ID_CHARS = Subject._meta.get_field("entity_id").max_length
ALIAS_CHARS = Subject._meta.get_field("aliases").base_field.max_length
SOURCE_CHARS = Source._meta.get_field("title").max_length  # title and reference alike
REASON_CHARS = Fact._meta.get_field("forgotten_reason").max_length
EMBED_BATCH = 256  # texts per embedder call
WRITE_BATCH = 1000  # rows per INSERT or UPDATE


def _summary(options: ImportOptions, name: str, added: int, total: int) -> None:
    options.report.append(f"{name}: {added} added, {total - added} already here.")


# Subjects -------------------------------------------------------------------------------------


def _reference(subject: Subject) -> dict[str, str]:
    """How a fact names its subject in the file: kind and name, and the entity id if any."""
    reference = {"kind": subject.kind, "name": subject.name}
    if subject.entity_id:
        reference["entity_id"] = subject.entity_id
    return reference


class _Subjects:
    """This memory's subjects, found the way the file names them: entity id, then kind + name."""

    def __init__(self, memory: Memory):
        self.by_entity: dict[str, Subject] = {}
        self.by_name: dict[tuple[str, str], Subject] = {}
        for subject in Subject.objects.for_memory(memory):
            self.add(subject)

    def add(self, subject: Subject) -> None:
        if subject.entity_id:
            self.by_entity.setdefault(subject.entity_id, subject)
        self.by_name.setdefault((subject.kind, subject.name), subject)

    def find(self, reference: dict) -> Subject | None:
        entity_id = reference.get("entity_id") or ""
        if entity_id in self.by_entity:
            return self.by_entity[entity_id]
        return self.by_name.get((reference.get("kind"), reference.get("name")))


class SubjectsSection:
    key = "subjects"

    def dump(self, memory: Memory) -> list[dict]:
        return [
            {
                "kind": subject.kind,
                "name": subject.name,
                "entity_id": subject.entity_id,
                "room": subject.room.name if subject.room_id else None,
                "aliases": subject.aliases,
                "present": subject.present,
                "removed_at": subject.removed_at.isoformat() if subject.removed_at else None,
            }
            for subject in Subject.objects.for_memory(memory).select_related("room").order_by("pk")
        ]

    def check(self, data: Any) -> None:
        require(isinstance(data, list), '"subjects" must be a list.')
        names: set[tuple[str, str]] = set()
        entities: set[str] = set()
        for number, entry in enumerate(data, start=1):
            where = f"subjects entry {number}"
            require(isinstance(entry, dict), f"{where} is not an object.")
            require(
                entry.get("kind") in Subject.Kind.values,
                f"{where} has an unknown kind {entry.get('kind')!r}: use one of "
                f"{', '.join(Subject.Kind.values)}.",
            )
            name, entity_id = entry.get("name"), entry.get("entity_id", "")
            require(
                is_name(name, NAME_CHARS) and name.strip() != "",
                f'{where} has no valid "name" (1 to {NAME_CHARS} characters).',
            )
            require(
                is_name(entity_id, ENTITY_ID_CHARS),
                f'{where} has an invalid "entity_id" (at most {ENTITY_ID_CHARS} characters).',
            )
            aliases = entry.get("aliases", [])
            require(
                isinstance(aliases, list) and all(is_name(a, ALIAS_CHARS) for a in aliases),
                f'{where} has invalid "aliases" (a list of names of at most {ALIAS_CHARS} '
                "characters).",
            )
            require(
                isinstance(entry.get("present", True), bool),
                f'{where} has an invalid "present" (true or false).',
            )
            require(
                is_optional_datetime(entry.get("removed_at")),
                f"{where} has an invalid removed_at.",
            )
            require(
                entry.get("room") is None or isinstance(entry["room"], str),
                f'{where} has an invalid "room" (a room\'s name, or null).',
            )
            require((entry["kind"], name) not in names, f"{where} repeats an earlier subject.")
            require(entity_id not in entities, f"{where} repeats the entity id {entity_id!r}.")
            names.add((entry["kind"], name))
            if entity_id:
                entities.add(entity_id)
        for number, entry in enumerate(data, start=1):
            room = entry.get("room")
            require(
                room is None or (Subject.Kind.ROOM, room) in names,
                f"subjects entry {number} is in the room {room!r}, which no entry names.",
            )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        known = _Subjects(memory)
        fresh = [entry for entry in data if known.find(entry) is None]
        created = Subject.objects.bulk_create(
            [
                Subject(
                    memory=memory,
                    kind=entry["kind"],
                    name=entry["name"],
                    entity_id=entry.get("entity_id", ""),
                    aliases=[alias.casefold() for alias in entry.get("aliases", [])],
                    present=entry.get("present", True),
                    removed_at=when(entry.get("removed_at")),
                )
                for entry in fresh
            ]
        )
        for subject in created:
            known.add(subject)
        # A room of the file may be known here by its entity id under another name.
        rooms = {e["name"]: known.find(e) for e in data if e["kind"] == Subject.Kind.ROOM}
        placed_in_rooms = []
        for entry, subject in zip(fresh, created, strict=True):
            if entry.get("room") is not None:
                subject.room = rooms[entry["room"]]
                placed_in_rooms.append(subject)
        Subject.objects.bulk_update(placed_in_rooms, ["room"])
        _summary(options, "Subjects", len(created), len(data))


# Facts ----------------------------------------------------------------------------------------


class FactsSection:
    key = "facts"
    fields = {
        "uid": str,
        "text": str,
        "kind": str,
        "valence": str,
        "channel": str,
        "status": str,
        "valid_from": str,
        "created_at": str,
    }
    choices = {
        "kind": Fact.Kind.values,
        "valence": Fact.Valence.values,
        "channel": Fact.Channel.values,
        "status": Fact.Status.values,
    }

    def dump(self, memory: Memory) -> list[dict]:
        return list(self._dumped(memory))

    def _dumped(self, memory: Memory) -> Iterator[dict]:
        # The whole memory, read as the system (user None): where labels narrow reading, an
        # export narrows with them.
        facts = (
            Fact.objects.for_memory(memory)
            .readable_by(None)
            .select_related("source")
            .defer("embedding", "normalized")
            .annotate(successor=F("superseded_by__uid"))
            .prefetch_related(
                Prefetch("subjects", queryset=Subject.objects.only("kind", "name", "entity_id"))
            )
            .order_by("created_at", "pk")
        )
        for fact in facts.iterator(chunk_size=2000):
            yield {
                "uid": str(fact.uid),
                "text": fact.text,
                "kind": fact.kind,
                "valence": fact.valence,
                "outcome": fact.outcome,
                "channel": fact.channel,
                "taught_by": fact.taught_by_name,
                "source": _source(fact.source),
                "confidence": fact.confidence,
                "prior": fact.prior,
                "support": fact.support,
                "successes": fact.successes,
                "failures": fact.failures,
                "valid_from": fact.valid_from.isoformat(),
                "valid_to": _iso(fact.valid_to),
                "superseded_by": str(fact.successor) if fact.successor else None,
                "expires_at": _iso(fact.expires_at),
                "status": fact.status,
                "forgotten_at": _iso(fact.forgotten_at),
                "forgotten_reason": fact.forgotten_reason,
                "subject_removed": fact.subject_removed,
                "in_document": fact.in_document,
                "subjects": [_reference(subject) for subject in fact.subjects.all()],
                "created_at": fact.created_at.isoformat(),
            }

    def check(self, data: Any) -> None:
        check_entries(data, "facts", self.fields, person="taught_by")
        successors: dict[uuid.UUID, uuid.UUID] = {}
        for number, entry in enumerate(data, start=1):
            self._check_entry(f"facts entry {number}", entry)
            if entry.get("superseded_by") is not None:
                successors[uuid.UUID(entry["uid"])] = uuid.UUID(entry["superseded_by"])
        uids = {uuid.UUID(entry["uid"]): number for number, entry in enumerate(data, start=1)}
        for uid, successor in successors.items():
            require(
                successor in uids,
                f"facts entry {uids[uid]} is superseded by {str(successor)!r}, a fact the file "
                "does not hold.",
            )
        _check_no_cycle(successors, uids)

    def _check_entry(self, where: str, entry: dict) -> None:
        for name, allowed in self.choices.items():
            require(
                entry[name] in allowed,
                f"{where} has an unknown {name} {entry[name]!r}: use one of {', '.join(allowed)}.",
            )
        require(entry["text"].strip() != "", f"{where} has an empty text.")
        require(is_datetime(entry["valid_from"]), f"{where} has an invalid valid_from.")
        for name in ("valid_to", "expires_at", "forgotten_at"):
            require(is_optional_datetime(entry.get(name)), f"{where} has an invalid {name}.")
        for name in ("confidence", "prior"):
            value = entry.get(name, 0.6)
            require(
                _is_number(value) and 0 <= value <= 1,
                f"{where} has an invalid {name} (a number from 0 to 1).",
            )
        for name in ("support", "successes", "failures"):
            value = entry.get(name, 0)
            require(
                isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31,
                f"{where} has an invalid {name} (a whole number, 0 or more).",
            )
        for name in ("subject_removed", "in_document"):
            require(
                isinstance(entry.get(name, False), bool),
                f"{where} has an invalid {name} (true or false).",
            )
        require(
            entry.get("outcome") is None or isinstance(entry["outcome"], bool),
            f"{where} has an invalid outcome (true, false or null).",
        )
        require(
            is_name(entry.get("forgotten_reason", ""), REASON_CHARS),
            f"{where} has an invalid forgotten_reason (at most {REASON_CHARS} characters).",
        )
        successor = entry.get("superseded_by")
        require(
            successor is None or is_uuid(successor),
            f"{where} has an invalid superseded_by (the uid of the fact that replaced it).",
        )
        require(
            successor is None or uuid.UUID(successor) != uuid.UUID(entry["uid"]),
            f"{where} is superseded by itself.",
        )
        _check_source(where, entry.get("source"))
        subjects = entry.get("subjects", [])
        require(isinstance(subjects, list), f'{where} has invalid "subjects" (a list).')
        for reference in subjects:
            require(
                isinstance(reference, dict)
                and is_name(reference.get("entity_id", ""), ENTITY_ID_CHARS)
                and (
                    reference.get("entity_id", "") != ""
                    or (
                        reference.get("kind") in Subject.Kind.values
                        and is_name(reference.get("name"), NAME_CHARS)
                    )
                ),
                f"{where} names a subject by neither an entity id nor a kind and name.",
            )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        where = placements(Fact, memory, (uuid.UUID(entry["uid"]) for entry in data))
        fresh = [
            (number, entry, where[uuid.UUID(entry["uid"])][0])
            for number, entry in enumerate(data, start=1)
            if not where[uuid.UUID(entry["uid"])][1]
        ]
        about = _resolve_subjects(memory, fresh)
        sources = _sources(memory, [entry for _, entry, _ in fresh])
        facts = [_fact(memory, entry, uid, about[number], sources) for number, entry, uid in fresh]
        _embed(facts)
        Fact.objects.bulk_create(facts, batch_size=WRITE_BATCH)
        Link = Fact.subjects.through
        Link.objects.bulk_create(
            [
                Link(fact_id=fact.pk, subject_id=subject.pk)
                for fact, (number, _, _) in zip(facts, fresh, strict=True)
                for subject in about[number]
            ],
            batch_size=WRITE_BATCH,
        )
        _link_successors(memory, [entry for _, entry, _ in fresh], facts, where)
        _summary(options, "Facts", len(facts), len(data))


def _iso(moment) -> str | None:
    return moment.isoformat() if moment else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _source(source: Source | None) -> dict | None:
    if source is None:
        return None
    return {
        "kind": source.kind,
        "title": source.title,
        "reference": source.reference,
        "text": source.text,
    }


def _source_key(source: dict) -> tuple[str, str, str, str]:
    return (source["kind"], source["title"], source.get("reference", ""), source.get("text", ""))


def _check_source(where: str, source: Any) -> None:
    if source is None:
        return
    require(
        isinstance(source, dict)
        and source.get("kind") in Source.Kind.values
        and is_name(source.get("title"), SOURCE_CHARS)
        and is_name(source.get("reference", ""), SOURCE_CHARS)
        and isinstance(source.get("text", ""), str),
        f'{where} has an invalid "source" (kind, a title and reference of at most '
        f"{SOURCE_CHARS} characters, and text; or null).",
    )


def _check_no_cycle(successors: dict[uuid.UUID, uuid.UUID], numbers: dict[uuid.UUID, int]) -> None:
    """A chain of replacements ends: no fact is, through its successors, replaced by itself."""
    done: set[uuid.UUID] = set()
    for start in successors:
        path: list[uuid.UUID] = []
        uid: uuid.UUID | None = start
        while uid is not None and uid not in done:
            require(
                uid not in path,
                f"facts entry {numbers[start]} is, through its successors, superseded by itself.",
            )
            path.append(uid)
            uid = successors.get(uid)
        done.update(path)


def _resolve_subjects(
    memory: Memory, fresh: list[tuple[int, dict, uuid.UUID]]
) -> dict[int, list[Subject]]:
    """Each new entry's subjects in this memory (made by the subjects section if they were
    new). Raises ImportRejected naming the first entry with one this memory does not have."""
    known = _Subjects(memory)
    about: dict[int, list[Subject]] = {}
    for number, entry, _ in fresh:
        found: list[Subject] = []
        for reference in entry.get("subjects", []):
            subject = known.find(reference)
            if subject is None:
                shown = reference.get("entity_id") or f"{reference['kind']} {reference['name']!r}"
                raise ImportRejected(
                    f"facts entry {number} is about {shown}, which neither the file's subjects "
                    f"nor {memory.name} has; nothing was imported."
                )
            if subject not in found:
                found.append(subject)
        about[number] = found
    return about


def _sources(memory: Memory, entries: list[dict]) -> dict[tuple, Source]:
    """The source each entry cites, as a row of this memory: an identical one if it has one,
    else a new one (dated by the first fact that cites it). Sources are never edited."""
    first_cited: dict[tuple, datetime] = {}
    for entry in entries:
        if entry.get("source") is not None:
            key, cited = _source_key(entry["source"]), when(entry["created_at"])
            first_cited[key] = min(first_cited.get(key, cited), cited)
    found: dict[tuple, Source] = {}
    for chunk in in_batches(first_cited, WRITE_BATCH):
        for source in Source.objects.filter(
            memory=memory, title__in={title for _, title, _, _ in chunk}
        ).order_by("pk"):
            found.setdefault((source.kind, source.title, source.reference, source.text), source)
    missing = [key for key in first_cited if key not in found]
    created = Source.objects.bulk_create(
        [
            Source(
                memory=memory,
                kind=kind,
                title=title,
                reference=reference,
                text=text,
                created_at=first_cited[(kind, title, reference, text)],
            )
            for kind, title, reference, text in missing
        ],
        batch_size=WRITE_BATCH,
    )
    found.update(zip(missing, created, strict=True))
    return found


def _fact(
    memory: Memory, entry: dict, uid: uuid.UUID, subjects: list[Subject], sources: dict
) -> Fact:
    confidence = entry.get("confidence", 0.6)
    return Fact(
        memory=memory,
        uid=uid,
        text=entry["text"],
        normalized=statements.normalise(entry["text"]),
        kind=entry["kind"],
        valence=entry["valence"],
        outcome=entry.get("outcome"),
        channel=entry["channel"],
        taught_by_name=entry.get("taught_by", ""),
        source=sources[_source_key(entry["source"])] if entry.get("source") else None,
        confidence=confidence,
        prior=entry.get("prior", confidence),
        support=entry.get("support", 1),
        successes=entry.get("successes", 0),
        failures=entry.get("failures", 0),
        valid_from=when(entry["valid_from"]),
        valid_to=when(entry.get("valid_to")),
        expires_at=when(entry.get("expires_at")),
        status=entry["status"],
        forgotten_at=when(entry.get("forgotten_at")),
        forgotten_reason=entry.get("forgotten_reason", ""),
        # A fact rests while one of its subjects is gone, as this memory knows them (its own
        # subjects win over the file's); with no subjects, the file's word stands.
        subject_removed=(
            any(not subject.present for subject in subjects)
            if subjects
            else entry.get("subject_removed", False)
        ),
        in_document=entry.get("in_document", False),
        created_at=when(entry["created_at"]),
    )


def _embed(facts: list[Fact]) -> None:
    """Vectors from the current embedder, a batch of texts at a time."""
    if not facts:
        return
    embedder = get_embedder()
    for batch in in_batches(facts, EMBED_BATCH):
        for fact, vector in zip(batch, embedder.embed([f.text for f in batch]), strict=True):
            fact.embedding, fact.embedder = vector, embedder.name


def _link_successors(
    memory: Memory,
    entries: list[dict],
    facts: list[Fact],
    where: dict[uuid.UUID, tuple[uuid.UUID, bool]],
) -> None:
    """Point each new fact at the fact that replaced it: new too, or already in this memory.
    A fact already here keeps its own link (existing entries win)."""
    replaced = [
        (fact, where[uuid.UUID(entry["superseded_by"])][0])
        for entry, fact in zip(entries, facts, strict=True)
        if entry.get("superseded_by") is not None
    ]
    pks = {fact.uid: fact.pk for fact in facts}
    already_here = [uid for _, uid in replaced if uid not in pks]
    for chunk in in_batches(already_here, WRITE_BATCH):
        pks.update(Fact.objects.filter(memory=memory, uid__in=chunk).values_list("uid", "pk"))
    for fact, successor in replaced:
        fact.superseded_by_id = pks[successor]
    Fact.objects.bulk_update(
        [fact for fact, _ in replaced], ["superseded_by"], batch_size=WRITE_BATCH
    )


subjects_section = SubjectsSection()
facts_section = FactsSection()
