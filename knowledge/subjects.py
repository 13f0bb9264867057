"""Finding the subjects a fact or a question is about: by id, entity id, name or nickname."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from django.db import connection

from knowledge.models import Memory, Subject

MAX_LABEL_WORDS = 6  # the longest name or nickname looked for in a sentence


class UnknownSubject(Exception):
    """A subject reference that names nothing in this memory; the message says which."""


def resolve(memory: Memory, references: list) -> list[Subject]:
    """Each reference (a subject id, an entity id, a name or a nickname) as its Subject.

    Raises UnknownSubject naming the first reference that matches nothing.
    """
    found: list[Subject] = []
    subjects = Subject.objects.as_system(
        "what the memory's subjects are called, to find them in words"
    ).for_memory(memory)
    for reference in references:
        subject: Subject | None
        if isinstance(reference, Subject) and reference.memory_id == memory.pk:
            subject = reference  # already resolved: itself, not another subject of its name
        elif isinstance(reference, int) or (isinstance(reference, str) and reference.isdigit()):
            subject = subjects.filter(pk=int(reference)).first()
        else:
            subject = subjects.named(str(reference)).order_by("-present", "pk").first()
        if subject is None:
            raise UnknownSubject(
                f"{memory.name} has no subject {reference!r}: use a subject id, an entity id "
                "such as light.office_lamp, a name, or a nickname."
            )
        if subject not in found:
            found.append(subject)
    return found


def _words(text: str) -> list[str]:
    """Words as labels are matched: entity ids keep their dots ("light.office_lamp"), a word
    does not keep the full stop that ends its sentence ("… the moon." names the moon)."""
    return [
        word for word in (raw.strip(".") for raw in re.findall(r"[\w.]+", text.casefold())) if word
    ]


@lru_cache(maxsize=4096)
def _label_key(label: str) -> str:
    return " ".join(_words(label))


def _mentioned(labelled, text: str) -> list[int]:
    """The pks of the subjects ``text`` names, in order, from (pk, name, aliases, entity_id)
    rows in pk order: a label two subjects share names the older."""
    return list(_named_by(labelled, text))


def _named_by(labelled, text: str) -> dict[int, str]:
    """``_mentioned`` with the words that named each subject (its labels as ``text`` wrote
    them, lower case, joined by spaces), in the order the subjects appear."""
    labels: dict[str, int] = {}
    for pk, name, aliases, entity_id in labelled:
        for label in (name, *aliases, entity_id):
            if label:
                labels.setdefault(_label_key(label), pk)
    words = _words(text)
    hits: dict[int, str] = {}
    for start in range(len(words)):
        for length in range(min(MAX_LABEL_WORDS, len(words) - start), 0, -1):
            label = " ".join(words[start : start + length])
            pk = labels.get(label)
            if pk is not None:
                hits[pk] = f"{hits[pk]} {label}" if pk in hits else label
                break
    return hits


def mentioned_in(memory: Memory, text: str) -> list[Subject]:
    """The subjects ``text`` names (whole words, any case), in the order they appear; a label
    two subjects share names the older. One query: every subject of the memory, read once for
    its labels and returned from there (it was two, the second for the subjects found)."""
    return mentions(memory)(text)


_SUBJECT_FIELDS = [field.attname for field in Subject._meta.concrete_fields]
_LABELS = [_SUBJECT_FIELDS.index(name) for name in ("id", "name", "aliases", "entity_id")]


def mentions(memory: Memory) -> Callable[[str], list[Subject]]:
    """``mentioned_in`` for many texts: the memory's subjects read once, for all of them, as
    rows; only those a text names become model instances (a household's forty subjects, made
    instances for every statement taught, were most of this call's time)."""
    rows = {
        row[_LABELS[0]]: row
        for row in Subject.objects.as_system(
            "what the memory's subjects are called, to find them in words"
        )
        .for_memory(memory)
        .order_by("pk")
        .values_list(*_SUBJECT_FIELDS)
    }
    labelled = [tuple(row[index] for index in _LABELS) for row in rows.values()]
    made: dict[int, Subject] = {}

    def named(text: str) -> list[Subject]:
        for pk in (found := _mentioned(labelled, text)):
            if pk not in made:
                made[pk] = Subject.from_db(connection.alias, _SUBJECT_FIELDS, rows[pk])
        return [made[pk] for pk in found]

    return named


def mentioned_ids(memory: Memory, text: str) -> list[int]:
    """The pks of ``mentioned_in``, reading only the labels (recall needs no more)."""
    return mentioned_ids_and_page(memory, text, None)[0]


# People --------------------------------------------------------------------------------------


def _names_of(user) -> list[str]:
    """The names a signed-in person goes by, as a person subject may be named: first name,
    full name, username (lower case, in that order)."""
    names = [user.first_name, user.get_full_name(), user.get_username()]
    return [name.casefold() for name in dict.fromkeys(names) if name]


def _page_of(rows, user) -> int | None:
    """The pk of ``user``'s own person page among ``rows`` of (pk, kind, name, aliases,
    entity_id) in pk order: named by their first name, full name or username (or a nickname
    of one), in that order of preference, else the entity ``person.<username>``."""
    if user is None:
        return None
    people = [row for row in rows if row[1] == Subject.Kind.PERSON]
    for name in _names_of(user):
        for pk, _kind, subject_name, aliases, _entity in people:
            if subject_name.casefold() == name or name in aliases:
                return pk
    entity = f"person.{user.get_username()}".casefold()
    return next((row[0] for row in people if row[4].casefold() == entity), None)


def person_of(memory: Memory, user) -> Subject | None:
    """The person subject that is ``user`` in this memory (``_page_of``). None for the system
    (``user=None``) and for a person the memory has no page for. Recall for a reader brings
    their page's facts — their own preferences — as if they had named themselves."""
    if user is None:
        return None
    people = (
        Subject.objects.as_system("what the memory's subjects are called, to find them in words")
        .for_memory(memory)
        .filter(kind=Subject.Kind.PERSON)
        .order_by("pk")
    )
    rows = people.values_list("pk", "kind", "name", "aliases", "entity_id")
    pk = _page_of(list(rows), user)
    return people.get(pk=pk) if pk is not None else None


# What ``mentioned_ids`` and ``mentioned_ids_and_page`` read: the memory's subjects' labels
# in pk order, written out (the ORM spent 0.4 ms of a 0.5 ms call building and reading them).
_LABELS_SQL = """SELECT id, kind, name, aliases, entity_id FROM knowledge_subject
    WHERE memory_id = %s ORDER BY id"""


def mentioned_ids_and_page(memory: Memory, text: str, reader) -> tuple[list[int], int | None]:
    """``mentioned_ids`` and the pk of the reader's own page (``person_of``), from one read
    of the labels."""
    named = question_subjects(memory, text, reader)
    return list(named.words), named.own_page


@dataclass(frozen=True)
class Named:
    """What a question says about whom: the subjects it names, each with the words that named
    it (``words``: pk → its labels as written, lower case, in the order they appear), and the
    pk of the reader's own page (None for the system, or a person without a page)."""

    words: dict[int, str]
    own_page: int | None

    @property
    def ids(self) -> list[int]:
        return list(self.words)


def question_subjects(memory: Memory, text: str, reader) -> Named:
    """The subjects ``text`` names (``mentioned_in``, as ids with the words that named them)
    and the reader's own page (``person_of``), from one read of the labels. ``reader`` may be
    a person, a ``Reader`` or the system: only a person has a page."""
    with connection.cursor() as cursor:  # on every recall: a plain statement, not the ORM's
        cursor.execute(_LABELS_SQL, [memory.pk])
        rows = cursor.fetchall()
    named = _named_by([(pk, name, aliases, entity) for pk, _, name, aliases, entity in rows], text)
    person = reader if hasattr(reader, "get_username") else None
    return Named(named, _page_of(rows, person))


def person_named(memory: Memory, name: str, *, user=None) -> Subject:
    """The person subject called ``name`` (``user``'s own, when it is a signed-in person's),
    made if the memory has none yet: what a person says about themselves is about them."""
    found = person_of(memory, user) if user is not None else None
    if found is None:
        people = (
            Subject.objects.as_system(
                "what the memory's subjects are called, to find them in words"
            )
            .for_memory(memory)
            .filter(kind=Subject.Kind.PERSON)
        )
        found = people.named(name).order_by("pk").first()
    if found is None:
        found, _ = Subject.objects.as_system(
            "what the memory's subjects are called, to find them in words"
        ).get_or_create(memory=memory, kind=Subject.Kind.PERSON, name=name[:200])
    return found
