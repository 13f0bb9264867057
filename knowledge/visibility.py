"""Who may read what, decided once: the read rules of a graph memory (seed 001), as queryset
filters every surface goes through (``Fact.objects.readable_by``, ``Passage…``, ``Source…``,
``Subject…``, ``Conflict…``).

The rules, to the letter:

- **Passage**: you read it when one of your roles grants one of its labels. A passage with no
  label (the labeller was unsure, or nobody labelled it) is read by administrators only.
- **Fact**: you read it when you can read every passage it cites. A fact that cites nothing
  (never the case by construction: ``knowledge.actions.file_fact`` and imports cite wherever a
  fact is made) is read by administrators only: the rule fails closed.
- **Page** (a subject): it exists for you when you can read at least one of its facts, and
  it shows only those.
- **Link**: you see it when you can read a fact that mentions the other page and that page
  exists for you (a fact you read about two pages makes both exist for you, so reading the fact
  is enough).
- **Conflict**: you read it when you can read the passages of both sides, that is both facts.
- **Source**: it is listed for you when you can read at least one of its passages; the others
  are masked in its text (``masked_text``).

Administrators read everything: the system (``user=None``: the worker, a terminal without
``--as``, an MCP server without ``--user``), superusers, and in one memory whoever administers
it (``knowledge.access``). Roles come from ``Role.members``, and every person holds the roles of
a memory marked ``everyone`` (the default "Everyone" role granting "Household", so a memory
nobody labelled reads as it always did). Permissions (``knowledge.access``) say what a person may
*do*; this module says what they may *read*, and neither repeats the other.

How it is fast. A passage's labels are interned as a ``LabelSet`` (one row per distinct set of
labels, never changed) and each fact carries the ids of its cited passages' label sets
(``Fact.label_sets``, distinct and in order, 0 for a passage with no label), kept by database
triggers (migration 0012) in the very transaction that cites a passage or relabels one, whatever
wrote it. A reader's scope — the label sets sharing a label with their roles (R), every other
set and 0 (U), and the memories they administer — is read in one query, once a request
(``knowledge.read_rule``). The rule on a fact is then one comparison on its own row with a plain
array: ``label_sets <@ R``, or ``NOT label_sets && U`` when U is the shorter (a reader who reads
most things compares each row with a few ids, not dozens; a set newer than the scope is never
taken as readable). Before the array, two integers on the row (migration 0020): the newest set,
and a mask with one bit per set that, sharing no bit with the mask of U, answers for the array
(a shared bit sends the row to the array: two sets 64 ids apart share one). No join, nothing for
the planner to plan, and raw SQL takes it as it is (``search.readable_where``).

Measured (``bench/visibility.py``: 100k facts citing 300k passages over 12 labels, a reader with
5 roles who reads 92% of the facts, against the same reader with the rule taken out; 2 cores
shared with other work, so figures moved by a third from run to run): the facts list's first
page 2.1–2.4 ms (1.0–1.2 ms without), context() 5.3–10 ms against 4.1–6.7 ms (1.3× for one
question measured alone, 1.5–1.7× over three in the benchmark: the scope's own query is 0.4 ms
of it), and a count of every readable fact 34–50 ms (23–35 ms: a count reads every row either
way). With the mask and ``fact_live`` carrying it (migration 0020), the planner costs of
``brain.embedded`` and the benchmark taking turns at going first: the first page 1.9 ms (1.0
ms), the count 11.7 ms (7.6 ms: from the index alone), context() 5.5 ms against 4.5 ms (1.22×).
U holds the unreadable sets of every memory, so where many memories hold sets this reader cannot
read, more of the 64 bits are U's and more rows go on to the array: never a wrong answer, only
back towards the cost of the array alone. What was tried and left: the scope as subqueries in
the statement (always fresh, but planning them in each of the five places context() applies the
rule cost a millisecond a call), the ORM's array lookups (they build one expression per id: a
millisecond for 75 ids), a GIN index on ``label_sets`` (it serves only a reader who reads a
small share; for everyone else the planner does better walking the index the query uses anyway,
newest first or a subject's slice, and checking the array on each row), and ``label_sets <@ R``
alone (with 75 readable sets against 3 unreadable ones each row costs 25 times the comparisons).

Concurrency: citing takes a share lock on the cited passages before it reads their label sets,
and relabelling updates the passage rows, so the two never interleave: a fact cited while its
passage is relabelled ends up with the new set, whichever commits first, and a reader never sees
a fact readable by a role that cannot read all its passages (knowledge/tests/test_relabel_race.py
runs relabels against writes with a concurrent reader).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import Http404

from knowledge import access, current
from knowledge.models import Label, Memory, Permission, Role
from knowledge.read_rule import (
    Reader,
    as_read,
    bound_to,
    readable_facts,
    readable_passages,
    reads_everything,
    reads_nothing,
    request_scope,
)

__all__ = [
    "Reader",
    "household",
    "masked_text",
    "may_read_all_of",
    "readable_facts",
    "readable_passages",
    "reads_everything",
]


def may_read_all_of(user, memory: Memory) -> bool:
    """Whether ``user`` reads everything in ``memory`` (no passage is masked for them)."""
    bound = bound_to(user)
    if bound is not None and bound != memory.pk:
        return False
    user = as_read(user)
    if reads_everything(user):
        return True
    if isinstance(user, Reader) or reads_nothing(user):
        return False
    return memory.memberships.filter(user=user, permission__gte=Permission.ADMINISTER).exists()


# Readers that are not a person ------------------------------------------------------------------


def household(memory: Memory) -> Reader:
    """What every member of ``memory`` reads: the labels of its ``everyone`` roles. The memory
    document and its voice distillate hold only facts this reader reads."""
    labels = Label.objects.filter(roles__memory=memory, roles__everyone=True)
    return Reader(f"everyone in {memory.name}", frozenset(labels.values_list("pk", flat=True)))


def as_role(role: Role) -> Reader:
    """Read as ``role``: its labels and those of the memory's ``everyone`` roles, which every
    holder of the role has too."""
    everyone = household(role.memory).label_ids
    own = frozenset(role.labels.values_list("pk", flat=True))
    return Reader(f"the role {role.name}", own | everyone)


# Defaults ---------------------------------------------------------------------------------------

HOUSEHOLD = "Household"
HOUSEHOLD_MEANING = (
    "What everyone in the memory may read: the ordinary things a household (or a team) shares."
)
EVERYONE = "Everyone"


def default_labels(memory: Memory) -> list[Label]:
    """The labels a source added with none chosen gives its passages. A memory with no label at
    all gets "Household", granted to an "Everyone" role every member holds, so until someone
    labels anything everyone reads everything, as before labels existed."""
    labels = list(Label.objects.filter(memory=memory, default=True))
    if labels or Label.objects.filter(memory=memory).exists():
        return labels
    label, _ = Label.objects.get_or_create(
        memory=memory,
        name=HOUSEHOLD,
        defaults={"meaning": HOUSEHOLD_MEANING, "default": True},
    )
    role, _ = Role.objects.get_or_create(memory=memory, name=EVERYONE, defaults={"everyone": True})
    role.labels.add(label)
    return [label]


# A source's text, as a reader may see it --------------------------------------------------------

MASKED = "[…a passage you may not read…]"


def reads_whole(source, user) -> bool:
    """Whether ``user`` reads every passage of ``source`` (then its whole text is theirs)."""
    if may_read_all_of(user, source.memory):
        return True
    every = source.passages.as_system("all of a source's passages, beside those the reader reads")
    return every.exists() and not every.exclude(pk__in=readable_passages(every, user)).exists()


def masked_text(source, user) -> str:
    """``source``'s text for ``user``: whole when they read every passage of it; otherwise
    its passages in order, each one they may not read replaced by MASKED (a run of them by
    one), and nothing of the text that lies outside the passages."""
    if reads_whole(source, user):
        return source.text
    readable = set(source.passages.readable_by(user).values_list("pk", flat=True))
    shown: list[str] = []
    every = source.passages.as_system("the source's text, each passage masked or not")
    for pk, text in every.order_by("ordinal").values_list("pk", "text"):
        piece = text if pk in readable else MASKED
        if not (piece == MASKED and shown and shown[-1] == MASKED):
            shown.append(piece)
    return "\n\n".join(shown)


def mask(source, user) -> None:
    """Make ``source`` (a row about to be shown, never saved) show ``user`` only what they may
    read: its text masked, and a conversation's turns left out unless they read all of it."""
    if reads_whole(source, user):
        return
    source.text = masked_text(source, user)
    if hasattr(source, "turns"):
        source.turns = []


