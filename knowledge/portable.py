"""The facts store in the portable export: its subjects, every fact with its history, and the
agent's memory (episodes, procedures, the core), and who may do what.

Sections of the export (declared with ``brain.portable.Section``, their entries DRF serializers
whose checks come from the model; ``memory.portable`` lists and runs them), loaded in this
order because each names rows of the ones before:

- ``subjects``: matched by entity id, then by kind and name. Import adds the ones this memory
  does not know and never changes or removes one it does: the house as this install knows it
  wins.
- ``facts``: matched by uid. Import adds the ones this memory does not hold (an existing uid
  wins, and importing the same file twice adds nothing), links each to its successor once every
  row exists and ties it to this memory's subjects. Vectors are never carried (another install
  may embed differently) nor computed during the import: embedding is what cost (a few hundred
  facts a second against thousands without it), so the facts arrive without one and the
  background re-embedding (``knowledge.reembedding``, asked for when the import commits) gives
  each its vector from the current embedder, as after a change of embedder; meanwhile they are
  found by their words and subjects, and ``brain reembed`` does it at once.
- ``episodes``: append-only, so an episode has no uid of its own. It is known by when it
  happened, when it was recorded, its outcome and its words; one this memory holds with all
  four is already here (and two entries with all four alike are one). The file gives each a
  uid made from those four, which restatements and observations use to name it. Import adds the
  others, waiting or distilled as they were, embedded again.
- ``observations``: every time a fact was said, citing the episode it was distilled from.
  They travel with their fact: added only with a fact this import adds (a fact already here
  keeps its own history).
- ``conflicts``: two facts a person settles. A conflict travels with the fact that raised it
  (its ``new`` side): added only when this import adds that fact.
- ``procedures``: matched by their task and steps as ``statements.normalise`` reads them (one
  per way of doing a thing, as in the database); one already here wins, counts and all.
- ``core``: the pinned block. Like the document: an empty one here takes the file's; one with
  content is kept unless the person asked to replace the memory.
- ``grants``: who may do what, by user name. A grant to a name this install has no account for
  is skipped, and the report names it; a grant this memory already has for that person wins.
  The same name is taken to be the same person: importing is for those who administer the
  memory, who could give the same grants by hand.

Every entry is checked before anything is written; a bad one raises ImportRejected naming it.
A reference is resolved while loading, inside the import's transaction, so one this memory
cannot resolve still leaves nothing written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import F, Prefetch
from rest_framework import serializers

from brain.celery import send_on_commit
from brain.db.copying import copy_create
from brain.portable import (
    UID_MESSAGES,
    Chained,
    Choice,
    Entries,
    Entry,
    ImportOptions,
    ImportRejected,
    Json,
    Section,
    Text,
    Uid,
    accepts,
    between,
    in_batches,
    is_uuid,
    placements,
    ref,
    refuse_repeats,
    refused,
    remember,
    required,
    when,
)
from knowledge import label_names, passages, statements, visibility
from knowledge.embedding import embedder_for, vectors_or_none
from knowledge.episodes import MAX_EPISODE_CHARS
from knowledge.models import (
    Citation,
    Conflict,
    Episode,
    Fact,
    Label,
    Membership,
    Memory,
    Observation,
    Passage,
    Permission,
    Procedure,
    ReviewItem,
    Role,
    Source,
    Subject,
)

EMBED_BATCH = 256  # texts per embedder call
WRITE_BATCH = 1000  # rows per INSERT or UPDATE
TURN_KEYS = ("speaker", "person", "role", "text", "at")
# How a fact names a subject: by entity id, or by kind and name.
ENTITY_ID, KIND, NAME = ref(Subject.entity_id), ref(Subject.kind), ref(Subject.name)


# Subjects -------------------------------------------------------------------------------------


def _names_a_subject(reference: Any) -> bool:
    if not isinstance(reference, dict):
        return False
    entity_id = reference.get("entity_id", "")
    if not accepts(ENTITY_ID, entity_id):
        return False
    return entity_id != "" or (
        accepts(KIND, reference.get("kind")) and accepts(NAME, reference.get("name"))
    )


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
        for subject in Subject.objects.as_system(
            "an import finds the subjects it names"
        ).for_memory(memory):
            self.add(subject)

    def add(self, subject: Subject) -> None:
        if subject.entity_id:
            self.by_entity.setdefault(subject.entity_id, subject)
        self.by_name.setdefault((subject.kind, subject.name), subject)

    def find(self, reference: dict) -> Subject | None:
        entity_id = reference.get("entity_id") or ""
        if entity_id in self.by_entity:
            return self.by_entity[entity_id]
        kind, name = reference.get("kind"), reference.get("name")
        return None if kind is None or name is None else self.by_name.get((kind, name))


class SubjectEntries(Entries):
    def validate(self, attrs: list) -> list:
        names: set[tuple[str, str]] = set()
        entities: set[str] = set()
        for index, entry in enumerate(attrs):
            name, entity_id = (entry["kind"], entry["name"]), entry.get("entity_id", "")
            if name in names:
                raise refused(index, "repeats an earlier subject.")
            if entity_id in entities:
                raise refused(index, f"repeats the entity id {entity_id!r}.")
            names.add(name)
            if entity_id:
                entities.add(entity_id)
        for index, entry in enumerate(attrs):
            room = entry.get("room", {}).get("name")
            if room is not None and (Subject.Kind.ROOM, room) not in names:
                raise refused(index, f"is in the room {room!r}, which no entry names.")
        return super().validate(attrs)


class SubjectEntry(Entry):
    room = ref(Subject.name, source="room.name", allow_null=True)  # a room's name

    class Meta(Entry.Meta):
        model = Subject
        fields = ("kind", "name", "entity_id", "aliases", "present", "removed_at", "room")
        list_serializer_class = SubjectEntries


class SubjectsSection(Section[Memory]):
    key = "subjects"
    entries = SubjectEntry

    def rows(self, memory: Memory, reader: Any):
        # Every subject, narrowed below to what the export's reader may see.
        subjects = (
            Subject.objects.as_system("narrowed for the reader below")
            .for_memory(memory)
            .select_related("room")
            .order_by("pk")
        )
        if visibility.may_read_all_of(reader, memory):
            return subjects
        # Pages that exist for the reader, what has no fact at all (nothing to hide), and the
        # rooms those are in, so every reference in the file resolves.
        shown = subjects.readable_by(reader) | subjects.filter(facts__isnull=True)
        shown = shown.distinct()
        return subjects.filter(
            models.Q(pk__in=shown.values("pk")) | models.Q(devices__in=shown.values("pk"))
        ).distinct()

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        known = _Subjects(memory)
        fresh = [entry for entry in data if known.find(entry) is None]
        created = Subject.objects.bulk_create(
            [
                Subject(
                    memory=memory,
                    **{
                        **self.values(entry),
                        "aliases": [alias.casefold() for alias in entry.get("aliases", [])],
                    },
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
        self.summary(options, "Subjects", len(created), len(data))


# Sources, shared by facts and observations ----------------------------------------------------


class SourceEntry(Entry):
    """A source as an entry cites it, as the export's reader may see it: the passages they may
    not read masked in its text, and a conversation's turns only when they read all of it. The
    export works each source out once (the context's ``memo``)."""

    default_error_messages = {"invalid": 'has an invalid "source" (an object, or null).'}

    class Meta(Entry.Meta):
        model = Source
        # ``turns``: a conversation's messages, so See the run opens it at its turn.
        fields = ("kind", "title", "reference", "text", "channel", "turns")

    def to_representation(self, source: Source) -> dict:
        memo = self.context["memo"]
        key = ("source", source.pk)
        if key not in memo:
            visibility.mask(source, self.context["reader"])
            memo[key] = super().to_representation(source)
        return memo[key]

    def validate_turns(self, turns: Any) -> Any:
        if not isinstance(turns, list) or not all(
            isinstance(turn, dict) and all(isinstance(turn.get(k, ""), str) for k in TURN_KEYS)
            for turn in turns
        ):
            raise serializers.ValidationError(
                f'has invalid "turns" (a list of {{{", ".join(TURN_KEYS)}}}, each text).'
            )
        return turns


def _source_key(source: dict) -> tuple[str, str, str, str]:
    return (source["kind"], source["title"], source.get("reference", ""), source.get("text", ""))


def _sources(memory: Memory, entries: list[dict]) -> dict[tuple, Source]:
    """The source each entry cites, as a row of this memory: an identical one if it has one,
    else a new one (dated by the first entry that cites it). Sources are never edited."""
    first_cited: dict[tuple, datetime] = {}
    cited_as: dict[tuple, dict] = {}
    for entry in entries:
        if entry.get("source") is not None:
            key, cited = _source_key(entry["source"]), when(entry["created_at"])
            assert cited is not None  # created_at is checked: a date and time, never null
            first_cited[key] = min(first_cited.get(key, cited), cited)
            cited_as.setdefault(key, entry["source"])
    found: dict[tuple, Source] = {}
    for chunk in in_batches(first_cited, WRITE_BATCH):
        for source in (
            Source.objects.as_system("an import finds the sources it cites")
            .filter(memory=memory, title__in={title for _, title, _, _ in chunk})
            .order_by("pk")
        ):
            found.setdefault((source.kind, source.title, source.reference, source.text), source)
    _same_conversations(memory, first_cited, found)
    missing = [key for key in first_cited if key not in found]
    created = Source.objects.bulk_create(
        [
            Source(
                memory=memory,
                kind=kind,
                title=title,
                reference=reference,
                text=text,
                channel=cited_as[(kind, title, reference, text)].get("channel", ""),
                turns=cited_as[(kind, title, reference, text)].get("turns", []),
                created_at=first_cited[(kind, title, reference, text)],
            )
            for kind, title, reference, text in missing
        ],
        batch_size=WRITE_BATCH,
    )
    found.update(zip(missing, created, strict=True))
    return found


def _same_conversations(memory: Memory, cited: dict, found: dict) -> None:
    """A conversation is one source per reference (``one_source_per_conversation``): one this
    memory already keeps under the reference is the one cited, whatever its title says."""
    wanted = {
        key[2]: key
        for key in cited
        if key not in found and key[0] == Source.Kind.CONVERSATION and key[2]
    }
    if not wanted:
        return
    kept = Source.objects.as_system("an import finds the conversations it cites").filter(
        memory=memory, kind=Source.Kind.CONVERSATION, reference__in=list(wanted)
    )
    for source in kept:
        found[wanted[source.reference]] = source


def _cited(entry: dict, sources: dict[tuple, Source]) -> Source | None:
    return sources[_source_key(entry["source"])] if entry.get("source") else None


def _embedded(memory: Memory, rows: list) -> None:
    """Vectors from the memory's embedder for rows with a ``text``, a batch at a time; none
    when its worker gives none (an import is one transaction, which a worker cannot see
    into): such rows are compared by their words."""
    if not rows:
        return
    embedder = embedder_for(memory)
    for batch in in_batches(rows, EMBED_BATCH):
        vectors = vectors_or_none(embedder, [r.text for r in batch])
        if vectors is None:
            return
        for row, vector in zip(batch, vectors, strict=True):
            row.embedding, row.embedder = vector, embedder.name


# Facts ----------------------------------------------------------------------------------------


class SubjectsNamed(serializers.ListField):
    """The subjects a fact is about, each by entity id, or by kind and name."""

    default_error_messages = {
        "not_a_list": 'has invalid "subjects" (a list).',
        "invalid": "names a subject by neither an entity id nor a kind and name.",
    }

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            self.fail("not_a_list")
        if not all(_names_a_subject(reference) for reference in data):
            self.fail("invalid")
        return data

    def to_representation(self, subjects: Any) -> list[dict]:
        return [_reference(subject) for subject in subjects.all()]


class FactEntries(Chained):
    link = "successor"
    missing = "is superseded by {target!r}, a fact the file does not hold."
    circle = "is, through its successors, superseded by itself."


class FactEntry(Entry):
    source = SourceEntry(  # type: ignore[assignment]  # the file's key, not DRF's source
        allow_null=True, required=False
    )
    superseded_by = Uid(source="successor", allow_null=True, required=False)  # a fact's uid
    subjects = SubjectsNamed(required=False)

    class Meta(Entry.Meta):
        model = Fact
        fields = (
            "uid",
            "text",
            "kind",
            "valence",
            "outcome",
            "channel",
            "taught_by_name",
            "confidence",
            "prior",
            "support",
            "successes",
            "failures",
            "used_at",
            "valid_from",
            "valid_to",
            "expires_at",
            "status",
            "forgotten_at",
            "forgotten_reason",
            "subject_removed",
            "in_document",
            "created_at",
            "source",
            "superseded_by",
            "subjects",
        )
        keys = {"taught_by_name": "taught_by"}
        extra_kwargs = {
            **required("kind", "valence", "valid_from", "status", "created_at"),
            **between(0, 1, "confidence", "prior"),
        }
        list_serializer_class = FactEntries

    def validate(self, attrs: dict) -> dict:
        if attrs.get("successor") == attrs["uid"]:
            raise serializers.ValidationError("is superseded by itself.")
        return attrs


class FactsSection(Section[Memory]):
    key = "facts"
    entries = FactEntry
    related = ("source",)
    deferred = ("embedding", "normalized")
    ordering = ("created_at", "pk")

    def rows(self, memory: Memory, reader: Any):
        # What the person the export is for may read, a chunk at a time.
        return (
            super()
            .rows(memory, reader)
            .annotate(successor=F("superseded_by__uid"))
            .prefetch_related(
                Prefetch(
                    "subjects",
                    queryset=Subject.objects.as_system("pages of facts the reader reads").only(
                        "kind", "name", "entity_id"
                    ),
                )
            )
            .iterator(chunk_size=2000)
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
        facts = [
            self._fact(memory, entry, uid, about[number], sources) for number, entry, uid in fresh
        ]
        # Every fact cites a passage: who reads it follows them.
        cited = passages.lines_for(facts)
        copy_create(facts)
        passages.cite_lines(facts, cited)
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
        remember(options, self.key, Fact, memory, where)
        self.summary(options, "Facts", len(facts), len(data))
        if facts:  # their vectors follow in the background (see the module docstring)
            options.report.append(
                f"Vectors for the {len(facts):,} new facts are being computed in the "
                "background; `brain reembed` does it now."
            )
            send_on_commit("knowledge.tasks.reembed_facts")

    def _fact(
        self, memory: Memory, entry: dict, uid: uuid.UUID, subjects: list[Subject], sources: dict
    ) -> Fact:
        values = self.values(entry)
        if "prior" not in entry:  # taught with the confidence it has
            values["prior"] = values["confidence"]
        if subjects:
            # A fact rests while one of its subjects is gone, as this memory knows them (its own
            # subjects win over the file's); with no subjects, the file's word stands.
            values["subject_removed"] = any(not subject.present for subject in subjects)
        return Fact(
            memory=memory,
            uid=uid,
            normalized=statements.normalise(entry["text"]),
            source=_cited(entry, sources),
            **values,
        )


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
        here = Fact.objects.as_system("an import links the facts it replaces")
        pks.update(here.filter(memory=memory, uid__in=chunk).values_list("uid", "pk"))
    for fact, successor in replaced:
        fact.superseded_by_id = pks[successor]
    Fact.objects.bulk_update(
        [fact for fact, _ in replaced], ["superseded_by"], batch_size=WRITE_BATCH
    )


def _fact_here(options: ImportOptions, where: str, entry: dict, key: str) -> int:
    """The row in this memory of the fact ``entry[key]`` names (the facts section placed it)."""
    pk = options.here.get("facts", {}).get(uuid.UUID(entry[key]))
    if pk is None:
        raise ImportRejected(
            f"{where} names the fact {entry[key]!r} as its {key}, which the file does not hold; "
            "nothing was imported."
        )
    return pk


# Episodes -------------------------------------------------------------------------------------

EPISODES = uuid.UUID("6f1d3a52-53c4-4f0e-9d55-2f7d0f0c2c0e")  # namespace of episode uids


def _episode_key(occurred_at: datetime, created_at: datetime, outcome: str, text: str) -> tuple:
    return (occurred_at, created_at, outcome, text)


def episode_uid(key: tuple) -> uuid.UUID:
    """The uid the file gives an episode: from when it happened, when it was recorded, its
    outcome and its words."""
    occurred_at, created_at, outcome, text = key
    return uuid.uuid5(
        EPISODES, "\n".join([occurred_at.isoformat(), created_at.isoformat(), outcome, text])
    )


class EpisodeUid(Uid):
    """An episode of the export by the uid the file gives it, from its pk (the episodes
    section works them out once, in the context's ``memo``)."""

    def to_representation(self, pk: int) -> str | None:
        uid = self.context["memo"]["episodes"].get(pk)
        return str(uid) if uid else None


class EpisodeEntries(Chained):
    link = "restates_id"
    missing = "restates {target!r}, an episode the file does not hold."
    circle = "is, through what it restates, a restatement of itself."

    def to_representation(self, rows: Any) -> list[dict]:
        rows = list(rows)
        uids = {row.pk: episode_uid(_key_of(row)) for row in rows}
        self.context["memo"]["episodes"] = uids
        entries: dict[uuid.UUID, dict] = {}
        for row in rows:  # two episodes alike in all four are one: the file carries it once
            entries.setdefault(uids[row.pk], self.child.to_representation(row))
        return list(entries.values())


class EpisodeEntry(Entry):
    uid = EpisodeUid(source="pk", error_messages=UID_MESSAGES)
    restates = EpisodeUid(source="restates_id", allow_null=True, required=False)

    class Meta(Entry.Meta):
        model = Episode
        fields = (
            "uid",
            "text",
            "outcome",
            "occurred_at",
            "recorded_by_name",
            "distilled_at",
            "created_at",
            "restates",
        )
        keys = {"recorded_by_name": "recorded_by"}
        extra_kwargs = {
            "text": {"max_length": MAX_EPISODE_CHARS},
            **required("occurred_at", "created_at"),
        }
        list_serializer_class = EpisodeEntries


class EpisodesSection(Section[Memory]):
    key = "episodes"
    entries = EpisodeEntry
    deferred = ("embedding", "normalized")
    ordering = ("created_at", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        keys = {uuid.UUID(e["uid"]): _key_of_entry(e) for e in data}
        here = _episodes_here(memory, set(keys.values()))
        fresh: dict[tuple, tuple[dict, Episode]] = {}
        for entry in data:
            key = keys[uuid.UUID(entry["uid"])]
            if key not in here and key not in fresh:
                values = self.values(entry)
                fresh[key] = (
                    entry,
                    Episode(
                        memory=memory, normalized=statements.normalise(entry["text"]), **values
                    ),
                )
        new = [episode for _, episode in fresh.values()]
        _embedded(memory, new)
        Episode.objects.bulk_create(new, batch_size=WRITE_BATCH)
        here.update((key, episode.pk) for key, (_, episode) in fresh.items())
        # What each new episode restates: new too, or already here.
        restating = []
        for entry, episode in fresh.values():
            if entry.get("restates") is not None:
                episode.restates_id = here[keys[uuid.UUID(entry["restates"])]]
                restating.append(episode)
        Episode.objects.bulk_update(restating, ["restates"], batch_size=WRITE_BATCH)
        options.here["episodes"] = {uid: here[key] for uid, key in keys.items()}
        self.summary(options, "Episodes", len(new), len(data))


def _key_of(episode: Episode) -> tuple:
    return _episode_key(episode.occurred_at, episode.created_at, episode.outcome, episode.text)


def _key_of_entry(entry: dict) -> tuple:
    occurred_at, created_at = when(entry["occurred_at"]), when(entry["created_at"])
    assert occurred_at is not None and created_at is not None  # required and checked, never null
    return _episode_key(occurred_at, created_at, entry["outcome"], entry["text"])


def _episodes_here(memory: Memory, keys: set[tuple]) -> dict[tuple, int]:
    """The episodes of ``memory`` with one of ``keys``, by key."""
    found: dict[tuple, int] = {}
    for chunk in in_batches({key[1] for key in keys}, WRITE_BATCH):
        for pk, *key in (
            Episode.objects.for_memory(memory)
            .filter(created_at__in=chunk)
            .values_list("pk", "occurred_at", "created_at", "outcome", "text")
        ):
            if tuple(key) in keys:
                found.setdefault(tuple(key), pk)
    return found


# Observations ---------------------------------------------------------------------------------


class EpisodeOf(Uid):
    """The episode an entry cites, by the uid the file gives it."""

    def to_representation(self, episode: Episode) -> str:
        return str(episode_uid(_key_of(episode)))


class ObservationEntry(Entry):
    fact = Uid(source="fact_uid")  # annotated by rows()
    source = SourceEntry(  # type: ignore[assignment]  # the file's key, not DRF's source
        allow_null=True, required=False
    )
    episode = EpisodeOf(allow_null=True, required=False)

    class Meta(Entry.Meta):
        model = Observation
        fields = (
            "kind",
            "text",
            "said_by_name",
            "channel",
            "outcome",
            "turn",
            "created_at",
            "fact",
            "source",
            "episode",
        )
        keys = {"said_by_name": "said_by"}
        extra_kwargs = required("created_at")


class ObservationsSection(Section[Memory]):
    key = "observations"
    entries = ObservationEntry

    def rows(self, memory: Memory, reader: Any):
        return (
            Observation.objects.readable_by(reader)
            .filter(fact__memory=memory)
            .select_related("source", "episode")
            .annotate(fact_uid=F("fact__uid"))
            .order_by("created_at", "pk")
        )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        added = options.added.get("facts", set())
        episodes = options.here.get("episodes", {})
        fresh = []
        for number, entry in enumerate(data, start=1):
            where = f"observations entry {number}"
            fact = _fact_here(options, where, entry, "fact")
            if uuid.UUID(entry["fact"]) not in added:
                continue  # its fact was here already, with its own history
            episode = entry.get("episode")
            if episode is not None and uuid.UUID(episode) not in episodes:
                raise ImportRejected(
                    f"{where} cites the episode {episode!r}, which the file does not hold; "
                    "nothing was imported."
                )
            fresh.append((entry, fact, episodes[uuid.UUID(episode)] if episode else None))
        sources = _sources(memory, [entry for entry, _, _ in fresh])
        Observation.objects.bulk_create(
            [
                Observation(
                    fact_id=fact,
                    episode_id=episode,
                    source=_cited(entry, sources),
                    **self.values(entry),
                )
                for entry, fact, episode in fresh
            ],
            batch_size=WRITE_BATCH,
        )
        self.summary(options, "Observations", len(fresh), len(data))


# Conflicts ------------------------------------------------------------------------------------


class ConflictEntries(Entries):
    def validate(self, attrs: list) -> list:
        open_pairs = (
            (index, (entry["old_uid"], entry["new_uid"]))
            for index, entry in enumerate(attrs)
            if entry.get("state", Conflict.State.OPEN) == Conflict.State.OPEN
        )
        refuse_repeats(open_pairs, "repeats an open conflict of an earlier entry.")
        return super().validate(attrs)


class ConflictEntry(Entry):
    old = Uid(source="old_uid")  # annotated by rows()
    new = Uid(source="new_uid")

    class Meta(Entry.Meta):
        model = Conflict
        fields = (
            "reason",
            "state",
            "resolution",
            "settled_by_name",
            "settled_at",
            "created_at",
            "old",
            "new",
        )
        keys = {"settled_by_name": "settled_by"}
        extra_kwargs = required("created_at")
        list_serializer_class = ConflictEntries

    def validate(self, attrs: dict) -> dict:
        if attrs["old_uid"] == attrs["new_uid"]:
            raise serializers.ValidationError("is between a fact and itself.")
        if (attrs.get("state") == Conflict.State.SETTLED) != bool(attrs.get("resolution")):
            raise serializers.ValidationError('has a "resolution" exactly when it is settled.')
        return attrs


class ConflictsSection(Section[Memory]):
    key = "conflicts"
    entries = ConflictEntry
    ordering = ("created_at", "pk")

    def rows(self, memory: Memory, reader: Any):
        return super().rows(memory, reader).annotate(old_uid=F("old__uid"), new_uid=F("new__uid"))

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        added = options.added.get("facts", set())
        new = []
        for number, entry in enumerate(data, start=1):
            where = f"conflicts entry {number}"
            old, raised_by = (_fact_here(options, where, entry, k) for k in ("old", "new"))
            if uuid.UUID(entry["new"]) in added:
                new.append(
                    Conflict(memory=memory, old_id=old, new_id=raised_by, **self.values(entry))
                )
        Conflict.objects.bulk_create(new, batch_size=WRITE_BATCH)
        # An open conflict waits in Review, as one the gate opened here would.
        ReviewItem.objects.bulk_create(
            [
                ReviewItem(
                    memory=memory,
                    kind=ReviewItem.Kind.CONFLICT,
                    conflict=conflict,
                    question=conflict.reason,
                    created_at=conflict.created_at,
                )
                for conflict in new
                if conflict.state == Conflict.State.OPEN
            ],
            batch_size=WRITE_BATCH,
        )
        self.summary(options, "Conflicts", len(new), len(data))


# Procedures -----------------------------------------------------------------------------------


class ProcedureEntries(Entries):
    def validate(self, attrs: list) -> list:
        ways = enumerate(statements.normalise(entry["text"]) for entry in attrs)
        refuse_repeats(ways, "repeats an earlier procedure.")
        return super().validate(attrs)


class ProcedureEntry(Entry):
    class Meta(Entry.Meta):
        model = Procedure
        fields = (
            "task",
            "steps",
            "text",
            "successes",
            "failures",
            "confidence",
            "recorded_by_name",
            "created_at",
            "last_run_at",
        )
        keys = {"recorded_by_name": "recorded_by"}
        extra_kwargs = {**between(0, 1, "confidence"), **required("created_at")}
        list_serializer_class = ProcedureEntries

    def validate_steps(self, steps: list) -> list:
        if not steps:
            raise serializers.ValidationError("has no steps.")
        return steps


class ProceduresSection(Section[Memory]):
    key = "procedures"
    entries = ProcedureEntry
    deferred = ("search_vector", "normalized")
    ordering = ("created_at", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        ways = {statements.normalise(entry["text"]): entry for entry in data}
        here = set(
            Procedure.objects.for_memory(memory)
            .filter(normalized__in=list(ways))
            .values_list("normalized", flat=True)
        )
        new = [
            Procedure(memory=memory, normalized=way, **self.values(entry))
            for way, entry in ways.items()
            if way not in here
        ]
        Procedure.objects.bulk_create(new, batch_size=WRITE_BATCH)
        self.summary(options, "Procedures", len(new), len(data))


# The core -------------------------------------------------------------------------------------


class CoreEntry(Entry):
    class Meta(Entry.Meta):
        model = Memory
        fields = ("core",)
        keys = {"core": "text"}


class CoreSection(Section[Memory]):
    """The pinned block, as ``{"text": ...}``."""

    key = "core"
    entries = CoreEntry
    many = False
    where = "The core"
    not_an_object = '"core" must be an object with the core\'s "text".'

    def rows(self, memory: Memory, reader: Any) -> Memory:
        return memory

    def load(self, memory: Memory, data: dict, options: ImportOptions) -> None:
        text = self.values(data)["core"]
        ours = Memory.objects.filter(pk=memory.pk).values_list("core", flat=True).get()
        if text == ours or not text.strip():
            options.report.append("Core: unchanged.")
            return
        if ours.strip() and not options.replace_memory:
            options.report.append(
                "Core: kept yours (it is not empty); pass --replace-memory to replace it with "
                "the imported one."
            )
            return
        Memory.objects.filter(pk=memory.pk).update(core=text)
        memory.core = text
        options.report.append("Core: imported.")


# Who may do what ------------------------------------------------------------------------------

PERMISSION_WORDS = {str(p.label): p.value for p in Permission}


class PermissionWord(Choice):
    """A permission as the file writes it: its word (read, teach …), not the number the row
    holds."""

    def to_representation(self, value: int) -> str:
        return Permission(value).label


class GrantEntries(Entries):
    def validate(self, attrs: list) -> list:
        people = enumerate(next(iter(entry["user"].values())) for entry in attrs)
        refuse_repeats(people, "repeats the grant of an earlier entry.")
        return super().validate(attrs)


class GrantEntry(serializers.Serializer):
    """Who may do what, by user name."""

    default_error_messages = Entry.default_error_messages

    class Meta:
        list_serializer_class = GrantEntries

    def get_fields(self) -> dict[str, serializers.Field]:
        User = get_user_model()
        name = User.USERNAME_FIELD
        return {
            "person": ref(User._meta.get_field(name), source=f"user.{name}", required=True),
            "permission": PermissionWord(choices=list(PERMISSION_WORDS)),
        }


class GrantsSection(Section[Memory]):
    key = "grants"
    entries = GrantEntry

    def rows(self, memory: Memory, reader: Any):
        User = get_user_model()
        return (
            Membership.objects.filter(memory=memory)
            .select_related("user")
            .order_by(f"user__{User.USERNAME_FIELD}")
        )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:
            return
        User = get_user_model()
        field = User.USERNAME_FIELD
        users = {
            user.get_username(): user
            for user in User.objects.filter(**{f"{field}__in": [e["person"] for e in data]})
        }
        held = set(Membership.objects.filter(memory=memory).values_list("user_id", flat=True))
        new, unknown = [], []
        for entry in data:
            user = users.get(entry["person"])
            if user is None:
                unknown.append(entry["person"])
            elif user.pk not in held:
                new.append(
                    Membership(
                        memory=memory, user=user, permission=PERMISSION_WORDS[entry["permission"]]
                    )
                )
        Membership.objects.bulk_create(new)
        skipped = (
            f"; {len(unknown)} skipped, for people this install has no account for "
            f"({', '.join(unknown)})"
        )
        self.summary(
            options, "Grants", len(new), len(data) - len(unknown), skipped if unknown else ""
        )


subjects_section = SubjectsSection()
facts_section = FactsSection()
episodes_section = EpisodesSection()
observations_section = ObservationsSection()
conflicts_section = ConflictsSection()
procedures_section = ProceduresSection()
core_section = CoreSection()
grants_section = GrantsSection()


# Who reads what: labels, roles, and passages with their labels and the facts citing them ------

# What a key of the labels and passages says when it is wrong, whatever is wrong with it.
INVALID = ("required", "invalid", "null", "blank", "max_length")


def _invalid(key: str) -> dict[str, Any]:
    """DRF field options for ``key`` refused in one sentence: 'has an invalid "key".'"""
    return {"error_messages": dict.fromkeys(INVALID, f'has an invalid "{key}".')}


class Names(serializers.ListField):
    """Names, each text that is not empty: ``named`` reads a row's."""

    def __init__(self, named: Callable[[Any], str], **kwargs: Any) -> None:
        self.named = named
        super().__init__(**kwargs)

    def bind(self, field_name: str, parent: Any) -> None:
        super().bind(field_name, parent)
        self.error_messages["invalid"] = f'has invalid "{field_name}" (a list of names).'

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list) or not all(isinstance(n, str) and n.strip() for n in data):
            self.fail("invalid")
        return data

    def to_representation(self, rows: Any) -> list[str]:
        return sorted(self.named(row) for row in rows.all())


class LabelEntry(Entry):
    default = Json(required=False)  # taken as true or false

    class Meta(Entry.Meta):
        model = Label
        fields = ("name", "meaning", "default")
        extra_kwargs = {
            "name": {"allow_blank": True, **_invalid("name")},
            "meaning": {"allow_null": False, "max_length": None, **_invalid("meaning")},
        }


class RoleEntry(Entry):
    everyone = Json(required=False)
    labels = Names(lambda label: label.name, required=False)
    members = Names(lambda person: person.get_username(), required=False)

    class Meta(Entry.Meta):
        model = Role
        fields = ("name", "everyone", "labels", "members")
        extra_kwargs = {"name": {"allow_blank": True, **_invalid("name")}}


class LabelsEntry(serializers.Serializer):
    labels = LabelEntry(many=True, required=False)
    roles = RoleEntry(many=True, required=False)


class LabelsSection(Section[Memory]):
    """The memory's labels (name, meaning, whether new sources take it) and roles (the labels
    each grants, whether everyone holds it, and the people named in it who have an account
    here). Existing labels and roles are matched by name and kept as they are."""

    key = "labels"
    entries = LabelsEntry
    many = False
    not_an_object = '"labels" must be an object with "labels" and "roles".'

    def rows(self, memory: Memory, reader: Any) -> dict:
        return {
            "labels": Label.objects.filter(memory=memory).order_by("name"),
            "roles": Role.objects.filter(memory=memory)
            .prefetch_related("labels", "members")
            .order_by("name"),
        }

    def load(self, memory: Memory, data: dict, options: ImportOptions) -> None:
        made = 0
        # A label of the file that reads like one of the memory's is that label
        # (knowledge.label_names): never a second label that looks the same.
        labels = {label_names.key(label.name): label for label in memory.labels.all()}
        for entry in data.get("labels", []):
            if label_names.key(entry["name"]) in labels or not label_names.clean(entry["name"]):
                continue
            label = Label.objects.create(
                memory=memory,
                name=label_names.clean(entry["name"]),
                meaning=entry.get("meaning", ""),
                default=bool(entry.get("default", False)),
            )
            labels[label_names.key(label.name)] = label
            made += 1
        User = get_user_model()
        for entry in data.get("roles", []):
            role, new = Role.objects.get_or_create(
                memory=memory, name=entry["name"], defaults={"everyone": entry.get("everyone")}
            )
            if new:
                named = (labels.get(label_names.key(n)) for n in entry.get("labels", []))
                role.labels.set([label for label in named if label is not None])
                field = User.USERNAME_FIELD
                role.members.set(User.objects.filter(**{f"{field}__in": entry.get("members", [])}))
        self.summary(options, "Labels", made, len(labels))


class CitedBy(serializers.ListField):
    """The facts that cite a passage, by uid: those its reader may read (``rows``)."""

    default_error_messages = {"invalid": 'has invalid "cited_by" (a list of fact uids).'}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list) or not all(is_uuid(uid) for uid in data):
            self.fail("invalid")
        return data

    def to_representation(self, facts: Any) -> list[str]:
        return sorted(str(fact.uid) for fact in facts.all())


class PassageEntry(serializers.Serializer):
    source = SourceEntry(  # type: ignore[assignment]  # the file's key, not DRF's source
        error_messages=dict.fromkeys(("required", "null"), 'has no "source".')
    )
    created_at = ref(
        Source.created_at, source="source.created_at", required=True, **_invalid("created_at")
    )
    text = Text(allow_blank=True, **_invalid("text"))
    labels = Names(lambda label: label.name, required=False)
    unsure = Json(required=False)  # taken as true or false
    cited_by = CitedBy(source="facts", required=False)

    default_error_messages = Entry.default_error_messages

    class Meta:
        list_serializer_class = Entries


class PassagesSection(Section[Memory]):
    """Each passage the person exporting may read: its source (as facts name theirs), its
    text, its labels by name, and the facts that cite it (by uid). On import a passage of the
    same source with the same text is the same passage: it takes the file's labels, and the
    facts the file names cite it — a fact only ever gains citations, so it is never read by more
    people than the file's labels allow. After the facts section: the facts must be there."""

    key = "passages"
    entries = PassageEntry

    def rows(self, memory: Memory, reader: Any):
        readable = Fact.objects.for_memory(memory).readable_by(reader).only("pk", "uid")
        return (
            Passage.objects.for_memory(memory)
            .readable_by(reader)
            .select_related("source")
            .prefetch_related("labels", Prefetch("facts", queryset=readable))
            .order_by("source_id", "ordinal")
        )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:
            return
        sources = _sources(memory, data)
        labels = {label_names.key(label.name): label for label in memory.labels.all()}
        facts = options.here.get("facts", {})
        made = 0
        for entry in data:
            source = _cited(entry, sources)
            assert source is not None  # check() requires every passage's source
            text = entry["text"]
            here = source.passages.as_system("an import finds the passage it names")
            passage = here.filter(text_hash=passages.text_hash(text)).first()
            if passage is None:
                (passage,) = passages.add(source, [text], labels=[])
                made += 1
            chosen = [
                labels[label_names.key(n)]
                for n in entry.get("labels", [])
                if label_names.key(n) in labels
            ]
            passages.set_labels([passage], chosen)
            Passage.objects.filter(pk=passage.pk).update(unsure=bool(entry.get("unsure")))
            cited = [
                facts[uuid.UUID(uid)]
                for uid in entry.get("cited_by", [])
                if uuid.UUID(uid) in facts
            ]
            Citation.objects.bulk_create(
                [Citation(fact_id=pk, passage=passage) for pk in cited], ignore_conflicts=True
            )
        self.summary(options, "Passages", made, len(data))


labels_section = LabelsSection()
passages_section = PassagesSection()
