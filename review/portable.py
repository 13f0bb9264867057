"""The review app's part of the portable file: the findings work list, the rules your Not a
problem presses made, the guesses you answered, and brain's judgements about its own calls.

References are resolved in the memory the file is folded into: an entity id becomes that
memory's subject when it has one. A rule whose entity is not (yet) known keeps its entity id, so
the new install stays quiet where you told the old one "not here" as soon as the entity appears.
Entries already here win (matched by uid; a judgement by its check and entity), so importing the
same file twice changes nothing. Every entry is checked before anything is written.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone

from brain.portable import (
    ImportOptions,
    is_datetime,
    is_name,
    is_optional_datetime,
    is_uuid,
    placed,
    placements,
    require,
    when,
)
from knowledge import statements
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory, Subject
from review.actions import MAX_REASON, MAX_TEXT
from review.models import Finding, Guess, Judgement, Rule, Severity

CHECK_CHARS = 100  # Finding.check_id, Rule.check_id, Judgement.check_id
ENTITY_CHARS = 255  # …entity_id
ROOM_CHARS = 200  # Subject.name
LIVE = (Finding.State.OPEN, Finding.State.SUPPRESSED)


def _iso(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


def _is_count(value: Any, *, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _is_text(value: Any, limit: int) -> bool:
    return isinstance(value, str) and len(value.strip()) > 0 and len(value) <= limit


def _entries(data: Any, key: str, *, uids: bool = True):
    """Each entry of a list, numbered from 1, checked to be an object with a fresh valid uid."""
    require(isinstance(data, list), f'"{key}" must be a list.')
    seen: set[uuid.UUID] = set()
    for number, entry in enumerate(data, start=1):
        require(isinstance(entry, dict), f"{key} entry {number} is not an object.")
        if uids:
            require(is_uuid(entry.get("uid")), f"{key} entry {number} has no valid uid.")
            uid = uuid.UUID(entry["uid"])
            require(uid not in seen, f"{key} entry {number} repeats the uid of an earlier entry.")
            seen.add(uid)
        yield number, entry


def _subjects_by_entity(memory: Memory, entity_ids) -> dict[str, Subject]:
    wanted = {e for e in entity_ids if e}
    if not wanted:
        return {}
    return {s.entity_id: s for s in Subject.objects.for_memory(memory).filter(entity_id__in=wanted)}


class FindingsSection:
    """Findings: what the house checks raised and how each was settled."""

    key = "findings"

    def dump(self, memory: Memory) -> list[dict]:
        return [
            {
                "uid": str(f.uid),
                "check": f.check_id,
                "entity_id": f.entity_id,
                "severity": f.severity,
                "text": f.text,
                "todo": f.is_todo,
                "protected": f.protected,
                "state": f.state,
                "settled_how": f.settled_how,
                "first_raised_at": _iso(f.first_raised_at),
                "last_raised_at": _iso(f.last_raised_at),
                "settled_at": _iso(f.settled_at),
                "suppressed_until": _iso(f.suppressed_until),
                "times_raised": f.times_raised,
                "reason": f.reason,
            }
            for f in Finding.objects.for_memory(memory).order_by("first_raised_at", "pk")
        ]

    def check(self, data) -> None:
        for n, entry in _entries(data, self.key):
            where = f"findings entry {n}"
            require(
                _is_text(entry.get("check"), CHECK_CHARS),
                f'{where} has no valid "check" (at most {CHECK_CHARS} characters).',
            )
            require(
                is_name(entry.get("entity_id", ""), ENTITY_CHARS),
                f'{where} has an invalid "entity_id".',
            )
            require(
                entry.get("severity") in Severity.values,
                f"{where} has an unknown severity {entry.get('severity')!r} (high, medium or low).",
            )
            require(
                _is_text(entry.get("text"), MAX_TEXT),
                f"{where} has no text, or more than {MAX_TEXT:,} characters.",
            )
            require(entry.get("state") in Finding.State.values, f"{where} has an unknown state.")
            require(
                entry.get("settled_how", "") in ["", *Finding.Settled.values],
                f'{where} has an unknown "settled_how".',
            )
            for name in ("first_raised_at", "last_raised_at"):
                require(is_datetime(entry.get(name)), f'{where} has an invalid "{name}".')
            for name in ("settled_at", "suppressed_until"):
                require(is_optional_datetime(entry.get(name)), f'{where} has an invalid "{name}".')
            require(
                entry.get("state") != Finding.State.SUPPRESSED
                or entry.get("settled_at") is not None,
                f'{where} is fixed but has no "settled_at".',
            )
            require(
                _is_count(entry.get("times_raised"), least=1),
                f'{where} has an invalid "times_raised" (a whole number from 1).',
            )
            require(
                is_name(entry.get("reason", ""), MAX_REASON),
                f'{where} has an invalid "reason" (at most {MAX_REASON} characters).',
            )
            for name in ("todo", "protected"):
                require(
                    isinstance(entry.get(name, False), bool), f'{where} has an invalid "{name}".'
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
            pair = (entry["check"].strip(), entry.get("entity_id", ""))
            if entry["state"] in LIVE:
                if pair in live:
                    kept_ours += 1
                    continue
                live.add(pair)
            new.append(
                Finding(
                    uid=uid,
                    memory=memory,
                    check_id=pair[0],
                    subject=subjects.get(pair[1]),
                    entity_id=pair[1],
                    severity=entry["severity"],
                    text=entry["text"],
                    is_todo=entry.get("todo", False),
                    protected=entry.get("protected", False),
                    state=entry["state"],
                    settled_how=entry.get("settled_how", ""),
                    first_raised_at=when(entry["first_raised_at"]),
                    last_raised_at=when(entry["last_raised_at"]),
                    settled_at=when(entry.get("settled_at")),
                    suppressed_until=when(entry.get("suppressed_until")),
                    times_raised=entry["times_raised"],
                    reason=entry.get("reason", ""),
                )
            )
        Finding.objects.bulk_create(new)
        options.report.append(
            f"Findings: {len(new)} added, {len(data) - len(new)} already here"
            + (f" ({kept_ours} open here already)." if kept_ours else ".")
        )


class RulesSection:
    """Rules you set: the checks told "not here", how far and for how long."""

    key = "rules"

    def dump(self, memory: Memory) -> list[dict]:
        rows = (
            Rule.objects.for_memory(memory)
            .select_related("room", "finding")
            .order_by("created_at", "pk")
        )
        return [
            {
                "uid": str(r.uid),
                "check": r.check_id,
                "scope": r.scope,
                "entity_id": r.entity_id,
                "room": r.room.name if r.room else "",
                "until": _iso(r.until),
                "reason": r.reason,
                "origin": r.origin,
                "finding": str(r.finding.uid) if r.finding else None,
                "created_at": _iso(r.created_at),
                "removed_at": _iso(r.removed_at),
            }
            for r in rows
        ]

    def check(self, data) -> None:
        for n, entry in _entries(data, self.key):
            where = f"rules entry {n}"
            require(
                _is_text(entry.get("check"), CHECK_CHARS),
                f'{where} has no valid "check" (at most {CHECK_CHARS} characters).',
            )
            require(
                entry.get("scope") in Rule.Scope.values,
                f"{where} has an unknown scope {entry.get('scope')!r} "
                f"({', '.join(Rule.Scope.values)}).",
            )
            require(
                is_name(entry.get("entity_id", ""), ENTITY_CHARS),
                f'{where} has an invalid "entity_id".',
            )
            require(is_name(entry.get("room", ""), ROOM_CHARS), f'{where} has an invalid "room".')
            require(
                entry.get("origin") in Rule.Origin.values,
                f"{where} has an unknown origin {entry.get('origin')!r}.",
            )
            require(
                is_name(entry.get("reason", ""), MAX_REASON),
                f'{where} has an invalid "reason" (at most {MAX_REASON} characters).',
            )
            require(is_datetime(entry.get("created_at")), f'{where} has an invalid "created_at".')
            for name in ("until", "removed_at"):
                require(is_optional_datetime(entry.get(name)), f'{where} has an invalid "{name}".')
            finding = entry.get("finding")
            require(finding is None or is_uuid(finding), f'{where} has an invalid "finding".')

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        fresh = placed(Rule, memory, data)
        subjects = _subjects_by_entity(memory, (entry.get("entity_id", "") for entry, _ in fresh))
        rooms = {
            room.name.casefold(): room
            for room in Subject.objects.for_memory(memory).filter(kind=Subject.Kind.ROOM)
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
            subject = subjects.get(entry.get("entity_id", ""))
            room = rooms.get(entry.get("room", "").casefold()) or (
                subject.room if subject and subject.room_id else None
            )
            finding_uid = linked[uuid.UUID(entry["finding"])][0] if entry.get("finding") else None
            new.append(
                Rule(
                    uid=uid,
                    memory=memory,
                    check_id=entry["check"].strip(),
                    scope=entry["scope"],
                    subject=subject,
                    entity_id=entry.get("entity_id", ""),
                    room=room,
                    until=when(entry.get("until")),
                    reason=entry.get("reason", ""),
                    origin=entry["origin"],
                    finding_id=findings.get(finding_uid),
                    created_by=None,
                    created_at=when(entry["created_at"]),
                    removed_at=when(entry.get("removed_at")),
                )
            )
        Rule.objects.bulk_create(new)
        options.report.append(f"Rules: {len(new)} added, {len(data) - len(new)} already here.")


class AnsweredGuessesSection:
    """Guesses you answered yes or no: never asked again, in any wording."""

    key = "guesses"
    states = (Guess.State.CONFIRMED, Guess.State.REJECTED)

    def dump(self, memory: Memory) -> list[dict]:
        rows = Guess.objects.for_memory(memory).settled().order_by("answered_at", "pk")
        return [
            {
                "uid": str(g.uid),
                "text": g.text,
                "state": g.state,
                "created_at": _iso(g.created_at),
                "answered_at": _iso(g.answered_at),
                "reason": g.reason,
            }
            for g in rows
        ]

    def check(self, data) -> None:
        for n, entry in _entries(data, self.key):
            where = f"guesses entry {n}"
            require(
                _is_text(entry.get("text"), MAX_TEXT),
                f"{where} has no text, or more than {MAX_TEXT:,} characters.",
            )
            require(
                entry.get("state") in self.states,
                f"{where} is {entry.get('state')!r}; only confirmed or rejected guesses travel.",
            )
            for name in ("created_at", "answered_at"):
                require(is_optional_datetime(entry.get(name)), f'{where} has an invalid "{name}".')
            require(
                is_name(entry.get("reason", ""), MAX_REASON),
                f'{where} has an invalid "reason" (at most {MAX_REASON} characters).',
            )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        if not data:  # the file carries none: nothing to say
            return
        fresh = placed(Guess, memory, data)
        # Vectors from this install's embedder, so a rewording is recognised here too.
        embedder = get_embedder()
        vectors = embedder.embed([entry["text"] for entry, _ in fresh]) if fresh else []
        Guess.objects.bulk_create(
            [
                Guess(
                    uid=uid,
                    memory=memory,
                    text=entry["text"],
                    normalized=statements.normalise(entry["text"]),
                    embedding=vector,
                    embedder=embedder.name,
                    state=entry["state"],
                    created_at=when(entry.get("created_at") or entry.get("answered_at"))
                    or timezone.now(),
                    answered_at=when(entry.get("answered_at")),
                    reason=entry.get("reason", ""),
                )
                for (entry, uid), vector in zip(fresh, vectors, strict=True)
            ]
        )
        options.report.append(
            f"Answered guesses: {len(fresh)} added, {len(data) - len(fresh)} already here."
        )


class JudgementsSection:
    """brain's arithmetic about its own calls, one per check and entity."""

    key = "judgements"

    def dump(self, memory: Memory) -> list[dict]:
        rows = (
            Judgement.objects.filter(memory=memory)
            .select_related("subject", "fact")
            .order_by("check_id", "pk")
        )
        return [
            {
                "check": j.check_id,
                "entity_id": j.subject.entity_id if j.subject else "",
                "raised": j.raised,
                "marked_not_a_problem": j.marked_not_a_problem,
                "renewed_at": _iso(j.renewed_at),
                "text": j.fact.text if j.fact else "",
            }
            for j in rows
        ]

    def check(self, data) -> None:
        seen = set()
        for n, entry in _entries(data, self.key, uids=False):
            where = f"judgements entry {n}"
            require(
                _is_text(entry.get("check"), CHECK_CHARS),
                f'{where} has no valid "check" (at most {CHECK_CHARS} characters).',
            )
            require(
                is_name(entry.get("entity_id", ""), ENTITY_CHARS),
                f'{where} has an invalid "entity_id".',
            )
            raised, marked = entry.get("raised"), entry.get("marked_not_a_problem")
            require(
                _is_count(raised) and _is_count(marked) and marked <= raised,
                f'{where} has invalid counts ("marked_not_a_problem" of "raised").',
            )
            require(is_datetime(entry.get("renewed_at")), f'{where} has an invalid "renewed_at".')
            require(is_name(entry.get("text", ""), MAX_TEXT), f'{where} has an invalid "text".')
            pair = (entry["check"].strip(), entry.get("entity_id", ""))
            require(pair not in seen, f"{where} repeats the check and entity of an earlier entry.")
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
            key = (entry["check"].strip(), subject.pk if subject else None)
            if key in ours:
                continue
            fact = (
                Fact.objects.for_memory(memory)
                .live()
                .filter(kind=Fact.Kind.JUDGEMENT, text=entry["text"])
                .first()
                if entry.get("text")
                else None
            )
            new.append(
                Judgement(
                    memory=memory,
                    check_id=key[0],
                    subject=subject,
                    raised=entry["raised"],
                    marked_not_a_problem=entry["marked_not_a_problem"],
                    fact=fact,
                    renewed_at=when(entry["renewed_at"]),
                )
            )
        Judgement.objects.bulk_create(new)
        options.report.append(
            f"Judgements: {len(new)} added, {len(data) - len(new)} already here"
            + (f" ({elsewhere} about entities this memory does not have)." if elsewhere else ".")
        )


findings_section = FindingsSection()
rules_section = RulesSection()
guesses_section = AnsweredGuessesSection()
judgements_section = JudgementsSection()
