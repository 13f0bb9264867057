"""The entity registry: the house's rooms, devices and people, kept as ``Subject`` rows.

Two sources feed it, and both go through ``sync_entities``:

**A file** (``brain entities load house.yaml``): JSON when it ends in ``.json``, YAML
otherwise. Every section is optional::

    house: Home                        # the house itself
    rooms:
      - name: Office
        aliases: [the study upstairs]
    devices:                           # the complete list: a device left out is gone
      - entity_id: light.office_lamp   # domain.object_id, as Home Assistant writes it
        name: Office lamp
        room: Office                   # a room listed above or already known; "" for none
        aliases: [the beacon]
    people:
      - name: Sarah
        entity_id: person.sarah        # optional: Home Assistant's person entity
        aliases: [mum]

A room or person needs a ``name``; a device needs an ``entity_id`` and a ``name``. A key left
out of an entry leaves what is stored alone (a file without ``aliases`` keeps the nicknames
already known); a key given replaces it. Unknown sections and keys are refused, so a typo
("device:") is an error rather than an empty list.

**Home Assistant** (``brain entities sync-ha``, and the beat every 15 minutes):
``GET {HA_URL}/api/states`` with ``Authorization: Bearer {HA_TOKEN}``. Each state gives an
entity id and its ``friendly_name``; ``person.*`` entities are people, everything else a
device; a few domains every instance has and no house owns (``sun``, ``zone`` …) are skipped.
Areas are not in /api/states: the room comes from an ``area`` attribute when one is present,
otherwise the room stored stays. Nicknames are never touched by a sync from Home Assistant.

Removal: a full sync (a file with a ``devices`` section; every Home Assistant sync) marks each
subject with an entity id that it does not list as gone, through
``knowledge.actions.set_subject_presence``: its facts stop being used at once and are deleted
thirty days later, unless it reappears first, which brings them back. Rooms and people without
an entity id are never removed by absence. With Home Assistant configured, its list is the house's:
a device loaded from a file that Home Assistant does not have is marked gone at the next sync.

Bad input is refused whole: ``RegistryError`` names the file and entry, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, cast

import httpx2  # installed with anthropic; brain's one HTTP client
import yaml
from django.conf import settings
from django.db import connection, transaction

from knowledge import actions
from knowledge.models import Memory, Subject

HA_TIMEOUT_S = 10.0


class Counting(Protocol):
    """What a sync reports its progress to (brain.progress.Progress)."""

    def grow(self, more: int) -> None: ...
    def advance(self, steps: int = 1) -> None: ...


# Home Assistant's own shape for an entity id: lower-case words joined by underscores.
ENTITY_ID = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
# Every Home Assistant has these; none is a thing in the house, and "Home" (zone.home) would
# otherwise tag every fact that says "home".
IGNORED_DOMAINS = frozenset(
    {"sun", "zone", "persistent_notification", "conversation", "tts", "stt", "wake_word"}
)
SECTIONS = {
    "rooms": (Subject.Kind.ROOM, {"name", "aliases"}),
    "people": (Subject.Kind.PERSON, {"name", "entity_id", "aliases"}),
    "devices": (Subject.Kind.DEVICE, {"entity_id", "name", "room", "aliases"}),
}
# Houses and rooms are made before what refers to them.
KIND_ORDER: list[str] = [
    Subject.Kind.HOUSE,
    Subject.Kind.ROOM,
    Subject.Kind.PERSON,
    Subject.Kind.DEVICE,
]
# Both are CharFields, which always have a max_length.
NAME_MAX = cast(int, Subject._meta.get_field("name").max_length)
ENTITY_ID_MAX = cast(int, Subject._meta.get_field("entity_id").max_length)


class RegistryError(Exception):
    """Input the registry refuses, or a Home Assistant it cannot read. One line, naming what."""


@dataclass(frozen=True)
class Entry:
    """One room, device, person or the house, as a source describes it.

    ``room`` and ``aliases`` are None when the source does not say: what is stored is kept.
    ``room=""`` means "in no room". ``where`` names the entry in error messages.
    """

    kind: str
    name: str
    entity_id: str = ""
    room: str | None = None
    aliases: tuple[str, ...] | None = None
    where: str = ""

    @property
    def label(self) -> str:
        shown = self.entity_id or self.name
        return f"{self.where} ({shown})" if self.where and shown else self.where or shown


@dataclass(frozen=True)
class Listing:
    """What a file says. ``complete``: it lists every device, so one left out is gone."""

    entries: list[Entry]
    complete: bool


@dataclass
class SyncReport:
    """What one sync changed, by subject name."""

    source_name: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> str:
        """Plain words for a person: the counts, then who left or came back."""
        text = (
            f"{self.source_name}: {len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.removed)} removed, {len(self.returned)} returned, "
            f"{self.unchanged} unchanged."
        )
        if self.removed:
            text += (
                f" No longer in the house: {', '.join(self.removed)} — their facts are set "
                "aside now and deleted after 30 days unless they come back."
            )
        if self.returned:
            text += f" Back again, with their facts: {', '.join(self.returned)}."
        return text


# Reading sources ------------------------------------------------------------------------------


def read_file(path: str | Path) -> Listing:
    """The entries in a registry file (format in the module docstring). Raises RegistryError."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistryError(f"Cannot read {path}: {_one_line(error)}") from None
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(raw)
        except json.JSONDecodeError as error:
            raise RegistryError(
                f"{path.name} is not valid JSON: {error.msg} at line {error.lineno}."
            ) from None
    else:
        try:
            document = yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise RegistryError(f"{path.name} is not valid YAML: {_one_line(error)}") from None
    return entries_from_document(document, source_name=path.name)


