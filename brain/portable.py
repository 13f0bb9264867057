"""The app-independent part of export and import: the error, the options, and the checks and uid
rules every section shares.

A section is an object with ``key``, ``dump(memory)``, ``check(data)`` and
``load(memory, data, options)``; ``settings.BRAIN_EXPORT_SECTIONS`` lists them in load order and
``memory.portable`` runs them. ``check`` sees only its own part of the file and raises
:class:`ImportRejected` naming the first bad entry; ``load`` runs inside the import's one
transaction, so anything it raises leaves nothing written. Nothing here knows any app's models.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import batched
from typing import Any

from django.db import models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

PERSON_NAME_CHARS = 150  # every *_name column that holds a person's user name
LOOKUP_BATCH = 10_000  # uids per ``uid IN (...)`` query


class ImportRejected(Exception):
    """The file cannot be imported; the message names the problem. Nothing was written."""


@dataclass
class ImportOptions:
    """What the person asked for, and the report: lines the sections write for that person."""

    replace_memory: bool = False
    by: object = None
    report: list[str] = field(default_factory=list)


# Checking -------------------------------------------------------------------------------------


def require(condition: bool, message: str) -> None:
    """Raise ImportRejected(``message``) unless ``condition`` holds."""
    if not condition:
        raise ImportRejected(message)


def has_nul(value: Any) -> bool:
    """Whether any text in a parsed JSON value (keys included) holds a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def check_entries(data: Any, key: str, fields: dict[str, type], person: str) -> None:
    """Check a list of entries: each an object with the required ``fields`` of their types, a
    valid uid no earlier entry has, a valid ``created_at``, and an optional ``person`` name of at
    most PERSON_NAME_CHARS characters. Messages count entries from 1."""
    require(isinstance(data, list), f'"{key}" must be a list.')
    seen: set[uuid.UUID] = set()
    for number, entry in enumerate(data, start=1):
        require(isinstance(entry, dict), f"{key} entry {number} is not an object.")
        for name, kind in fields.items():
            require(
                isinstance(entry.get(name), kind), f'{key} entry {number} has no valid "{name}".'
            )
        require(is_uuid(entry["uid"]), f"{key} entry {number} has an invalid uid.")
        require(
            uuid.UUID(entry["uid"]) not in seen,
            f"{key} entry {number} repeats the uid of an earlier entry.",
        )
        seen.add(uuid.UUID(entry["uid"]))
        require(
            is_datetime(entry["created_at"]), f"{key} entry {number} has an invalid created_at."
        )
        require(
            is_name(entry.get(person, ""), PERSON_NAME_CHARS),
            f'{key} entry {number} has an invalid "{person}" (a name of at most '
            f"{PERSON_NAME_CHARS} characters).",
        )


def is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def is_datetime(value: Any) -> bool:
    """Whether ``value`` is an ISO 8601 date and time (a zone offset is optional)."""
    try:
        return isinstance(value, str) and parse_datetime(value) is not None
    except ValueError:  # well formed but impossible, like month 13
        return False


def is_optional_datetime(value: Any) -> bool:
    return value is None or is_datetime(value)


def is_name(value: Any, limit: int) -> bool:
    """Whether ``value`` is text of at most ``limit`` characters (empty allowed)."""
    return isinstance(value, str) and len(value) <= limit


def when(value: str | None) -> datetime | None:
    """A checked date and time as an aware datetime; without an offset it is read in the
    current time zone. None stays None."""
    if value is None:
        return None
    moment = parse_datetime(value)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


# Uids: importing the same file twice, or into a second memory -------------------------------


def placements(
    model: type[models.Model], memory: models.Model, uids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, bool]]:
    """For each uid of a file: the uid its row has (or gets) in ``memory``, and whether that row
    is already there.

    ``model`` has a unique ``uid`` and a ``memory`` foreign key. A uid is unique on the whole
    install, so an entry whose uid another memory holds (an export folded into a second memory)
    gets a uid derived from it and this memory, which importing the same file again finds.
    """
    uids = list(dict.fromkeys(uids))
    derived = {uid: uuid.uuid5(uid, f"memory:{memory.pk}") for uid in uids}
    owners: dict[uuid.UUID, int] = {}
    for chunk in batched([*uids, *derived.values()], LOOKUP_BATCH):
        owners.update(model.objects.filter(uid__in=chunk).values_list("uid", "memory_id"))
    found = {}
    for uid in uids:
        if owners.get(uid) == memory.pk:
            found[uid] = (uid, True)
        elif owners.get(derived[uid]) == memory.pk:
            found[uid] = (derived[uid], True)
        else:
            found[uid] = (derived[uid] if uid in owners else uid, False)
    return found


def placed(
    model: type[models.Model], memory: models.Model, data: list[dict]
) -> list[tuple[dict, uuid.UUID]]:
    """The entries not yet in ``memory``, each with the uid it gets there (see placements)."""
    where = placements(model, memory, (uuid.UUID(entry["uid"]) for entry in data))
    return [
        (entry, where[uid][0]) for entry in data if not where[(uid := uuid.UUID(entry["uid"]))][1]
    ]


def in_batches[T](items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` as lists of at most ``size``, for bulk writes and embedding."""
    for chunk in batched(items, size):
        yield list(chunk)
