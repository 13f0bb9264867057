"""Curating pages: merge two pages into one, split facts off a page onto a new one — and the
exact reverse of each, from what the change recorded.

These move rows and return what undoing needs (``undo``, plain JSON); they log nothing. The
logged, undoable actions every surface calls are ``memory.curation.merge_pages`` and
``split_page``: the change log lives a layer up.

- **Merge**: ``merged`` is ``keep``. Its facts are about ``keep`` now, its name, nicknames and
  entity id become ``keep``'s nicknames (so a fact naming it still links to ``keep``: links are
  derived from names, ``knowledge.pages``), and ``merged`` is deleted
  (``knowledge.actions.merge_subjects``). Rows of the apps above that point at ``merged`` (a
  finding, a rule, a study session…) are moved to ``keep`` first, read from the model's
  relations rather than named, since this layer may not import them; a move that breaks one
  of their rules refuses the whole merge. Undo puts ``merged`` back under its own id with its
  names, the facts that were only about it, its devices and those rows, and takes back from
  ``keep`` the nicknames it gained.
- **Split**: the chosen facts move from ``page`` to a new page of the chosen type and name.
  Undo moves them back and deletes the new page when nothing else is about it.

A page exists for a reader only through the facts they read, so neither action can show anyone
more than they read before: the facts keep their citations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from brain.errors import StateConflict
from brain.words import counted
from knowledge import actions as knowledge_actions
from knowledge.models import Fact, Subject

# Curation changes rows a surface has already found for the person (the page, fact or change
# they may change, read through the read rule there); what it reads to do so it reads whole.
_CURATING = "curating what the person was shown"

MAX_NAME = cast(int, Subject._meta.get_field("name").max_length)  # a CharField has one


class CannotReverse(StateConflict):
    """What a curating change did can no longer be reversed; the message says why."""


@dataclass(frozen=True, kw_only=True)
class PagesMerged(knowledge_actions.SubjectsMerged):
    """What ``merge_subjects`` did, said of pages (their facts "moved"), and what undoing it
    needs."""

    undo: dict

    verb = "moved"


@dataclass(frozen=True)
class PageSplit:
    page: Subject
    new: Subject
    facts: int
    undo: dict

    @property
    def message(self) -> str:
        facts = counted(self.facts, "fact")
        return f"Split {facts} off “{self.page.name}” onto a new page, “{self.new.name}”."


def _locked_page(pk: int) -> Subject | None:
    """Page ``pk`` locked until the transaction ends; None when it is gone."""
    return Subject.objects.as_system(_CURATING).select_for_update().filter(pk=pk).first()


# Merging -------------------------------------------------------------------------------------


def _rows_above(subject: Subject) -> list[tuple[models.ForeignObject, list[int]]]:
    """Rows of the apps above that point at ``subject`` by a foreign key, by field."""
    found: list[tuple[models.ForeignObject, list[int]]] = []
    for relation in Subject._meta.related_objects:
        field = relation.field
        if relation.many_to_many or field.model._meta.app_label == "knowledge":
            continue
        pks = list(
            field.model._base_manager.filter(**{field.name: subject}).values_list("pk", flat=True)
        )
        if pks:
            found.append((field, pks))
    return found


def merge_pages(*, keep: Subject, merged: Subject) -> PagesMerged:
    """``merged`` becomes part of ``keep`` (the module docstring). Raises
    ``knowledge.actions.CannotMerge`` (one page twice, two memories, or a row above that cannot
    follow)."""
    if keep.pk == merged.pk or keep.memory_id != merged.memory_id:
        knowledge_actions.merge_subjects(keep=keep, merged=merged)  # raises, saying why
    with transaction.atomic():
        keep = Subject.objects.as_system(_CURATING).select_for_update().get(pk=keep.pk)
        merged = Subject.objects.as_system(_CURATING).select_for_update().get(pk=merged.pk)
        links = Fact.subjects.through.objects
        facts = list(links.filter(subject=merged).values_list("fact_id", flat=True))
        both = set(links.filter(subject=keep, fact_id__in=facts).values_list("fact_id", flat=True))
        moved_above = []
        try:
            with transaction.atomic():
                for field, pks in _rows_above(merged):
                    field.model._default_manager.filter(pk__in=pks).update(**{field.name: keep})
                    moved_above.append([field.model._meta.label, field.name, pks])
        except IntegrityError:
            raise knowledge_actions.CannotMerge(
                f"“{merged.name}” has rows that cannot move to “{keep.name}” (findings, rules "
                "or judgements of the same kind on both): merge them from the admin's Subjects "
                "list, which settles those."
            ) from None
        undo = {
            "memory": keep.memory_id,
            "keep": {
                "pk": keep.pk,
                "aliases": list(keep.aliases),
                "entity_id": keep.entity_id,
                "room": keep.room_id,
            },
            "merged": {
                "pk": merged.pk,
                "kind": merged.kind,
                "name": merged.name,
                "entity_id": merged.entity_id,
                "room": merged.room_id,
                "aliases": list(merged.aliases),
                "present": merged.present,
                "removed_at": merged.removed_at.isoformat() if merged.removed_at else None,
                "created_at": merged.created_at.isoformat(),
            },
            "facts": facts,
            "facts_on_both": sorted(both),
            "devices": list(
                Subject.objects.as_system(_CURATING)
                .filter(room=merged)
                .exclude(pk=keep.pk)
                .values_list("pk", flat=True)
            ),
            "rows_above": moved_above,
        }
        done = knowledge_actions.merge_subjects(keep=keep, merged=merged)
    return PagesMerged(done.keep, done.merged_name, done.facts, done.nicknames, undo=undo)


def unmerge_pages(undo: dict) -> str:
    """Put back the page ``merge_pages`` merged away, as the change recorded it. Raises
    CannotReverse when the page it was merged into is gone or its name is taken since."""
    was, kept = undo["merged"], undo["keep"]
    with transaction.atomic():
        keep = _locked_page(kept["pk"])
        if keep is None:
            raise CannotReverse(
                f"“{was['name']}” was merged into a page that is gone since: there is nothing "
                "to take it back from."
            )
        if Subject.objects.as_system(_CURATING).filter(pk=was["pk"]).exists():
            raise CannotReverse(f"“{was['name']}” is back already.")
        gained = {name.casefold() for name in (was["name"], *was["aliases"], was["entity_id"])}
        keep.aliases = [a for a in keep.aliases if a not in gained or a in kept["aliases"]]
        keep.entity_id, keep.room_id = kept["entity_id"], kept["room"]
        try:
            with transaction.atomic():
                keep.save(update_fields=["aliases", "entity_id", "room"])
                merged = Subject.objects.create(
                    pk=was["pk"],
                    memory_id=undo["memory"],
                    kind=was["kind"],
                    name=was["name"],
                    entity_id=was["entity_id"],
                    room_id=was["room"]
                    if Subject.objects.as_system(_CURATING).filter(pk=was["room"]).exists()
                    else None,
                    aliases=was["aliases"],
                    present=was["present"],
                    removed_at=was["removed_at"],
                    created_at=was["created_at"],
                )
        except IntegrityError:
            raise CannotReverse(
                f"A page called “{was['name']}” (or with its entity id) was made since: rename "
                "it first."
            ) from None
        links = Fact.subjects.through.objects
        facts = (
            Fact.objects.as_system(_CURATING)
            .filter(pk__in=undo["facts"])
            .values_list("pk", flat=True)
        )
        links.bulk_create(
            [links.model(fact_id=pk, subject=merged) for pk in facts], ignore_conflicts=True
        )
        only_merged = set(undo["facts"]) - set(undo["facts_on_both"])
        links.filter(subject=keep, fact_id__in=only_merged).delete()
        Subject.objects.filter(pk__in=undo["devices"], room=keep).update(room=merged)
        for label, name, pks in undo["rows_above"]:
            apps.get_model(label)._default_manager.filter(pk__in=pks).update(**{name: merged})
        Fact.objects.filter(pk__in=undo["facts"]).update(
            subject_removed=models.Exists(
                links.filter(fact_id=models.OuterRef("pk"), subject__present=False)
            )
        )
    return f"“{merged.name}” is a page of its own again, with its facts."


# Splitting -----------------------------------------------------------------------------------


def split_page(*, page: Subject, facts: Sequence[Fact | int], name: str, kind: str) -> PageSplit:
    """Move ``facts`` (of ``page``) to a new page called ``name`` of type ``kind``. Raises
    ValidationError (no fact chosen, a fact not on the page, an empty or taken name, an unknown
    type)."""
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError("Name the new page.")
    if len(name) > MAX_NAME:
        raise ValidationError(f"A page's name is at most {MAX_NAME} characters.")
    if kind not in Subject.Kind.values:
        raise ValidationError(
            f"A page's type is one of {', '.join(Subject.Kind.values)}, not {kind!r}."
        )
    chosen = {fact if isinstance(fact, int) else fact.pk for fact in facts}
    if not chosen:
        raise ValidationError("Choose the facts that move to the new page.")
    links = Fact.subjects.through.objects
    with transaction.atomic():
        page = Subject.objects.as_system(_CURATING).select_for_update().get(pk=page.pk)
        on_page = set(
            links.filter(subject=page, fact_id__in=chosen).values_list("fact_id", flat=True)
        )
        if on_page != chosen:
            raise ValidationError(
                f"Fact #{min(chosen - on_page)} is not on “{page.name}”: choose among its facts."
            )
        taken = (
            Subject.objects.as_system(_CURATING)
            .for_memory(page.memory)
            .filter(kind=kind, name__iexact=name)
        )
        if taken.exists():
            raise ValidationError(
                f"There is already a {Subject.Kind(kind).label.lower()} page called “{name}”: "
                "move the facts by merging pages instead, or choose another name."
            )
        new = Subject.objects.create(memory=page.memory, kind=kind, name=name)
        links.filter(subject=page, fact_id__in=chosen).update(subject=new)
    undo = {"page": page.pk, "new": new.pk, "name": name, "facts": sorted(chosen)}
    return PageSplit(page, new, len(chosen), undo)


def unsplit_page(undo: dict) -> str:
    """Move the facts a split moved back to their page, and delete the new page when nothing
    else is about it. Raises CannotReverse when the page they came from is gone."""
    links = Fact.subjects.through.objects
    with transaction.atomic():
        page = _locked_page(undo["page"])
        if page is None:
            raise CannotReverse(
                f"The page the facts of “{undo['name']}” came from is gone since: nothing to "
                "move them back to."
            )
        new = _locked_page(undo["new"])
        back = undo["facts"]
        links.bulk_create(
            [
                links.model(fact_id=pk, subject=page)
                for pk in Fact.objects.as_system(_CURATING)
                .filter(pk__in=back)
                .values_list("pk", flat=True)
            ],
            ignore_conflicts=True,
        )
        if new is None:
            return f"The facts split onto “{undo['name']}” are on “{page.name}” again."
        links.filter(subject=new, fact_id__in=back).delete()
        if not links.filter(subject=new).exists() and not _rows_above(new):
            new.delete()
            return f"The facts split onto “{undo['name']}” are on “{page.name}” again."
        return (
            f"The facts split onto “{undo['name']}” are on “{page.name}” again; “{new.name}” "
            "stays, since other facts are about it now."
        )