def entries_from_document(document: object, *, source_name: str) -> Listing:
    """The entries in an already-parsed registry document. Raises RegistryError."""
    if not isinstance(document, dict):
        raise RegistryError(
            f"{source_name} must be a mapping with house, rooms, devices and people sections."
        )
    unknown = sorted(set(document) - {"house", *SECTIONS})
    if unknown:
        raise RegistryError(
            f"{source_name}: unknown section {unknown[0]!r}; use house, rooms, devices and people."
        )
    entries: list[Entry] = []
    house = document.get("house")
    if house is not None:
        if not isinstance(house, str):
            raise RegistryError(f"{source_name}: house must be the house's name, a string.")
        entries.append(Entry(kind=Subject.Kind.HOUSE, name=house, where="house"))
    for section, (kind, keys) in SECTIONS.items():
        items = document.get(section) or []
        if not isinstance(items, list):
            raise RegistryError(f"{source_name}: {section} must be a list.")
        for number, item in enumerate(items, start=1):
            entries.append(_entry(item, kind, keys, f"{section} #{number}", source_name))
    return Listing(entries=entries, complete="devices" in document)


def _entry(item: object, kind: str, keys: set[str], where: str, source_name: str) -> Entry:
    if not isinstance(item, dict):
        raise RegistryError(f"{source_name}: {where} must be a mapping such as {{name: …}}.")
    unknown = sorted(set(item) - keys)
    if unknown:
        raise RegistryError(
            f"{source_name}: {where} has an unknown key {unknown[0]!r}; "
            f"use {', '.join(sorted(keys))}."
        )
    for key in ("name", "entity_id"):
        if not isinstance(item.get(key, ""), str):
            raise RegistryError(f"{source_name}: {where}: {key} must be a string.")
    room = item.get("room")
    if "room" in item and not isinstance(room, str | None):
        raise RegistryError(f"{source_name}: {where}: room must be a room's name.")
    aliases = item.get("aliases")
    if "aliases" in item and not (
        isinstance(aliases, list | None) and all(isinstance(a, str) for a in aliases or [])
    ):
        raise RegistryError(f"{source_name}: {where}: aliases must be a list of nicknames.")
    return Entry(
        kind=kind,
        name=item.get("name", ""),
        entity_id=item.get("entity_id", ""),
        room=(room or "") if "room" in item else None,
        aliases=tuple(aliases or ()) if "aliases" in item else None,
        where=where,
    )


def fetch_states(url: str, token: str, *, timeout: float = HA_TIMEOUT_S) -> list:
    """Home Assistant's ``/api/states`` as parsed JSON. Raises RegistryError in one line.

    Call it outside any transaction: it waits on the network for up to ``timeout`` seconds.
    """
    endpoint = f"{url.rstrip('/')}/api/states"
    try:
        response = httpx2.get(
            endpoint,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )
    except (httpx2.UnsupportedProtocol, httpx2.InvalidURL):
        raise RegistryError(
            f"HA_URL {url!r} is not a URL such as http://homeassistant.local:8123."
        ) from None
    except httpx2.TimeoutException:
        raise RegistryError(
            f"Home Assistant at {url} did not answer within {timeout:g} s."
        ) from None
    except httpx2.TransportError as error:
        raise RegistryError(f"Cannot reach Home Assistant at {url}: {_one_line(error)}") from None
    if response.status_code in (401, 403):
        raise RegistryError(
            f"Home Assistant at {url} refused the token ({response.status_code}): "
            "set HA_TOKEN to a long-lived access token from your Home Assistant profile."
        )
    if response.status_code != 200:
        raise RegistryError(
            f"Home Assistant at {url} answered {response.status_code} for /api/states."
        )
    try:
        return response.json()
    except ValueError:
        raise RegistryError(
            f"Home Assistant at {url} answered /api/states with something that is not JSON."
        ) from None


