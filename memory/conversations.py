"""Conversations as sources: a voice, chat or terminal conversation kept whole, turn by turn.

Contract (every surface calls these; the reflection pass reads what they keep):

- ``record_conversation(memory, *, channel, person, messages, reference=None)`` keeps a
  conversation as one ``Source`` (kind conversation) and returns ``Recorded``: the source,
  whether it is new, and the turns this call added. ``person`` is the signed-in person (a user)
  or None. Each message is a dict: ``text`` (required), ``speaker`` (a name; "" means the
  signed-in person for a person's turn), ``role`` ("person", also "user", or "assistant";
  a speaker named brain or assistant is the assistant), ``at`` (ISO 8601; now when missing).
  Idempotent on ``reference`` (the caller's conversation id), or on a hash of the channel, the
  person and the messages when there is none: posting the same conversation again finds the
  first source and adds nothing; posting it again with more messages at the end adds those.
  The same reference with different messages is refused (``ConversationMismatch``, a 409).
- ``add_turns(source, messages)`` appends messages to a conversation that grows turn by turn
  (the ask bar appends each exchange) and returns the new ``Turn`` s.
- ``turns_of(source, since=0)`` reads them back. ``reflection.conversation_ended`` records a
  finished conversation and asks for its reflection.

Limits, checked before anything is written: at most MAX_MESSAGES messages and MAX_BYTES of
words in one conversation (a voice chat is a few dozen turns; a day-long chat log a few
thousand), and at least one message with words in it. Over a limit is ``TooLarge`` (a
ValidationError naming the limit, answered 413 by the API); empty, or an unknown channel or
role, a ValidationError. A turn never changes once kept; a source is only ever appended to.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from brain.inputs import moment
from knowledge.models import Fact, Memory, Source, name_of

MAX_MESSAGES = 5000
MAX_BYTES = 2 * 1024 * 1024  # the words of every message, UTF-8: "2 MB", read generously
# A body that carries MAX_BYTES of words: JSON's quoting of non-ASCII text (``\\u00e9``) and of
# each message's fields can triple it. Bigger is refused (413) before it is read.
MAX_POST_BYTES = 8 * 1024 * 1024
MAX_REFERENCE_CHARS = 200
MAX_SPEAKER_CHARS = 150
CHANNELS = (Fact.Channel.VOICE, Fact.Channel.CHAT, Fact.Channel.TERMINAL)
PERSON, ASSISTANT = "person", "assistant"
_ROLES = {"person": PERSON, "user": PERSON, "human": PERSON, "assistant": ASSISTANT}
_ASSISTANT_NAMES = frozenset({"brain", "assistant", "ai", "system", "home assistant"})


class TooLarge(ValidationError):
    """Over MAX_MESSAGES or MAX_BYTES; the message names the limit (the API answers 413)."""


class ConversationMismatch(StateConflict):
    """A conversation posted again under its reference with other messages than it had."""


@dataclass(frozen=True)
class Turn:
    """One message of a conversation, as kept in ``Source.turns``."""

    position: int  # 0 is the first message
    speaker: str  # the name it was said under ("Sarah", "brain")
    person: str  # the username of the signed-in person who said it, or ""
    role: str  # "person" or "assistant"
    text: str
    at: str  # ISO 8601

    @property
    def is_person(self) -> bool:
        return self.role == PERSON

    def as_json(self) -> dict:
        return {
            "speaker": self.speaker,
            "person": self.person,
            "role": self.role,
            "text": self.text,
            "at": self.at,
        }


@dataclass(frozen=True)
class Recorded:
    """What ``record_conversation`` did: the source, whether it is new, the turns it added."""

    source: Source
    created: bool
    added: tuple[Turn, ...] = ()

    @property
    def message(self) -> str:
        count = len(self.source.turns)
        noun = "message" if count == 1 else "messages"
        if self.created:
            return f"Kept the conversation ({count:,} {noun}) as source #{self.source.pk}."
        if self.added:
            return (
                f"Added {len(self.added):,} to the conversation already kept as source "
                f"#{self.source.pk} ({count:,} {noun} now)."
            )
        return f"This conversation was already kept as source #{self.source.pk}; nothing changed."


# Reading ---------------------------------------------------------------------------------------


def turns_of(source: Source, *, since: int = 0) -> list[Turn]:
    """The turns of a conversation from position ``since`` on, oldest first."""
    return [
        Turn(position=index, **_stored(turn))
        for index, turn in enumerate(source.turns)
        if index >= since
    ]


def _stored(turn: dict) -> dict:
    return {key: turn.get(key, "") for key in ("speaker", "person", "role", "text", "at")}


# Checking what was sent ------------------------------------------------------------------------


def check_channel(channel: str) -> str:
    if channel not in CHANNELS:
        raise ValidationError(
            f"Unknown channel {channel!r}: a conversation is one of {', '.join(CHANNELS)}."
        )
    return channel


def _person_names(person) -> set[str]:
    if person is None:
        return set()
    names = {person.get_username(), person.first_name, person.get_full_name()}
    return {name.casefold() for name in names if name}


def display_name(person) -> str:
    """How a person is named in a conversation and in what it teaches: their first name,
    else their username."""
    if person is None:
        return ""
    return person.first_name or person.get_username()


def _turns(messages: Sequence, person, start: int) -> list[Turn]:
    """``messages`` checked and made into turns numbered from ``start``. ValidationError names
    the first message that is wrong."""
    if not isinstance(messages, (list, tuple)):
        raise ValidationError("messages must be a list of {speaker, text, at} objects.")
    names = _person_names(person)
    now = timezone.now().isoformat()
    turns = []
    for index, message in enumerate(messages):
        where = f"Message {index + 1}"
        if not isinstance(message, dict):
            raise ValidationError(f"{where} must be an object with speaker, text and at.")
        text = message.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"{where} has no text: every message needs words in it.")
        speaker = message.get("speaker") or ""
        if not isinstance(speaker, str) or len(speaker) > MAX_SPEAKER_CHARS:
            raise ValidationError(
                f"{where}'s speaker must be a name of at most {MAX_SPEAKER_CHARS} characters."
            )
        speaker = " ".join(speaker.split())
        role = _role(message.get("role"), speaker, where)
        said_by_person = role == PERSON and (not speaker or speaker.casefold() in names)
        if role == PERSON and not speaker:
            speaker = display_name(person) or "someone"
        if role == ASSISTANT and not speaker:
            speaker = "brain"
        turns.append(
            Turn(
                position=start + index,
                speaker=speaker,
                person=person.get_username() if said_by_person and person is not None else "",
                role=role,
                text=text.strip(),
                at=_at(message.get("at"), where) or now,
            )
        )
    return turns


def _role(value, speaker: str, where: str) -> str:
    if value in (None, ""):
        return ASSISTANT if speaker.casefold() in _ASSISTANT_NAMES else PERSON
    if not isinstance(value, str) or value.casefold() not in _ROLES:
        raise ValidationError(
            f"{where} has an unknown role {value!r}: use person (or user) or assistant."
        )
    return _ROLES[value.casefold()]


def _at(value, where: str) -> str | None:
    if value in (None, ""):
        return None
    when = moment(value) if isinstance(value, str) else None
    if when is None:
        raise ValidationError(f"{where}'s time {value!r} is not an ISO 8601 date and time.")
    return when.isoformat()


def _check_size(turns: Iterable[Turn], existing: Sequence[dict] = ()) -> None:
    count = len(existing)
    size = sum(len(turn.get("text", "").encode()) for turn in existing)
    for turn in turns:
        count += 1
        size += len(turn.text.encode())
    if count > MAX_MESSAGES:
        raise TooLarge(
            f"That conversation has {count:,} messages; brain keeps at most {MAX_MESSAGES:,} "
            "in one conversation. Send it in parts, each under its own reference."
        )
    if size > MAX_BYTES:
        raise TooLarge(
            f"That conversation holds {size:,} bytes of words; brain keeps at most "
            f"{MAX_BYTES:,} (2 MB) in one conversation. Send it in parts."
        )


def _reference(reference: str | None, channel: str, person, turns: list[Turn]) -> str:
    if reference is not None:
        if not isinstance(reference, str):
            raise ValidationError("reference must be text: the conversation's own id.")
        reference = reference.strip()
        if len(reference) > MAX_REFERENCE_CHARS:
            raise ValidationError(
                f"reference is {len(reference):,} characters; the limit is {MAX_REFERENCE_CHARS}."
            )
        if reference:
            return reference
    said = [(turn.speaker, turn.role, turn.text) for turn in turns]
    digest = hashlib.sha256(
        json.dumps([channel, name_of(person), said], ensure_ascii=False).encode()
    ).hexdigest()
    return f"sha256:{digest}"


# Writing ---------------------------------------------------------------------------------------


def _title(channel: str, person, speakers: Iterable[str], when: datetime) -> str:
    named = display_name(person) or next(iter(speakers), "")
    who = f" with {named}" if named else ""
    stamp = timezone.localtime(when).strftime("%-d %b %Y, %H:%M")
    return f"{Fact.Channel(channel).label.capitalize()} conversation{who}, {stamp}"


def _transcript(turns: Iterable[Turn]) -> str:
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


def record_conversation(
    *,
    memory: Memory,
    channel: str,
    person=None,
    messages: Sequence,
    reference: str | None = None,
) -> Recorded:
    """Keep a conversation whole as a Source (see the module docstring). Raises
    ValidationError (TooLarge over a limit) and ConversationMismatch."""
    check_channel(channel)
    turns = _turns(messages, person, 0)
    if not turns:
        raise ValidationError("That conversation is empty: send at least one message.")
    _check_size(turns)
    reference = _reference(reference, channel, person, turns)
    return _record(memory, channel, person, turns, reference)


@retry_transaction
def _record(memory: Memory, channel: str, person, turns: list[Turn], ref: str) -> Recorded:
    existing = _find(memory, ref)
    if existing is not None:
        return _again(existing, turns)
    when = _first_moment(turns)
    try:
        with transaction.atomic():
            source = Source.objects.create(
                memory=memory,
                kind=Source.Kind.CONVERSATION,
                title=_title(channel, person, (t.speaker for t in turns if t.is_person), when),
                reference=ref,
                text=_transcript(turns),
                turns=[turn.as_json() for turn in turns],
                channel=channel,
                person=person,
                created_at=when,
            )
    except IntegrityError:  # the same conversation posted at the same moment: the first wins
        source = Source.objects.as_system("the conversation a message belongs to").get(
            memory=memory, kind=Source.Kind.CONVERSATION, reference=ref
        )
        return _again(source, turns)
    return Recorded(source, created=True, added=tuple(turns))


def _find(memory: Memory, reference: str) -> Source | None:
    return (
        Source.objects.as_system("the conversation a message belongs to")
        .filter(memory=memory, kind=Source.Kind.CONVERSATION, reference=reference)
        .first()
    )


def _first_moment(turns: list[Turn]) -> datetime:
    first = moment(turns[0].at)
    return first if first is not None else timezone.now()


def _again(source: Source, turns: list[Turn]) -> Recorded:
    """The same conversation posted again: nothing new, or more messages at its end."""
    kept = turns_of(source)
    same = [(t.speaker, t.role, t.text) for t in kept]
    sent = [(t.speaker, t.role, t.text) for t in turns]
    if sent[: len(same)] != same[: len(sent)]:
        raise ConversationMismatch(
            f"A conversation with this reference is already kept (source #{source.pk}) with "
            "other messages; a conversation is never changed. Send it under its own reference.",
            source=source.pk,
        )
    if len(sent) <= len(same):
        return Recorded(source, created=False)
    added = add_turns(source, [turn.as_json() for turn in turns[len(kept) :]])
    source.refresh_from_db()
    return Recorded(source, created=False, added=tuple(added))


@retry_transaction
def add_turns(source: Source, messages: Sequence) -> list[Turn]:
    """Append ``messages`` to the conversation ``source`` (a chat growing turn by turn) and
    return the new turns, numbered after the ones it had. The signed-in person is the
    conversation's. Raises ValidationError (TooLarge over a limit)."""
    with transaction.atomic():
        locked = (
            Source.objects.as_system("the conversation a message belongs to")
            .select_for_update(of=("self",))
            .select_related("person")
            .get(pk=source.pk)
        )
        if locked.kind != Source.Kind.CONVERSATION:
            raise ValidationError(f"Source #{locked.pk} is not a conversation.")
        turns = _turns(messages, locked.person, len(locked.turns))
        if not turns:
            return []
        _check_size(turns, locked.turns)
        locked.turns = [*locked.turns, *(turn.as_json() for turn in turns)]
        locked.text = "\n".join(filter(None, [locked.text, _transcript(turns)]))
        locked.save(update_fields=["turns", "text"])
    source.turns, source.text = locked.turns, locked.text
    return turns


def person_named(username: str | None):
    """The active user ``username`` names, or None for an empty name. ValidationError when
    nobody has it."""
    if not username:
        return None
    user = get_user_model().objects.filter(username__iexact=username, is_active=True).first()
    if user is None:
        raise ValidationError(f"Nobody is called {username!r} here: person is a username.")
    return user
