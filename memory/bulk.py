"""Many statements at once (``POST /api/memory/add/bulk``): a list a program already holds —
a product's specifications, a house's inventory — added at a thousand a second.

Rules:

- At most MAX_STATEMENTS a request (the API's 1 MiB body bounds it too).
- Every statement is cleaned (``actions.clean_fact_text``) and checked for secrets before
  anything is written. One that fails refuses the whole request, naming its number: a request
  is added whole or not at all, so sending it again once fixed is safe.
- A statement whose words a live fact of the memory already holds (``statements.normalise``),
  or that the request says twice, is not added again: it is counted as already known.
- Each fact is about the subjects its words name (``subjects.mentions``, the labels read once
  for the request) and those the request names for all of them.
- The rest go through the import (``memory.portable.import_memory``, with a facts and an
  observations section built here): one transaction, the request as their source, each
  fact's line cited as the import cites it, and vectors computed after it in the background.

What it does not do, and why: a statement is not judged against its neighbours by the write
gate. Reading each one's neighbours is what holds teaching to about a hundred statements a
second, so a contradiction with what is known is not looked for and nothing is retired. The
facts are known at once (filed) but kept out of the document, which the consolidator writes
from what people teach one at a time; recall finds them like any fact. Teach a statement on
its own (``POST /api/memory/add``) when it may contradict what the memory holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.utils import timezone

from knowledge import kinds, statements
from knowledge.actions import CONFIDENCE
from knowledge.models import Fact, Memory, Observation, Source, name_of
from knowledge.secret_filter import secret_in
from knowledge.subjects import mentions, resolve
from memory import portable, switches
from memory.actions import clean_fact_text
from memory.models import Confidence

MAX_STATEMENTS = 5_000


@dataclass(frozen=True)
class Added:
    """What a bulk add did: how many facts it added and how many it already knew."""

    added: int
    known: int

    @property
    def message(self) -> str:
        known = f"; {self.known:,} already known" if self.known else ""
        return (
            f"Added {self.added:,} facts{known}. They are recalled now; their vectors are "
            "computed in the background."
        )


def add_many(
    *,
    memory: Memory,
    texts: Sequence[str],
    by=None,
    subjects: Sequence = (),
    confidence: str = Confidence.MEDIUM,
) -> Added:
    """Add ``texts`` as facts of ``memory`` (see the module docstring). Raises ValidationError
    naming the first statement that cannot be kept, and UnknownSubject."""
    switches.require_learning(memory)
    if not texts:
        raise ValidationError("Send at least one statement.")
    if len(texts) > MAX_STATEMENTS:
        raise ValidationError(
            f"At most {MAX_STATEMENTS:,} statements a request; this one has {len(texts):,}."
        )
    cleaned = [_checked(number, text) for number, text in enumerate(texts, start=1)]
    named = resolve(memory, list(subjects))
    wanted: dict[str, str] = {}
    for text in cleaned:
        wanted.setdefault(statements.normalise(text), text)
    known = set(
        Fact.objects.as_system("bulk adds skip lines already known")
        .for_memory(memory)
        .live()
        .filter(normalized__in=list(wanted))
        .values_list("normalized", flat=True)
    )
    fresh = [text for normalized, text in wanted.items() if normalized not in known]
    if fresh:
        portable.import_memory(
            memory, portable.checked(_as_export(memory, fresh, by, named, confidence))
        )
    return Added(len(fresh), len(cleaned) - len(fresh))


def _checked(number: int, text: str) -> str:
    try:
        text = clean_fact_text(text)
    except ValidationError as error:
        raise ValidationError(f"Statement {number}: {' '.join(error.messages)}") from None
    secret = secret_in(text)
    if secret:
        raise ValidationError(
            f"Statement {number} looks like {secret}. brain does not keep secrets; nothing "
            "was added."
        )
    return text


def _as_export(memory: Memory, texts: list[str], by, named: list, confidence: str) -> dict:
    """``texts`` as the facts and observations sections of an export, citing one source."""
    now = timezone.now()
    at = now.isoformat()
    who = name_of(by)
    source = {
        "kind": Source.Kind.API,
        "title": f"{len(texts):,} statements sent at once{f' by {who}' if who else ''}, "
        f"{timezone.localtime(now):%-d %b %Y, %H:%M}",
        "reference": str(uuid.uuid4()),
        "text": "",
    }
    labels = list({s.pk: s for s in named}.values())
    mentioned_in = mentions(memory)
    facts, observations = [], []
    for text in texts:
        uid, kind = str(uuid.uuid4()), kinds.kind_for(text)
        about = labels + [s for s in mentioned_in(text) if s not in labels]
        expires = kinds.expiry_for(kind, now)
        facts.append(
            {
                "uid": uid,
                "text": text,
                "kind": kind,
                "valence": Fact.Valence.FACT,
                "channel": Fact.Channel.API,
                "taught_by": who,
                "confidence": CONFIDENCE[confidence],
                "valid_from": at,
                "expires_at": expires.isoformat() if expires else None,
                "status": Fact.Status.FILED,
                "in_document": False,
                "created_at": at,
                "source": source,
                "subjects": [_reference(subject) for subject in about],
            }
        )
        observations.append(
            {
                "fact": uid,
                "kind": Observation.Kind.TAUGHT,
                "text": text,
                "said_by": who,
                "channel": Fact.Channel.API,
                "created_at": at,
            }
        )
    return {
        "format": portable.FORMAT,
        "version": portable.VERSION,
        "facts": facts,
        "observations": observations,
    }


def _reference(subject) -> dict:
    if subject.entity_id:
        return {"entity_id": subject.entity_id}
    return {"kind": subject.kind, "name": subject.name}