def entries_from_states(states: object, *, source_name: str) -> list[Entry]:
    """Devices, people and the rooms named by ``area`` attributes, from /api/states.

    Two entities with the same friendly name both get their entity id after it, "Motion
    (binary_sensor.hall_motion)", so neither takes the name from the other. Raises
    RegistryError on a shape Home Assistant does not send.
    """
    if not isinstance(states, list):
        raise RegistryError(f"{source_name}: /api/states did not answer with a list.")
    entities: list[Entry] = []
    rooms: dict[str, Entry] = {}
    for number, state in enumerate(states, start=1):
        if not isinstance(state, dict) or not isinstance(state.get("entity_id"), str):
            raise RegistryError(f"{source_name}: state #{number} has no entity_id.")
        entity_id = state["entity_id"]
        domain, _, object_id = entity_id.partition(".")
        if domain in IGNORED_DOMAINS:
            continue
        attributes = state.get("attributes")
        attributes = attributes if isinstance(attributes, dict) else {}
        name = attributes.get("friendly_name")
        if not isinstance(name, str) or not name.strip():
            name = object_id.replace("_", " ").capitalize()
        kind = Subject.Kind.PERSON if domain == "person" else Subject.Kind.DEVICE
        area = attributes.get("area")
        area = area.strip() if isinstance(area, str) and kind == Subject.Kind.DEVICE else ""
        if area:
            rooms.setdefault(area.casefold(), Entry(Subject.Kind.ROOM, area, where="area"))
        entities.append(
            Entry(
                kind=kind,
                name=name.strip(),
                entity_id=entity_id,
                room=area or None,
                where=f"state #{number}",
            )
        )
    taken: dict[tuple[str, str], int] = {}
    for entry in entities:
        key = (entry.kind, entry.name.casefold())
        taken[key] = taken.get(key, 0) + 1
    entities = [
        replace(entry, name=f"{entry.name} ({entry.entity_id})")
        if taken[(entry.kind, entry.name.casefold())] > 1
        else entry
        for entry in entities
    ]
    return [*rooms.values(), *entities]


# Syncing -------------------------------------------------------------------------------------


def load_file(
    *, memory: Memory, path: str | Path, partial: bool = False, progress: Counting | None = None
) -> SyncReport:
    """Sync the registry from a file. ``partial``: add and update only, remove nothing."""
    listing = read_file(path)
    return sync_entities(
        memory=memory,
        entries=listing.entries,
        source_name=Path(path).name,
        full=listing.complete and not partial,
        progress=progress,
    )


def sync_home_assistant(
    *, memory: Memory, url: str, token: str, progress: Counting | None = None
) -> SyncReport:
    """A full sync from Home Assistant's REST API. Raises RegistryError.

    An answer listing no entities at all is refused: it is far likelier to be an instance
    still starting up than a house with every device gone.
    """
    source_name = f"Home Assistant at {url}"
    entries = entries_from_states(fetch_states(url, token), source_name=source_name)
    if not any(entry.entity_id for entry in entries):
        raise RegistryError(
            f"{source_name} listed no entities; not treating that as every device gone."
        )
    return sync_entities(memory=memory, entries=entries, source_name=source_name, progress=progress)


def sync_configured_home_assistant(memory: Memory | None = None) -> SyncReport | None:
    """The beat's sync: None (nothing done) unless HA_URL and HA_TOKEN are both set."""
    if not (settings.HA_URL and settings.HA_TOKEN):
        return None
    return sync_home_assistant(
        memory=memory or Memory.objects.default(), url=settings.HA_URL, token=settings.HA_TOKEN
    )


