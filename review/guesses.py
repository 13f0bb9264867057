"""A guess's life: proposed (by Deep review, a check), offered when one of three slots is
free, answered yes (filed as known) or no (never asked again, in any wording), dismissed for a
while, or expired after its fortnight. Every change of what waits on you (opened, answered,
slept, woke, expired) is a brain_waiting_on_you event on the timeline (``timeline``).

The limits are enforced here, in code, whatever a model proposes: three open guesses at most,
a fortnight each, and never again anything already confirmed or rejected, in any wording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from knowledge import statements
from knowledge.embedding import cosine, embedder_for, vector_or_none
from knowledge.models import Memory, Subject
from memory import actions as memory_actions
from memory.models import Origin
from memory.taught import Statement
from review import timeline
from review.models import GUESS_LIFETIME, MAX_REASON, MAX_TEXT, OPEN_GUESSES_AT_MOST, Guess

PARAPHRASE_COSINE = 0.85  # guesses this close in meaning are the same question
SLEEP_FOR = timedelta(days=7)  # a dismissed guess comes back after this, when a slot is free


class Refused(StateConflict):
    """Not done; the message says why (already answered, no longer open)."""


def _question(text: str) -> str:
    """The guess as it is asked and compared: one line, without its question mark."""
    text = " ".join((text or "").split())
    if not text:
        raise ValidationError("The guess can't be empty.")
    if len(text) > MAX_TEXT:
        raise ValidationError(f"The guess is {len(text):,} characters; the limit is {MAX_TEXT:,}.")
    return text.rstrip("?").removesuffix("— right").strip(" —")


@dataclass(frozen=True)
class Proposed:
    guess: Guess | None
    message: str


def _same_question(
    a: Guess, text: str, vector: list[float] | None, embedder: str, subject: Subject | None
) -> bool:
    verdict = statements.compare(a.text, text).verdict
    if verdict in {"same", "refinement", "contradiction"}:  # "X?" and "not X?" ask one thing
        return True
    if a.subject_id and subject is not None and a.subject_id != subject.pk:
        return False  # close in meaning, but about another thing: the kitchen fridge, not ours
    return (
        a.embedding is not None
        and vector is not None
        and a.embedder == embedder
        and cosine(list(a.embedding), vector) >= PARAPHRASE_COSINE
    )


@retry_transaction
def propose_guess(
    *, memory: Memory, text: str, why: str = "", subject: Subject | None = None
) -> Proposed:
    """Offer a guess, within the limits: never one already answered (in any wording), never a
    second copy of one pending; with three open it waits for a free slot, and costs nothing
    more to offer then."""
    text = _question(text)
    embedder = embedder_for(memory)
    vector = vector_or_none(embedder, text)  # none from an absent worker: compared by words
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        earlier = _earlier(memory, text, vector, embedder.name, subject)
        if earlier is not None:
            return Proposed(None, _not_asked(earlier))
        guess = Guess.objects.create(
            memory=memory,
            text=text,
            normalized=statements.normalise(text),
            embedding=vector,
            embedder=embedder.name if vector is not None else "",
            why=why[:300],
            subject=subject,
        )
        _offer_waiting(memory)
    guess.refresh_from_db()
    if guess.state == Guess.State.OPEN:
        return Proposed(guess, "Asked.")
    return Proposed(
        guess, f"Worked out; it waits for a free slot ({OPEN_GUESSES_AT_MOST} are open)."
    )


def _earlier(
    memory: Memory, text: str, vector: list[float] | None, embedder: str, subject: Subject | None
) -> Guess | None:
    """The guess, pending or answered, that already asks ``text`` in some wording."""
    for earlier in Guess.objects.for_memory(memory).exclude(state=Guess.State.EXPIRED):
        if _same_question(earlier, text, vector, embedder, subject):
            return earlier
    return None


def _not_asked(earlier: Guess) -> str:
    if earlier.state in (Guess.State.CONFIRMED, Guess.State.REJECTED):
        return f"Not asked: it was already {earlier.state} (“{earlier.text}”)."
    return f"Not asked: the same question is pending (“{earlier.text}”)."


def already_asked(*, memory: Memory, text: str, subject: Subject | None = None) -> str:
    """Why ``text`` would not be asked (pending, or answered, in some wording), or "" when it
    would be: a caller checks this before spending anything on working a guess out.
    ``propose_guess`` checks again under the lock, so this is advice, not a promise."""
    text = _question(text)
    embedder = embedder_for(memory)
    earlier = _earlier(memory, text, vector_or_none(embedder, text), embedder.name, subject)
    return _not_asked(earlier) if earlier is not None else ""


def slot_free(memory: Memory) -> bool:
    """Whether a guess offered now would be asked at once (fewer than three are open)."""
    return Guess.objects.for_memory(memory).open().count() < OPEN_GUESSES_AT_MOST


def _offer_waiting(memory: Memory, now: datetime | None = None) -> None:
    """Fill free slots: sleeping guesses whose rest is over first, then waiting ones, oldest
    first. Call inside a transaction holding the memory row."""
    now = now or timezone.now()
    free = OPEN_GUESSES_AT_MOST - Guess.objects.for_memory(memory).open().count()
    if free <= 0:
        return
    rested = list(
        Guess.objects.for_memory(memory)
        .filter(state=Guess.State.SLEEPING, slept_at__lte=now - SLEEP_FOR)
        .order_by("slept_at")[:free]
    )
    waiting = list(
        Guess.objects.for_memory(memory)
        .filter(state=Guess.State.WAITING)
        .order_by("created_at", "pk")[: free - len(rested)]
    )
    for guess in rested + waiting:
        woke = guess.state == Guess.State.SLEEPING
        guess.state, guess.offered_at = Guess.State.OPEN, now
        guess.expires_at = now + GUESS_LIFETIME  # its fortnight starts again
        guess.save(update_fields=["state", "offered_at", "expires_at"])
        timeline.record_waiting(guess=guess, change="woke" if woke else "opened")


@dataclass(frozen=True)
class Answered:
    guess: Guess
    message: str


@retry_transaction
def answer_guess(*, guess: Guess, answer: str, by=None, reason: str = "") -> Answered:
    """Yes files it as a plain memory line; no closes it for good and keeps the reason as a
    correction. One person wins when two answer at once; the other is told."""
    word = re.match(r"(yes|no)\b", (answer or "").strip().lower())  # "not sure" is neither
    if word is None:
        raise ValidationError("Start the answer with yes or no.")
    yes = word.group(1) == "yes"
    reason = reason or re.sub(r"^(yes|no)\b[\s,.:;!-]*", "", answer.strip(), flags=re.I)
    reason = " ".join(reason.split())[:MAX_REASON]
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=guess.memory_id).first()
        locked = Guess.objects.select_for_update().get(pk=guess.pk)
        if locked.state not in (Guess.State.OPEN, Guess.State.SLEEPING, Guess.State.WAITING):
            who = f" by {locked.answered_by}" if locked.answered_by else ""
            raise Refused(f"That guess was already {locked.state}{who}.")
        locked.answered_at, locked.answered_by, locked.reason = timezone.now(), by, reason
        if yes:
            learned = memory_actions.learn(
                Statement.typed(
                    memory=locked.memory,
                    text=locked.text,
                    origin=Origin.TYPED,
                    by=by,
                    confidence="high",
                )
            )
            locked.state, locked.fact = Guess.State.CONFIRMED, learned.fact
            message = "Filed as known."
        else:
            locked.state = Guess.State.REJECTED
            message = "Noted: brain won't ask that again."
            if reason:
                memory_actions.learn(
                    Statement.typed(
                        memory=locked.memory, text=reason, origin=Origin.CORRECTION, by=by
                    )
                )
                message += " Your reason is kept as a correction."
        locked.save()
        timeline.record_waiting(guess=locked, change=locked.state)
        _offer_waiting(locked.memory)
    return Answered(locked, message)


@retry_transaction
def dismiss_guess(*, guess: Guess, by=None) -> Guess:
    """Put it to sleep: off every screen, not counted, back later with a fresh fortnight."""
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=guess.memory_id).first()
        locked = Guess.objects.select_for_update().get(pk=guess.pk)
        if locked.state != Guess.State.OPEN:
            raise Refused(f"That guess is {locked.get_state_display()}, not open.")
        locked.state, locked.slept_at = Guess.State.SLEEPING, timezone.now()
        locked.save(update_fields=["state", "slept_at"])
        timeline.record_waiting(guess=locked, change="slept")
        _offer_waiting(locked.memory)
    return locked


def tend_guesses(*, now: datetime | None = None) -> None:
    """Daily: expire unanswered guesses past their fortnight, wake rested ones, fill slots."""
    now = now or timezone.now()
    due = Guess.objects.filter(state=Guess.State.OPEN, expires_at__lte=now).select_related("memory")
    for guess in due:
        _expire(guess)
    for memory in Memory.objects.all():
        _fill_slots(memory, now)


@retry_transaction
def _expire(guess: Guess) -> None:
    """An open guess past its fortnight retires itself (unless it was answered meanwhile)."""
    with transaction.atomic():
        if Guess.objects.filter(pk=guess.pk, state=Guess.State.OPEN).update(
            state=Guess.State.EXPIRED
        ):
            guess.state = Guess.State.EXPIRED
            timeline.record_waiting(guess=guess, change="expired")


@retry_transaction
def _fill_slots(memory: Memory, now: datetime) -> None:
    """Offer waiting guesses into one memory's free slots, under its lock."""
    with transaction.atomic():
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        _offer_waiting(memory, now)
