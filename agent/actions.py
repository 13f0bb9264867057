"""Agent memory: the life cycle of what an agent learns, one action per verb. Every surface (the
MCP tools, ``/api/episodes/``, ``/api/procedures/``, ``/api/agent/…``, ``brain agent …``, the
session hooks and the beat) calls these and shows the result's ``.message``.

The interface (keyword-only; each returns a result object carrying its own message):

    encode(memory=, text=, outcome="unknown", by=None, occurred_at=None) -> Encoded
    pending(memory=, limit=50) -> list[Episode]
    sleep(memory=, by=None, tidy=True, keep=PRUNE_KEEP, now=None) -> Slept
    distil(memory=, episode_ids=, propositions=, by=None) -> Distilled
    decay(memory=, now=None) -> Decayed
    prune(memory=, keep=PRUNE_KEEP) -> Pruned
    record_procedure(memory=, task=, steps=, outcome="unknown", by=None) -> ProcedureRecorded
    procedure_outcome(procedure=, outcome=) -> ProcedureRecorded
    record_outcome(memory=, ref=, outcome=) -> OutcomeRecorded  # "12": a fact, "p3": a procedure
    set_core(memory=, text=, by=None) -> CoreSaved
    stats(memory=, reader=None) -> Stats
    parse_outcome(value) -> "ok" | "fail" | "unknown"   # ValidationError for anything else

Refusals are ``django.core.exceptions.ValidationError`` (bad outcome, empty or secret text, an
unknown episode id) with a message naming the problem. Permissions are checked by the surfaces
(``knowledge.access``): episodes, distillation, procedures, outcomes and the sleep pass need
teach; the core needs curate to change; everything else reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError

OUTCOMES = ("ok", "fail", "unknown")
PRUNE_KEEP = 20


def parse_outcome(value) -> str:
    """``ok``, ``fail`` or ``unknown`` (None and "" are unknown). Anything else, "success" and
    "failure" included, is refused rather than guessed at."""
    if value is None or value == "":
        return "unknown"
    if isinstance(value, str) and value in OUTCOMES:
        return value
    raise ValidationError(f"outcome must be one of ok, fail or unknown, not {value!r}.")


@dataclass(frozen=True)
class Encoded:
    """An episode recorded. ``known``: a live belief that already said it (its support rose, the
    episode is cited by it); ``restates``: a pending episode that already said it."""

    episode: object
    known: object | None = None
    restates: object | None = None

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Distilled:
    episodes: list = field(default_factory=list)
    learned: list = field(default_factory=list)  # memory.actions.Learned, one per proposition
    dropped: list[str] = field(default_factory=list)  # fragments that did not stand alone
    error: str = ""  # the extractor failed: nothing was written

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Decayed:
    retired: list = field(default_factory=list)

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Pruned:
    retired: list = field(default_factory=list)
    kept: int = 0
    keep: int = PRUNE_KEEP

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Slept:
    distilled: Distilled
    decayed: Decayed | None = None
    pruned: Pruned | None = None

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class ProcedureRecorded:
    procedure: object
    created: bool

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class OutcomeRecorded:
    ref: str  # "12" or "p3"
    previous_confidence: float
    confidence: float
    successes: int
    failures: int

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class CoreSaved:
    text: str
    changed: bool

    @property
    def message(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Stats:
    memory: str
    beliefs: int
    failures: int
    procedures: int
    episodes: int
    pending: int
    retired: int
    core_tokens: int

    @property
    def message(self) -> str:
        raise NotImplementedError


def encode(*, memory, text: str, outcome: str = "unknown", by=None, occurred_at=None) -> Encoded:
    raise NotImplementedError


def pending(*, memory, limit: int = 50) -> list:
    raise NotImplementedError


def sleep(
    *, memory, by=None, tidy: bool = True, keep: int = PRUNE_KEEP, now: datetime | None = None
) -> Slept:
    raise NotImplementedError


def distil(*, memory, episode_ids: list[int], propositions: list[str], by=None) -> Distilled:
    raise NotImplementedError


def decay(*, memory, now: datetime | None = None) -> Decayed:
    raise NotImplementedError


def prune(*, memory, keep: int = PRUNE_KEEP) -> Pruned:
    raise NotImplementedError


def record_procedure(
    *, memory, task: str, steps: list[str], outcome: str = "unknown", by=None
) -> ProcedureRecorded:
    raise NotImplementedError


def procedure_outcome(*, procedure, outcome: str) -> ProcedureRecorded:
    raise NotImplementedError


def record_outcome(*, memory, ref: str | int, outcome: str) -> OutcomeRecorded:
    raise NotImplementedError


def set_core(*, memory, text: str, by=None) -> CoreSaved:
    raise NotImplementedError


def stats(*, memory, reader=None) -> Stats:
    raise NotImplementedError