def sync_entities(
    *,
    memory: Memory,
    entries: list[Entry],
    source_name: str,
    full: bool = True,
    progress: Counting | None = None,
) -> SyncReport:
    """Make the memory's subjects match ``entries``, in one transaction.

    Creates what is new; updates names, rooms, nicknames (lower-cased, deduplicated) and
    entity ids; brings back what had gone. A ``full`` sync also marks every present subject
    with an entity id that ``entries`` leaves out as gone. Matching is by entity id, then by
    kind and name (case-insensitive), so a person from a file is the same person when Home
    Assistant lists ``person.sarah`` under that name. A gone device whose name a present one
    takes is renamed "Name (entity_id)".

    Raises RegistryError naming the entry, with nothing written. Safe to run twice, and
    concurrent syncs of one memory take turns. ``progress`` (brain.progress.Progress) is told
    how many entries there are, then each one done.
    """
    entries = sorted(
        (_checked(entry, source_name) for entry in entries),
        key=lambda entry: KIND_ORDER.index(entry.kind),
    )
    _refuse_repeats(entries, source_name)
    report = SyncReport(source_name=source_name)
    if progress is not None:
        progress.grow(len(entries))
    with transaction.atomic():
        _lock(memory)
        known = list(
            Subject.objects.as_system("keeping the house's entities in step")
            .for_memory(memory)
            .order_by("pk")
        )
        matches = _match(entries, known)
        claimed = {subject.pk for subject in matches.values()}
        leaving = [
            subject
            for subject in known
            if subject.pk not in claimed and subject.entity_id and (full or not subject.present)
        ]
        _free_names(entries, matches, known, leaving, source_name)
        rooms = {s.name.casefold(): s for s in known if s.kind == Subject.Kind.ROOM}
        for entry in entries:
            subject = matches.get(entry)
            room = _room(entry, subject, rooms, source_name)
            if subject is None:
                subject = Subject.objects.create(
                    memory=memory,
                    kind=entry.kind,
                    name=entry.name,
                    entity_id=entry.entity_id,
                    room=room,
                    aliases=list(entry.aliases or ()),
                )
                report.added.append(subject.name)
            elif _update(subject, entry, room):
                report.updated.append(subject.name)
            else:
                report.unchanged += 1
            if subject.kind == Subject.Kind.ROOM:
                rooms[subject.name.casefold()] = subject
            if not subject.present:
                actions.set_subject_presence(subject=subject, present=True)
                report.returned.append(subject.name)
            if progress is not None:
                progress.advance()
        for subject in leaving:
            if subject.present:
                actions.set_subject_presence(subject=subject, present=False)
                report.removed.append(subject.name)
    return report


def _checked(entry: Entry, source_name: str) -> Entry:
    """The entry tidied (spaces, lower-cased nicknames), or RegistryError saying what is wrong."""
    name = " ".join(entry.name.split())
    entity_id = entry.entity_id.strip()
    problem = ""
    if entry.kind not in Subject.Kind.values:
        problem = f"is a {entry.kind!r}, not a house, room, device or person"
    elif entry.kind == Subject.Kind.DEVICE and not entity_id:
        problem = "has no entity_id"
    elif not name:
        problem = "has no name"
    elif len(name) > NAME_MAX:
        problem = f"has a name longer than {NAME_MAX} characters"
    elif entity_id and entry.kind in (Subject.Kind.HOUSE, Subject.Kind.ROOM):
        problem = "is a room or house, which have no entity_id"
    elif entity_id and (len(entity_id) > ENTITY_ID_MAX or not ENTITY_ID.match(entity_id)):
        problem = f"has entity_id {entity_id!r}, which is not domain.object_id (light.hall_lamp)"
    elif entry.room and entry.kind != Subject.Kind.DEVICE:
        problem = "has a room, which only devices have"
    aliases = None
    if not problem and entry.aliases is not None:
        aliases = tuple(dict.fromkeys(" ".join(a.split()).casefold() for a in entry.aliases))
        aliases = tuple(alias for alias in aliases if alias)
        if any(len(alias) > NAME_MAX for alias in aliases):
            problem = f"has a nickname longer than {NAME_MAX} characters"
    if problem:
        raise RegistryError(f"{source_name}: {entry.label or 'an entry'} {problem}.")
    room = " ".join(entry.room.split()) if entry.room is not None else None
    return replace(entry, name=name, entity_id=entity_id, room=room, aliases=aliases)


def _refuse_repeats(entries: list[Entry], source_name: str) -> None:
    seen: dict[object, Entry] = {}
    for entry in entries:
        keys: list[object] = [(entry.kind, entry.name.casefold())]
        if entry.entity_id:
            keys.append(entry.entity_id)
        if entry.kind == Subject.Kind.HOUSE:
            keys.append(Subject.Kind.HOUSE)
        for key in keys:
            if key in seen:
                raise RegistryError(
                    f"{source_name}: {entry.label} repeats {seen[key].label}; "
                    "each name and entity_id may appear once."
                )
            seen[key] = entry


