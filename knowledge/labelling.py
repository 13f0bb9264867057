"""Labels on passages: their names, setting them on a source, relabelling, labelling rules,
and deleting a label.

- A label's name is compared with the memory's other labels after NFKC, case folding and
  dropping invisible characters (``name_key``): "Sa\u200bles" and "Ｓａｌｅｓ" read as "Sales"
  on a screen, so a second label with either name would look like the first while granting
  something else. Such a name is refused, naming the label it clashes with
  (``check_label_name``); a name is kept in its NFKC form with invisible characters taken out.
- Labelling rules (``LabellingRule``, set in the admin by the memory's administrators) label
  a new source by who added it, its channel, words of its title or a page it names; their
  labels are set like a person's, so relabelling keeps them (``rule_labels``).

- A label set on a source (by a person or a rule) is taken by its passages (``label_source``).
- A new label, or a changed meaning, relabels a source or the whole memory (``relabel``):
  nothing is compiled again, because facts follow their passages (the database moves every
  citing fact's label sets in the same transaction; see visibility.py).
- Deleting a label still in use is refused, naming where (``delete_label``).

The labeller that may restrict a passage further, and asks when unsure, is
``knowledge.labeller``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from brain.db.retry import retry_transaction
from brain.errors import StateConflict
from brain.words import counted
from knowledge import passages
from knowledge.models import Label, LabelSet, Passage, Source


class LabelInUse(StateConflict):
    """A label passages or sources still carry; the message names where."""


def delete_label(label: Label) -> None:
    """Delete ``label`` unless a passage carries it or a source sets it (LabelInUse, naming
    the sources). Roles that granted it simply no longer do."""
    using = (
        Source.objects.as_system("where a label is still used, for its administrator")
        .filter(Q(passages__labels=label) | Q(labels=label))
        .distinct()
    )
    where = list(using.order_by("title").values_list("title", flat=True))
    if where:
        shown = ", ".join(f"“{title}”" for title in where[:3])
        more = f" and {counted(len(where) - 3, 'other source')}" if len(where) > 3 else ""
        raise LabelInUse(
            f"The label “{label.name}” is still in use, on {shown}{more}: take it off "
            f"{'that source' if len(where) == 1 else 'those sources'} first (or relabel them)."
        )
    with transaction.atomic():
        # Label sets that held it are no passage's any more (a passage carrying it was refused
        # above), so they go with it.
        LabelSet.objects.filter(labels__contains=[label.pk]).delete()
        label.delete()


@dataclass(frozen=True)
class Relabelled:
    source: Source | None
    passages: int
    labels: tuple[str, ...]

    @property
    def message(self) -> str:
        where = f"“{self.source.title}”" if self.source else "the memory"
        named = ", ".join(self.labels) or "no label (administrators only)"
        return (
            f"Relabelled {counted(self.passages, 'passage')} of {where}: {named}. Facts "
            "citing them follow at once; nothing was compiled again."
        )


@retry_transaction
def label_source(source: Source, labels: Iterable[Label]) -> Relabelled:
    """Set ``labels`` on ``source``: every passage of it takes them (and so every fact citing
    them). The labeller may restrict a passage further afterwards."""
    labels = list(labels)
    _same_memory(source.memory_id, labels)
    with transaction.atomic():
        source.labels.set(labels)
        moved = list(source.passages.as_system("every passage of the source takes its labels"))
        passages.set_labels(moved, labels)
    return Relabelled(source, len(moved), tuple(label.name for label in labels))


@retry_transaction
def label_passages(chosen: Iterable[Passage], labels: Iterable[Label]) -> Relabelled:
    """Give each chosen passage exactly ``labels`` (a person's decision: no longer unsure).
    Facts citing them follow in the same transaction (a trigger), which can meet a compile
    filing facts on the same passages in a deadlock: the loser runs again
    (``retry_transaction``), and a person never sees it."""
    chosen, labels = list(chosen), list(labels)
    for passage in chosen:
        _same_memory(passage.memory_id, labels)
    with transaction.atomic():
        passages.set_labels(chosen, labels)
        Passage.objects.filter(pk__in=[p.pk for p in chosen]).update(unsure=False, decided=True)
    source = chosen[0].source if len({p.source_id for p in chosen}) == 1 else None
    return Relabelled(source, len(chosen), tuple(label.name for label in labels))


def _same_memory(memory_id: int, labels: list[Label]) -> None:

    stray = [label.name for label in labels if label.memory_id != memory_id]
    if stray:
        raise ValidationError(
            f"The label {', '.join(stray)} belongs to another memory; use this memory's labels."
        )
