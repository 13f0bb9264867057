"""Many statements at once (``POST /api/memory/add/bulk``): a list a program already holds —
a product's specifications, a house's inventory, a conversation's lines — added in one request.

What a bulk add judges, and what it does not:

- Every statement is cleaned (``taught.clean_fact_text``) and checked for secrets before
  anything is written. One that fails refuses the whole request, naming its number: a request
  is added whole or not at all, so sending it again once fixed is safe.
- Talk is not a fact: a greeting, thanks, a goodbye, small talk (``kinds.small_talk``) or a
  line that only asks is not added, and is counted by what it is (``not_facts``); the talk
  around a statement ("Hi Jo! The keys …") is left out of its fact.
- A statement whose words a live fact of the memory already holds (``statements.normalise``),
  or that the request says twice, is not added again: it is counted as already known.
- A statement that says something changed (a change word: "slipped to", "handed over to",
  "moved to", "no longer", "now", "not …": ``statements.says_a_change``) is taught as one line
  is, through ``actions.learn``, after the rest of the request: judged against what is known
  (those earlier in the same request included), it replaces the line it changes or opens a
  conflict, and waits to be filed. These are few in a list; their verdicts are counted
  (``judged``).
- Each fact is about the subjects its words name (``subjects.mentions``, the labels read once
  for the request) and those the request names for all of them.
- The rest go through the import (``memory.portable.import_memory``, with a facts and an
  observations section built here): one transaction with the above, the request as their
  source, each fact's line cited as the import cites it, and vectors computed after it in the
  background.

Not looked for, and why: a statement with no word of change is not judged against its
neighbours (reading each one's neighbours is what holds teaching to tens of statements a
second), so a new value said plainly ("the boiler is serviced in October" after "… in March")
stays beside the old one, and a paraphrase is added beside what it repeats. Those facts are
known at once (filed) but kept out of the document, which the consolidator writes from what
people teach one at a time; recall finds them like any fact. Teach a statement on its own
(``POST /api/memory/add``) when it may contradict what the memory holds without saying so.

Each request costs a fixed few statements beyond its rows (its source, its passages, its
facts, their citations and observations): send a program's list in one request, not a
request a line.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from knowledge import kinds, statements
from knowledge.actions import CONFIDENCE
from knowledge.models import Fact, Memory, Observation, Source, name_of
from knowledge.secret_filter import secret_in
from knowledge.subjects import mentions, resolve
from memory import actions, portable, switches
from memory.models import Confidence, Origin
from memory.taught import Statement, clean_fact_text

MAX_STATEMENTS = 5_000


@dataclass(frozen=True)
class Added:
    """What a bulk add did: how many facts it added, how many it already knew, how many lines
    were talk or questions (by what they were), and the verdicts on those that said a change."""

    added: int
    known: int
    not_facts: dict[str, int] = field(default_factory=dict)
    judged: dict[str, int] = field(default_factory=dict)

    @property
    def refused(self) -> int:
        return sum(self.not_facts.values())

    @property
    def message(self) -> str:
        known = f"; {self.known:,} already known" if self.known else ""
        talk = ""
        if self.refused:
            kinds_of = ", ".join(f"{kind} {n}" for kind, n in self.not_facts.items())
            talk = f"; {self.refused:,} were talk or questions, not facts ({kinds_of})"
        changes = ""
        if self.judged:
            verdicts = ", ".join(f"{verdict} {n}" for verdict, n in self.judged.items())
            changes = f" What said something changed was judged against what is known: {verdicts}."
        return (
            f"Added {self.added:,} facts{known}{talk}. They are recalled now; their vectors are "
            f"computed in the background.{changes}"
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
    not_facts: Counter[str] = Counter()
    wanted: dict[str, str] = {}
    for text in cleaned:
        talk = kinds.small_talk(text) or ("a question" if kinds.only_asks(text) else "")
        if talk:
            not_facts[talk] += 1
            continue
        text = kinds.without_small_talk(text)
        wanted.setdefault(statements.normalise(text), text)
    known = set(
        Fact.objects.as_system("bulk adds skip lines already known")
        .for_memory(memory)
        .live()
        .filter(normalized__in=list(wanted))
        .values_list("normalized", flat=True)
    )
    fresh = [text for normalized, text in wanted.items() if normalized not in known]
    changes = [text for text in fresh if statements.says_a_change(text, name_of(by))]
    plain = [text for text in fresh if text not in changes]
    judged: Counter[str] = Counter()
    with transaction.atomic():  # whole or not at all, the changes with the rest
        if plain:
            data = _as_export(memory, plain, by, named, confidence)
            portable.import_memory(
                memory,
                portable.checked(data, sections=portable.SECTIONS),
                sections=portable.SECTIONS,
            )
        for text in changes:
            learned = actions.learn(
                Statement.typed(
                    memory=memory,
                    text=text,
                    origin=Origin.API,
                    confidence=confidence,
                    by=by,
                    subjects=named,
                )
            )
            judged[learned.verdict] += 1
    same = judged.pop("same", 0)
    judged = Counter({verdict: n for verdict, n in judged.items() if verdict != "novel"})
    added = len(fresh) - same
    known_now = len(cleaned) - sum(not_facts.values()) - added
    return Added(added, known_now, dict(not_facts), dict(judged))


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