def _lock(memory: Memory) -> None:
    """A transaction-scoped advisory lock: one registry sync per memory at a time."""
    digest = hashlib.blake2b(f"registry:{memory.pk}".encode(), digest_size=8).digest()
    with connection.cursor() as cursor:
        key = int.from_bytes(digest, "big", signed=True)
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def _match(entries: list[Entry], known: list[Subject]) -> dict[Entry, Subject]:
    """Which stored subject each entry is, when it is one already."""
    by_entity = {s.entity_id: s for s in known if s.entity_id}
    by_name: dict[tuple[str, str], Subject] = {}
    subject: Subject | None
    for subject in known:
        by_name.setdefault((subject.kind, subject.name.casefold()), subject)
    house = next((s for s in known if s.kind == Subject.Kind.HOUSE), None)
    matches: dict[Entry, Subject] = {}
    claimed: set[int] = set()
    for entry in entries:
        if entry.kind == Subject.Kind.HOUSE:
            subject = house  # one house per memory: a new name renames it
        elif entry.entity_id and entry.entity_id in by_entity:
            subject = by_entity[entry.entity_id]
        else:
            subject = by_name.get((entry.kind, entry.name.casefold()))
            # A subject with an entity id is that entity; another entity never takes it over.
            if subject is not None and entry.entity_id and subject.entity_id:
                subject = None
        if subject is not None and subject.pk not in claimed:
            matches[entry] = subject
            claimed.add(subject.pk)
    return matches


def _free_names(
    entries: list[Entry],
    matches: dict[Entry, Subject],
    known: list[Subject],
    leaving: list[Subject],
    source_name: str,
) -> None:
    """Clear the way for the names ``entries`` take, or refuse.

    A name may pass from one subject to another in one sync (a swap; a device taking the name
    of one that is gone), which one_subject_per_kind_and_name would refuse half-way through. So
    every subject being renamed first gets a placeholder name (with a tab, which no checked
    name has); the gone ones then get "Name (entity_id)" and the others their new names as
    their entries are applied.
    """
    holders: dict[tuple[str, str], Subject] = {}
    subject: Subject | None
    for subject in known:
        holders.setdefault((subject.kind, subject.name.casefold()), subject)
    matched = {subject.pk for subject in matches.values()}
    leaving_pks = {subject.pk for subject in leaving}
    moving: dict[int, Subject] = {}
    for entry in entries:
        subject = matches.get(entry)
        if subject is not None and (subject.kind, subject.name) != (entry.kind, entry.name):
            moving[subject.pk] = subject
        holder = holders.get((entry.kind, entry.name.casefold()))
        if holder is None or holder is subject or holder.pk in matched:
            continue
        if holder.pk not in leaving_pks:
            raise RegistryError(
                f"{source_name}: {entry.label} is called {entry.name!r}, which is already "
                f"the {holder.kind} {holder.entity_id or holder.name}; rename one of them."
            )
        moving[holder.pk] = holder
    for subject in moving.values():
        Subject.objects.filter(pk=subject.pk).update(name=f"\trenaming {subject.pk}")
    for subject in moving.values():
        if subject.pk in leaving_pks:
            subject.name = f"{subject.name} ({subject.entity_id})"[:NAME_MAX]
            subject.save(update_fields=["name"])


def _room(
    entry: Entry, subject: Subject | None, rooms: dict[str, Subject], source_name: str
) -> Subject | None:
    """The room the entry puts its device in; the stored one when the entry does not say."""
    if entry.room is None:
        return subject.room if subject is not None else None
    if not entry.room:
        return None
    room = rooms.get(entry.room.casefold())
    if room is None:
        raise RegistryError(
            f"{source_name}: {entry.label} is in room {entry.room!r}, which is neither listed "
            "under rooms nor known yet."
        )
    return room


def _update(subject: Subject, entry: Entry, room: Subject | None) -> bool:
    """Write what the entry changes about ``subject``; False when it changes nothing."""
    wanted: dict[str, object] = {
        "kind": entry.kind,
        "name": entry.name,
        "room_id": room.pk if room else None,
    }
    if entry.entity_id:
        wanted["entity_id"] = entry.entity_id
    if entry.aliases is not None:
        wanted["aliases"] = list(entry.aliases)
    changed = [key for key, value in wanted.items() if getattr(subject, key) != value]
    for key in changed:
        setattr(subject, key, wanted[key])
    if changed:
        subject.save(update_fields=["room" if key == "room_id" else key for key in changed])
    return bool(changed)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