# Read as: an administrator sees a memory exactly as a role or a person does ------------------

READ_AS = "read_as"  # the session key: {"memory": id, "role": id} or {"memory": id, "person": id}


def reader_chosen(request):
    """Whom the person reads as in the request's memory, when they chose it and administer that
    memory (checked on every request); else None."""
    user = getattr(request, "user", None)
    chosen = getattr(request, "session", {}).get(READ_AS)
    if not chosen or user is None or not user.is_authenticated:
        return None
    try:
        memory = current.memory_of(request)
    except Http404:  # a slug naming no memory: the view answers that itself
        return None
    if chosen.get("memory") != memory.pk or not access.may(user, memory, Permission.ADMINISTER):
        return None
    if chosen.get("role"):
        role = Role.objects.filter(pk=chosen["role"], memory=memory).first()
        return as_role(role) if role is not None else None
    person = get_user_model().objects.filter(pk=chosen.get("person")).first()
    return person


def reading_as_name(reader) -> str:
    return reader.name if isinstance(reader, Reader) else f"{reader.get_username()}"


class ReadingMiddleware:
    """What a person may read is looked up once a request; an administrator who chose Read as
    reads, everywhere in this request, exactly as that role or person."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        reader = reader_chosen(request)
        request.reading_as = reader
        chosen = None
        if reader is not None:
            chosen = (request.user.pk, reader, request.session[READ_AS]["memory"])
        with request_scope(chosen):
            return self.get_response(request)


def context(request) -> dict:
    """For templates: ``reading_as``, the name of whom the page is read as (the banner)."""
    reader = getattr(request, "reading_as", None)
    return {"reading_as": reading_as_name(reader)} if reader is not None else {}
