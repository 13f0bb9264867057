"""The review app's part of the portable file: the findings work list, the rules your Not a
problem presses made, the guesses you answered, brain's judgements about its own calls, and the
timeline.

Declared with ``brain.portable.Section``: each column's checks come from the model (limits,
choices, null and blank), and this module keeps what spans rows. References are resolved in the
memory the file is folded into: an entity id becomes that memory's subject when it has one. A
rule whose entity is not (yet) known keeps its entity id, so the new install stays quiet where
you told the old one "not here" as soon as the entity appears. Entries already here win
(matched by uid; a judgement by its check and entity; a timeline event by its kind, time and
words), so importing the same file twice changes nothing. Every entry is checked before anything
is written.

Timeline events name the finding or fact they are about by uid in the file; an import points
them at that row here, and leaves the reference out when this memory does not hold it. Imported
events keep when they were pushed to Home Assistant and are never pushed again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.core.validators import MaxLengthValidator, MinValueValidator
from django.utils import timezone

from brain.portable import (
    UID,
    ImportOptions,
    Section,
    col,
    export_reader,
    in_batches,
    is_uuid,
    placed,
    placements,
    ref,
    require,
    when,
)
from knowledge import statements
from knowledge.embedding import embedder_for, vectors_or_none
from knowledge.models import Fact, Memory, Subject
from review.models import MAX_TEXT, Event, Finding, Guess, Judgement, Rule

LIVE = (Finding.State.OPEN, Finding.State.SUPPRESSED)
LOOKUP_BATCH = 10_000
TEXT = (MaxLengthValidator(MAX_TEXT),)


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


class FindingsSection(Section[Finding, Memory]):
    """Findings: what the house checks raised and how each was settled."""

    key = "findings"
    model = Finding
    columns = (
        col("check_id", key="check"),
        col("entity_id"),
        col("severity"),
        col("text", validators=TEXT),
        col("is_todo", key="todo"),
        col("protected"),
        col("state", required=True),
        col("settled_how"),
        col("first_raised_at", required=True),
        col("last_raised_at", required=True),
        col("settled_at"),
        col("suppressed_until"),
        col("times_raised", required=True, validators=(MinValueValidator(1),)),
        col("reason"),
    )

    def rows(self, memory: Memory):
        return Finding.objects.for_memory(memory).order_by("first_raised_at", "pk")

    def check_entry(self, where: str, entry: dict) -> None:
        require(
            entry["state"] != Finding.State.SUPPRESSED or entry.get("settled_at") is not None,
            f'{where} is fixed but has no "settled_at".',
        )

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
        options.report.append(
            f"Findings: {len(new)} added, {len(data) - len(new)} already here"
            + (f" ({kept_ours} open here already)." if kept_ours else ".")
        )


class RulesSection(Section[Rule, Memory]):
    """Rules you set: the checks told "not here", how far and for how long."""

    key = "rules"
    model = Rule
    columns = (
        col("check_id", key="check"),
        col("scope", required=True),
        col("entity_id"),
        ref("room", Subject.name, blank=True),  # a room's name, or "" for none
        col("until"),
        col("reason"),
        col("origin"),
        ref("finding", UID, null=True),
        col("created_at", required=True),
        col("removed_at"),
    )

    def rows(self, memory: Memory):
        return (
            Rule.objects.for_memory(memory)
            .select_related("room", "finding")
            .order_by("created_at", "pk")
        )

    def links(self, rule: Rule) -> dict:
        return {
            "room": rule.room.name if rule.room else "",
            "finding": str(rule.finding.uid) if rule.finding else None,
        }

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


class AnsweredGuessesSection(Section[Guess, Memory]):
    """Guesses you answered yes or no: never asked again, in any wording."""

    key = "guesses"
    model = Guess
    states = (Guess.State.CONFIRMED, Guess.State.REJECTED)
    columns = (
        col("text", validators=TEXT),
        col("state", required=True),
        col("created_at", null=True),  # none: when it was answered
        col("answered_at"),
        col("reason"),
    )

    def rows(self, memory: Memory):
        return Guess.objects.for_memory(memory).settled().order_by("answered_at", "pk")

    def check_entry(self, where: str, entry: dict) -> None:
        require(
            entry["state"] in self.states,
            f"{where} is {entry['state']!r}; only confirmed or rejected guesses travel.",
        )

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


class JudgementsSection(Section[Judgement, Memory]):
    """brain's arithmetic about its own calls, one per check and entity."""

    key = "judgements"
    model = Judgement
    uid = False
    columns = (
        col("check_id", key="check"),
        ref("entity_id", Subject.entity_id),
        col("raised"),
        col("marked_not_a_problem"),
        col("renewed_at", required=True),
        ref("text", Fact.text, blank=True, validators=TEXT),  # the fact that states it
    )

    def rows(self, memory: Memory):
        return (
            Judgement.objects.filter(memory=memory)
            .select_related("subject", "fact")
            .order_by("check_id", "pk")
        )

    def links(self, judgement: Judgement) -> dict:
        return {
            "entity_id": judgement.subject.entity_id if judgement.subject else "",
            "text": judgement.fact.text if judgement.fact else "",
        }

    def check_entry(self, where: str, entry: dict) -> None:
        require(
            entry["marked_not_a_problem"] <= entry["raised"],
            f'{where} has invalid counts ("marked_not_a_problem" of "raised").',
        )

    def check_all(self, data: list[dict]) -> None:
        seen = set()
        for number, entry in enumerate(data, start=1):
            pair = (entry["check"].strip(), entry.get("entity_id", ""))
            require(
                pair not in seen,
                f"judgements entry {number} repeats the check and entity of an earlier entry.",
            )
            seen.add(pair)

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
        options.report.append(
            f"Judgements: {len(new)} added, {len(data) - len(new)} already here"
            + (f" ({elsewhere} about entities this memory does not have)." if elsewhere else ".")
        )


