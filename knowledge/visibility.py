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
labels) and each fact carries the ids of its cited passages' label sets (``Fact.label_sets``,
distinct, 0 for a passage with no label), kept by database triggers (migration 0012) in the
very transaction that cites a passage or relabels one, whatever wrote it. A reader's readable
label sets are those sharing a label with their roles (R), and every other set and 0 are what
they may not read (U): both are worked out by database functions once per statement, as
subqueries, so the rule on a fact is one comparison on its own row — ``label_sets <@ R``, or
``NOT label_sets && U`` when U is the shorter (a reader who reads most things compares each
row with a few ids, not dozens) — with no join, and raw SQL takes it as it is
(``search.readable_where``). The SQL lives in ``knowledge.read_rule``.

Measured (``bench/visibility.py``: 100k facts citing 300k passages over 12 labels, a reader with
5 roles who reads 92% of the facts, against the same reader with the rule taken out, on this
2-core machine while it was shared): the facts list's first page 2.1 ms (1.3 ms without), a
count of every readable fact 70 ms (6 ms: without the rule the count never reads the rows), and
context() 7.2 ms (5.2 ms). What was tried and left: the rule's subqueries written out in full
(planning them in each of the five places context() applies the rule cost 1 ms a call), a GIN
index on ``label_sets`` (it serves only a reader who reads a small share; for everyone else the
planner does better walking the index the query uses anyway, newest first or a subject's slice,
and checking the array on each row), and ``label_sets <@ R`` alone (75 readable sets against 3
unreadable ones made the count 8 ms slower at 10k).

Concurrency: citing takes a share lock on the cited passages before it reads their label sets,
and relabelling updates the passage rows, so the two never interleave: a fact cited while its
passage is relabelled ends up with the new set, whichever commits first, and a reader never sees
a fact readable by a role that cannot read all its passages (knowledge/tests/test_visibility.py
runs a relabel against a compile with a concurrent reader).
"""

from __future__ import annotations

from knowledge.models import Label, Memory, Permission, Role
from knowledge.read_rule import (
    Reader,
    readable_facts,
    readable_passages,
    reads_everything,
    reads_nothing,
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
    every = source.passages.all()
    return every.exists() and not every.exclude(pk__in=readable_passages(every, user)).exists()


def masked_text(source, user) -> str:
    """``source``'s text for ``user``: whole when they read every passage of it; otherwise
    its passages in order, each one they may not read replaced by MASKED (a run of them by
    one), and nothing of the text that lies outside the passages."""
    if reads_whole(source, user):
        return source.text
    readable = set(readable_passages(source.passages.all(), user).values_list("pk", flat=True))
    shown: list[str] = []
    for pk, text in source.passages.order_by("ordinal").values_list("pk", "text"):
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
