"""What is taught: a ``Statement``, built once by the surface that heard it and handed to
``memory.actions.learn``.

A statement is checked as it is built, so nothing is judged or written for words brain would
not keep: empty or too long, a secret, talk and not a fact, or — said in a conversation — only
a question (``said_text``); an unknown origin or confidence. Each raises ValidationError saying
why. Its text is kept as said (``statements.as_stored``, the talk around it left out) and
compared in its normalised form (``statements.normalise``), worked out once here.

The surfaces and the constructor each builds with:

- ``typed``: a person telling brain now — the Knowledge tab, the terminal, the API, a bulk add,
  a guess confirmed, a fact edited (a correction), the demo household;
- ``said``: a line of a conversation — the ask bar's teaching turn, a reflection over the
  conversation — with the conversation as its source and the turn that said it;
- ``compiled``: a statement compiled from a document's passages, which it cites, judged for
  whoever reads them;
- ``distilled``: what an agent distilled from its episodes (``memory_write``, an agent's
  encoding or sleep pass), citing them, with the agent's own verdict when it gave one;
- ``derived``: what brain concluded itself — an insight, a study conclusion, a judgement — with
  no speaker, judged for whoever it was concluded for (everyone, by default).

``reader`` is whose reading the gate judges a statement against: its speaker's, unless the
surface says otherwise (a compiled passage's readers, a study session's requester). A statement
judged for its readers never strengthens, replaces or opens a conflict with a fact they cannot
read, and never adds what it says to a fact read by people who cannot read its passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from knowledge import kinds, statements
from knowledge.models import Episode, Memory, Passage, Source, Subject, name_of
from knowledge.read_layer import SYSTEM, reader_for
from knowledge.secret_filter import refuse_secrets
from memory.models import Confidence, Origin

MAX_ITEM_CHARS = 1000  # a fact is a sentence or two, not a document

#: Channels where what is taught is a line of a conversation, where a question tells nothing.
CONVERSATION_ORIGINS = frozenset({Origin.VOICE, Origin.CHAT})


def clean_fact_text(text: str | None) -> str:
    """The text of a fact as it will be stored, or ValidationError naming the limit."""
    return statements.as_stored_within(
        text,
        MAX_ITEM_CHARS,
        what="fact",
        empty="A fact can't be empty: say what brain should remember.",
        advice="Say it in a sentence or two.",
    )


def check_origin_and_confidence(origin: str, confidence: str) -> None:
    if origin not in Origin.values:
        raise ValidationError(f"Unknown origin {origin!r}: use one of {', '.join(Origin.values)}.")
    if confidence not in Confidence.values:
        raise ValidationError(f"Confidence must be high, medium or low, not {confidence!r}.")


def said_text(text: str | None, *, origin: str = Origin.TYPED) -> str:
    """What of ``text`` is kept as a statement, or ValidationError saying why nothing is:
    empty or too long, a secret, talk and not a fact (a greeting, thanks, a goodbye, small
    talk: ``kinds.small_talk``), or, said in a conversation, only questions. The talk around
    a statement is left out ("Hi Beth! I got the job." keeps "I got the job.")."""
    text = clean_fact_text(text)
    refuse_secrets(text)
    talk = kinds.small_talk(text, said=origin in CONVERSATION_ORIGINS)
    if talk:
        raise ValidationError(f"That is {talk}, not something to remember; nothing was kept.")
    if origin in CONVERSATION_ORIGINS and kinds.only_asks(text):
        raise ValidationError(
            "That asks something and tells nothing to remember; nothing was kept."
        )
    return kinds.without_small_talk(text)


@dataclass(frozen=True)
class Statement:
    """One statement to learn, checked, with everything ``learn`` judges and files it by.

    ``evidence``: the episodes it was distilled from; the fact cites each and is valid from
    the first (the caller claims them). ``turn``: the turn of the conversation ``source`` that
    said it (its observation points there). ``cites``: the passages of ``source`` it came
    from; a new fact cites them, and a statement already known only strengthens the fact it
    restates, never adding a citation. ``verdict`` and ``target``: the teller's own judgement
    (an agent's, or brain's own replacing its previous one), done as said.
    """

    memory: Memory
    text: str  # as stored
    normalized: str  # as compared: statements.normalise(text)
    origin: str
    confidence: str
    by: Any  # the speaker: a person, or None for brain itself
    reader: Any  # whose reading the gate judges it against
    source: Source | None = None
    cites: tuple[Passage, ...] = ()
    evidence: tuple[Episode, ...] = ()
    turn: int | None = None
    subjects: tuple[Subject | int | str, ...] = ()
    outcome: bool | None = None
    kind: str | None = None
    verdict: str | None = None
    target: int | None = None

    @property
    def speaker(self) -> str:
        return name_of(self.by)

    @classmethod
    def typed(
        cls,
        *,
        memory: Memory,
        text: str | None,
        by=None,
        origin: str = Origin.TYPED,
        confidence: str = Confidence.MEDIUM,
        subjects: Sequence[Subject | int | str] = (),
        outcome: bool | None = None,
        kind: str | None = None,
        source: Source | None = None,
        cites: Sequence[Passage] = (),
        verdict: str | None = None,
        target: int | None = None,
    ) -> Statement:
        """A person telling brain now (typed, at the terminal, through the API, a correction),
        judged for that person; ``verdict`` is a teller's own, through the API."""
        return cls._checked(
            memory,
            text,
            origin,
            confidence,
            by,
            reader=by,
            subjects=subjects,
            outcome=outcome,
            kind=kind,
            source=source,
            cites=cites,
            verdict=verdict,
            target=target,
        )

    @classmethod
    def said(
        cls,
        *,
        memory: Memory,
        text: str | None,
        by=None,
        origin: str = Origin.CHAT,
        confidence: str = Confidence.MEDIUM,
        source: Source | None = None,
        turn: int | None = None,
        subjects: Sequence[Subject | int | str] = (),
        kind: str | None = None,
        outcome: bool | None = None,
    ) -> Statement:
        """A line of the conversation ``source``, said by ``by`` at ``turn``."""
        return cls._checked(
            memory,
            text,
            origin,
            confidence,
            by,
            reader=by,
            source=source,
            turn=turn,
            subjects=subjects,
            kind=kind,
            outcome=outcome,
        )

    @classmethod
    def compiled(
        cls,
        *,
        memory: Memory,
        text: str | None,
        by,
        source: Source,
        cites: Sequence[Passage],
        reader,
        subjects: Sequence[Subject | int | str] = (),
        origin: str = Origin.IMPORT,
        confidence: str = Confidence.MEDIUM,
    ) -> Statement:
        """A statement compiled from the passages ``cites`` of ``source``, judged for
        ``reader``: whoever reads those passages."""
        return cls._checked(
            memory,
            text,
            origin,
            confidence,
            by,
            reader=reader,
            source=source,
            cites=cites,
            subjects=subjects,
        )

    @classmethod
    def distilled(
        cls,
        *,
        memory: Memory,
        text: str | None,
        by,
        evidence: Sequence[Episode],
        outcome: bool | None = None,
        source: Source | None = None,
        confidence: str = Confidence.MEDIUM,
        verdict: str | None = None,
        target: int | None = None,
    ) -> Statement:
        """What an agent distilled from the episodes ``evidence``, through the API, with its
        own ``verdict`` on ``target`` when it gave one."""
        return cls._checked(
            memory,
            text,
            Origin.API,
            confidence,
            by,
            reader=by,
            evidence=evidence,
            outcome=outcome,
            source=source,
            verdict=verdict,
            target=target,
        )

    @classmethod
    def derived(
        cls,
        *,
        memory: Memory,
        text: str | None,
        origin: str,
        confidence: str = Confidence.MEDIUM,
        source: Source | None = None,
        cites: Sequence[Passage] = (),
        reader=SYSTEM,
        subjects: Sequence[Subject | int | str] = (),
        kind: str | None = None,
        verdict: str | None = None,
        target: int | None = None,
    ) -> Statement:
        """What brain concluded itself (an insight, a study, a judgement): no speaker, judged
        for ``reader`` (everyone, unless it was concluded for someone)."""
        return cls._checked(
            memory,
            text,
            origin,
            confidence,
            None,
            reader=reader,
            source=source,
            cites=cites,
            subjects=subjects,
            kind=kind,
            verdict=verdict,
            target=target,
        )

    @classmethod
    def _checked(
        cls,
        memory: Memory,
        text: str | None,
        origin: str,
        confidence: str,
        by,
        *,
        reader,
        subjects: Sequence[Subject | int | str] = (),
        cites: Sequence[Passage] = (),
        evidence: Sequence[Episode] = (),
        **rest: Any,
    ) -> Statement:
        kept = said_text(text, origin=origin)
        check_origin_and_confidence(origin, confidence)
        return cls(
            memory=memory,
            text=kept,
            normalized=statements.normalise(kept),
            origin=origin,
            confidence=confidence,
            by=by,
            reader=reader_for(reader),
            subjects=tuple(subjects),
            cites=tuple(cites),
            evidence=tuple(evidence),
            **rest,
        )