class EventsSection(Section[Event, Memory]):
    """The timeline: what brain learned and what the checks raised, as it happened."""

    key = "events"
    model = Event
    uid = False
    columns = (
        col("kind"),
        col("text"),
        col("data"),
        col("created_at", required=True),
        col("pushed_at"),
    )
    # Keys of an event's data that name a row, and the model of that row.
    rows_named = {"finding": Finding, "fact": Fact}

    def rows(self, memory: Memory):
        events = Event.objects.for_memory(memory).readable_by(export_reader())
        return events.order_by("created_at", "pk")

    def dump(self, memory: Memory) -> list[dict]:
        events = list(self.rows(memory))
        uids = {
            name: _uids_of(model, memory, {e.data.get(name) for e in events})
            for name, model in self.rows_named.items()
        }
        entries = []
        for event in events:
            entry = self.entry(event)
            entry["data"] = {
                name: _as_uid(uids[name].get(value)) if name in uids else value
                for name, value in event.data.items()
            }
            entries.append(entry)
        return entries

    def check_entry(self, where: str, entry: dict) -> None:
        data = entry.get("data", {})
        require(isinstance(data, dict), f'{where} has an invalid "data" (an object).')
        for name in self.rows_named:
            require(
                data.get(name) is None or is_uuid(data[name]),
                f'{where} has an invalid "{name}" in its data (a uid, or null).',
            )

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
            for name, model in self.rows_named.items()
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


def _uids_of(model, memory: Memory, pks: set[Any]) -> dict[int, uuid.UUID]:
    """The uid of each row of ``model`` in ``memory`` whose pk is in ``pks``."""
    wanted = [pk for pk in pks if isinstance(pk, int)]
    found: dict[int, uuid.UUID] = {}
    for chunk in in_batches(wanted, LOOKUP_BATCH):
        # Ids to uids for rows the exported entries name: no row's words are read.
        named = model._base_manager.filter(memory=memory, pk__in=chunk)
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
