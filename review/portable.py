"""The review app's part of the portable file: the findings work list, the rules your Not a
problem presses made, the guesses you answered, brain's judgements about its own calls, and the
timeline.

Declared with ``brain.portable.Section``, each entry a DRF serializer whose checks come from the
model (limits, choices, null and blank); this module keeps what spans rows. References are
resolved in the memory the file is folded into: an entity id becomes that memory's subject when
it has one. A rule whose entity is not (yet) known keeps its entity id, so the new install stays
quiet where you told the old one "not here" as soon as the entity appears. Entries already here
win (matched by uid; a judgement by its check and entity; a timeline event by its kind, time and
words), so importing the same file twice changes nothing. Every entry is checked before
anything is written.

Timeline events name the finding or fact they are about by uid in the file; an import points
them at that row here, and leaves the reference out when this memory does not hold it. Imported
events keep when they were pushed to Home Assistant and are never pushed again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from brain.portable import (
    LOOKUP_BATCH,
    Entries,
    Entry,
    ImportOptions,
    Section,
    Uid,
    in_batches,
    is_uuid,
    placed,
    placements,
    ref,
    refuse_repeats,
    required,
    when,
)
from knowledge import statements
from knowledge.embedding import embedder_for, vectors_or_none
from knowledge.models import Fact, Memory, Subject
from review.models import MAX_TEXT, Event, Finding, Guess, Judgement, Rule

LIVE = (Finding.State.OPEN, Finding.State.SUPPRESSED)
TEXT = {"max_length": MAX_TEXT}


def _subjects_by_entity(memory: Memory, entity_ids) -> dict[str, Subject]:
    wanted = {e for e in entity_ids if e}
    if not wanted:
        return {}
    return {
        s.entity_id: s
        for s in Subject.objects.as_system("an import finds what it names")
        .for_memory(memory)
        .filter(entity_id__in=wanted)
    }


class FindingEntry(Entry):
    class Meta(Entry.Meta):
        model = Finding
        fields = (
            "uid",
            "check_id",
            "entity_id",
            "severity",
            "text",
            "is_todo",
            "protected",
            "state",
            "settled_how",
            "first_raised_at",
            "last_raised_at",
            "settled_at",
            "suppressed_until",
            "times_raised",
            "reason",
        )
        keys = {"check_id": "check", "is_todo": "todo"}
        extra_kwargs = {
            "text": TEXT,
            **required("state", "first_raised_at", "last_raised_at"),
            "times_raised": {"required": True, "min_value": 1},
        }

    def validate(self, attrs: dict) -> dict:
        if attrs["state"] == Finding.State.SUPPRESSED and attrs.get("settled_at") is None:
            raise serializers.ValidationError('is fixed but has no "settled_at".')
        return attrs


class FindingsSection(Section[Memory]):
    """Findings: what the house checks raised and how each was settled."""

    key = "findings"
    entries = FindingEntry
    ordering = ("first_raised_at", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        fresh = placed(Finding, memory, data)
        subjects = _subjects_by_entity(memory, (entry.get("entity_id", "") for entry, _ in fresh))
        # One live finding per check and entity: brain's own one, when it has one, wins.
        live = set(
            Finding.objects.for_memory(memory)
            .filter(state__in=LIVE)
            .values_list("check_id", "entity_id")
        )
        new, kept_ours = [], 0
        for entry, uid in fresh:
            values = self.values(entry)
            values["check_id"] = values["check_id"].strip()
            pair = (values["check_id"], values["entity_id"])
            if entry["state"] in LIVE:
                if pair in live:
                    kept_ours += 1
                    continue
                live.add(pair)
            new.append(Finding(uid=uid, memory=memory, subject=subjects.get(pair[1]), **values))
        Finding.objects.bulk_create(new)
        ours = f" ({kept_ours} open here already)"
        self.summary(options, "Findings", len(new), len(data), ours if kept_ours else "")


class RuleEntry(Entry):
    room = ref(Subject.name, source="room.name", allow_blank=True, default="")  # or "" for none
    finding = Uid(source="finding.uid", allow_null=True, required=False)

    class Meta(Entry.Meta):
        model = Rule
        fields = (
            "uid",
            "check_id",
            "scope",
            "entity_id",
            "until",
            "reason",
            "origin",
            "created_at",
            "removed_at",
            "room",
            "finding",
        )
        keys = {"check_id": "check"}
        extra_kwargs = required("scope", "created_at")


class RulesSection(Section[Memory]):
    """Rules you set: the checks told "not here", how far and for how long."""

    key = "rules"
    entries = RuleEntry
    related = ("room", "finding")
    ordering = ("created_at", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        fresh = placed(Rule, memory, data)
        subjects = _subjects_by_entity(memory, (entry.get("entity_id", "") for entry, _ in fresh))
        rooms = {
            room.name.casefold(): room
            for room in Subject.objects.as_system("an import finds what it names")
            .for_memory(memory)
            .filter(kind=Subject.Kind.ROOM)
        }
        # The findings section ran first: a rule finds its finding under the uid it got here.
        linked = placements(
            Finding, memory, (uuid.UUID(e["finding"]) for e, _ in fresh if e.get("finding"))
        )
        findings = dict(
            Finding.objects.for_memory(memory)
            .filter(uid__in=[uid for uid, here in linked.values() if here])
            .values_list("uid", "pk")
        )
        new = []
        for entry, uid in fresh:
            values = self.values(entry)
            values["check_id"] = values["check_id"].strip()
            subject = subjects.get(values["entity_id"])
            room = rooms.get(entry.get("room", "").casefold()) or (
                subject.room if subject and subject.room_id else None
            )
            finding_id = (
                findings.get(linked[uuid.UUID(entry["finding"])][0])
                if entry.get("finding")
                else None
            )
            new.append(
                Rule(
                    uid=uid,
                    memory=memory,
                    subject=subject,
                    room=room,
                    finding_id=finding_id,
                    created_by=None,
                    **values,
                )
            )
        Rule.objects.bulk_create(new)
        self.summary(options, "Rules", len(new), len(data))


ANSWERED = (Guess.State.CONFIRMED, Guess.State.REJECTED)


class GuessEntry(Entry):
    class Meta(Entry.Meta):
        model = Guess
        fields = ("uid", "text", "state", "created_at", "answered_at", "reason")
        extra_kwargs = {
            "text": TEXT,
            **required("state"),
            "created_at": {"allow_null": True},  # none: when it was answered
        }

    def validate_state(self, state: str) -> str:
        if state not in ANSWERED:
            raise serializers.ValidationError(
                f"is {state!r}; only confirmed or rejected guesses travel."
            )
        return state


class AnsweredGuessesSection(Section[Memory]):
    """Guesses you answered yes or no: never asked again, in any wording."""

    key = "guesses"
    entries = GuessEntry
    ordering = ("answered_at", "pk")

    def rows(self, memory: Memory, reader: Any):
        return super().rows(memory, reader).settled()

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        fresh = placed(Guess, memory, data)
        # Vectors from this memory's embedder, so a rewording is recognised here too; none when
        # its worker gives none (an import is one transaction, which a worker cannot see into):
        # such a guess is recognised by its words.
        embedder = embedder_for(memory)
        texts = [entry["text"] for entry, _ in fresh]
        vectors: Sequence[list[float] | None] = (
            vectors_or_none(embedder, texts) if fresh else []
        ) or [None] * len(fresh)
        new = []
        for (entry, uid), vector in zip(fresh, vectors, strict=True):
            values = self.values(entry)
            values["created_at"] = (
                when(entry.get("created_at") or entry.get("answered_at")) or timezone.now()
            )
            new.append(
                Guess(
                    uid=uid,
                    memory=memory,
                    normalized=statements.normalise(entry["text"]),
                    embedding=vector,
                    embedder=embedder.name if vector is not None else "",
                    **values,
                )
            )
        Guess.objects.bulk_create(new)
        self.summary(options, "Answered guesses", len(new), len(data))


class JudgementEntries(Entries):
    def validate(self, attrs: list) -> list:
        pairs = enumerate(
            (entry["check_id"].strip(), entry.get("subject", {}).get("entity_id", ""))
            for entry in attrs
        )
        refuse_repeats(pairs, "repeats the check and entity of an earlier entry.")
        return super().validate(attrs)


class JudgementEntry(Entry):
    entity_id = ref(Subject.entity_id, source="subject.entity_id", default="")
    # The fact that states it.
    text = ref(Fact.text, source="fact.text", allow_blank=True, default="", **TEXT)

    class Meta(Entry.Meta):
        model = Judgement
        fields = ("check_id", "raised", "marked_not_a_problem", "renewed_at", "entity_id", "text")
        keys = {"check_id": "check"}
        extra_kwargs = required("renewed_at")
        list_serializer_class = JudgementEntries

    def validate(self, attrs: dict) -> dict:
        if attrs.get("marked_not_a_problem", 0) > attrs.get("raised", 0):
            raise serializers.ValidationError(
                'has invalid counts ("marked_not_a_problem" of "raised").'
            )
        return attrs


class JudgementsSection(Section[Memory]):
    """brain's arithmetic about its own calls, one per check and entity."""

    key = "judgements"
    entries = JudgementEntry
    related = ("subject", "fact")
    ordering = ("check_id", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        subjects = _subjects_by_entity(memory, (entry.get("entity_id", "") for entry in data))
        ours = set(Judgement.objects.filter(memory=memory).values_list("check_id", "subject_id"))
        new, elsewhere = [], 0
        for entry in data:
            entity_id = entry.get("entity_id", "")
            subject = subjects.get(entity_id)
            if entity_id and subject is None:
                elsewhere += 1  # about something this house does not have
                continue
            values = self.values(entry)
            values["check_id"] = values["check_id"].strip()
            if (values["check_id"], subject.pk if subject else None) in ours:
                continue
            fact = (
                Fact.objects.as_system("an import finds what it names")
                .for_memory(memory)
                .live()
                .filter(kind=Fact.Kind.JUDGEMENT, text=entry["text"])
                .first()
                if entry.get("text")
                else None
            )
            new.append(Judgement(memory=memory, subject=subject, fact=fact, **values))
        Judgement.objects.bulk_create(new)
        about = f" ({elsewhere} about entities this memory does not have)"
        self.summary(options, "Judgements", len(new), len(data), about if elsewhere else "")


# Keys of an event's data that name a row, and the model of that row.
ROWS_NAMED = {"finding": Finding, "fact": Fact}


class EventEntries(Entries):
    def to_representation(self, rows: Any) -> list[dict]:
        """Each event, the rows its data names by uid rather than by number."""
        events = list(rows)
        memory = events[0].memory_id if events else None
        uids = {
            name: _uids_of(model, memory, {e.data.get(name) for e in events})
            for name, model in ROWS_NAMED.items()
        }
        entries = super().to_representation(events)
        for event, entry in zip(events, entries, strict=True):
            entry["data"] = {
                name: _as_uid(uids[name].get(value)) if name in uids else value
                for name, value in event.data.items()
            }
        return entries


class EventEntry(Entry):
    class Meta(Entry.Meta):
        model = Event
        fields = ("kind", "text", "data", "created_at", "pushed_at")
        extra_kwargs = required("created_at")
        list_serializer_class = EventEntries

    def validate_data(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError('has an invalid "data" (an object).')
        for name in ROWS_NAMED:
            if not (data.get(name) is None or is_uuid(data[name])):
                raise serializers.ValidationError(
                    f'has an invalid "{name}" in its data (a uid, or null).'
                )
        return data


class EventsSection(Section[Memory]):
    """The timeline: what brain learned and what the checks raised, as it happened."""

    key = "events"
    entries = EventEntry
    ordering = ("created_at", "pk")

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        here: set[tuple] = set()
        stamps = {stamp for e in data if (stamp := when(e["created_at"])) is not None}
        for chunk in in_batches(stamps, LOOKUP_BATCH):  # a time no row has matches none
            here.update(
                Event.objects.as_system("an import finds what it names")
                .for_memory(memory)
                .filter(created_at__in=chunk)
                .values_list("kind", "created_at", "text")
            )
        pks = {
            name: _pks_here(model, memory, {e.get("data", {}).get(name) for e in data})
            for name, model in ROWS_NAMED.items()
        }
        new = []
        for entry in data:
            values = self.values(entry)
            key = (values["kind"], values["created_at"], values["text"])
            if key in here:
                continue
            here.add(key)
            values["data"] = {
                name: (pks[name].get(value) if name in pks else value)
                for name, value in values["data"].items()
            }
            new.append(Event(memory=memory, **values))
        Event.objects.bulk_create(new)
        self.summary(options, "Timeline", len(new), len(data))


def _as_uid(uid: uuid.UUID | None) -> str | None:
    return str(uid) if uid is not None else None


def _uids_of(model, memory: int | None, pks: set[Any]) -> dict[int, uuid.UUID]:
    """The uid of each row of ``model`` in the memory ``memory`` (its pk) whose pk is in
    ``pks``."""
    wanted = [pk for pk in pks if isinstance(pk, int)]
    found: dict[int, uuid.UUID] = {}
    for chunk in in_batches(wanted, LOOKUP_BATCH):
        # Ids to uids for rows the exported entries name: no row's words are read.
        named = model._base_manager.filter(memory_id=memory, pk__in=chunk)
        found.update(named.values_list("pk", "uid"))
    return found


def _pks_here(model, memory: Memory, uids: set[str | None]) -> dict[str, int]:
    """The row in ``memory`` each uid of the file names, by that uid as the file writes it."""
    wanted = {uuid.UUID(uid): uid for uid in uids if uid is not None}
    where = {
        here: wanted[uid]
        for uid, (here, present) in placements(model, memory, wanted).items()
        if present
    }
    found: dict[str, int] = {}
    for chunk in in_batches(where, LOOKUP_BATCH):
        rows = model._base_manager.filter(memory=memory, uid__in=chunk).values_list("uid", "pk")
        found.update((where[uid], pk) for uid, pk in rows)
    return found


findings_section = FindingsSection()
rules_section = RulesSection()
guesses_section = AnsweredGuessesSection()
judgements_section = JudgementsSection()
events_section = EventsSection()
