"""Everything brain has learned, as one portable JSON file, and folding such a file back in.

Import is a migration, not a sync: entries merge with existing ones winning (matched by their
uid), the document replaces only an effectively empty one unless asked, and importing the same
file twice changes nothing the second time. The whole file is checked before anything is
written; a bad file imports nothing.

Each app declares its sections (``brain.portable.Section``: ``key``, ``dump(memory, context)``,
``check(data)`` and ``load(memory, data, options)``, their entries DRF serializers); a lower app
never needs to know what a higher one keeps. What sections share (ImportRejected,
ImportOptions, ``Section`` and ``Entry``, which reads each key's checks from the model, and the
uid rules) is ``brain.portable``, which every app may import. This
module runs the sections it is given and holds the memory app's own: the change log, the
document and the inbox; ``SECTIONS`` lists the knowledge app's and this app's in load order
(what a bulk add imports through), and ``surfaces.portable`` adds the higher apps' for the whole
export.

A file keeps importing after brain changes: a section a file does not carry is skipped, and a
column it does not carry takes the model's default (``brain/tests/fixtures`` holds a file from
November 2026 that must import as it did then).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import serializers

from brain.db.retry import retry_transaction
from brain.portable import (
    Entry,
    ImportOptions,
    ImportRejected,
    Section,
    Uid,
    export_context,
    has_nul,
    placed,
    placements,
    required,
)
from knowledge import kinds, statements
from knowledge import portable as knowledge_portable
from knowledge.models import Fact, Memory
from memory import document, revisions, taught
from memory.composers.base import VOICE_MAX_BYTES
from memory.models import Change, DocumentRevision, InboxItem

FORMAT = "brain-export"
VERSION = 1
MAX_IMPORT_BYTES = 64 * 1024 * 1024

# Sections in load order: each names rows of the ones before.
type Sections = Sequence[Any]


def export_memory(memory: Memory, *, reader, sections: Sections) -> dict:
    """Everything in ``memory`` that ``reader`` may read (a person, a ``Reader``, or the read
    layer's ``SYSTEM``, which reads everything)."""
    data = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timezone.now().isoformat(),
        "memory": {
            "slug": memory.slug,
            "name": memory.name,
            "memory_max_kb": memory.memory_max_kb,
            "learning": memory.learning,
            "memory_injection": memory.memory_injection,
        },
    }
    context = export_context(reader)
    for section in sections:
        data[section.key] = section.dump(memory, context)
    return data


def export_json(memory: Memory, *, reader, sections: Sections) -> str:
    data = export_memory(memory, reader=reader, sections=sections)
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def parse(raw: bytes | str, *, sections: Sections) -> dict:
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRejected(
            f"The file is {len(raw):,} bytes; an export is at most {MAX_IMPORT_BYTES:,}."
        )
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ImportRejected(
            f"This is not a brain export: it is not valid JSON ({error})."
        ) from None
    return checked(data, sections=sections)


def checked(data, *, sections: Sections) -> dict:
    """``data`` (an export as Python objects) once every section has checked it, or
    ImportRejected naming what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ImportRejected(f'This is not a brain export: its "format" is not {FORMAT!r}.')
    if has_nul(data):
        raise ImportRejected(
            "The file contains a NUL character (\\u0000), which no text in brain may hold; "
            "nothing was imported."
        )
    if data.get("version") != VERSION:
        raise ImportRejected(
            f"This export is version {data.get('version')!r}; this brain reads version {VERSION}."
        )
    for section in sections:
        if section.key in data:
            section.check(data[section.key])
    return data


@retry_transaction
def import_memory(
    memory: Memory,
    data: dict,
    *,
    sections: Sections,
    replace_memory: bool = False,
    by=None,
    on_rows: Callable[[int], None] | None = None,
) -> list[str]:
    """Fold a parsed export into ``memory``; returns what happened, in the lines the sections
    reported (the facts store's sections log theirs instead). ``on_rows(n)`` is told each
    section's rows as it is loaded, for progress (``rows_in``)."""
    options = ImportOptions(replace_memory=replace_memory, by=by)
    with transaction.atomic():
        for section in sections:
            if section.key in data:
                section.load(memory, data[section.key], options)
                if on_rows:
                    on_rows(_rows(data[section.key]))
        _talk_set_aside(memory, data.get("facts"), options.report)
    return options.report


def _talk_set_aside(memory: Memory, facts, report: list[str]) -> None:
    """Talk an export kept as facts (a greeting, thanks, small talk, learned before the gate
    knew talk from facts) is imported as it was written but not believed: forgotten, saying
    what it was. An import is a migration; what it brings is still held to what is a fact."""
    talk: dict[str, str] = {}
    for entry in facts or ():
        text = entry.get("text") if isinstance(entry, dict) else None
        if isinstance(text, str) and (what := kinds.small_talk(text)):
            talk[statements.normalise(text)] = what
    if not talk:
        return
    brought = (
        Fact.objects.as_system("the facts an import brought, checked for talk")
        .for_memory(memory)
        .live()
        .filter(normalized__in=list(talk))
    )
    set_aside = 0
    for what in sorted(set(talk.values())):
        set_aside += brought.filter(
            normalized__in=[norm for norm, kind in talk.items() if kind == what]
        ).update(
            status=Fact.Status.FORGOTTEN,
            forgotten_at=timezone.now(),
            forgotten_reason=f"{what}, not a fact",
        )
    if set_aside:
        report.append(
            f"Facts: {set_aside:,} were talk, not facts (a greeting, thanks or small talk): "
            "kept as they were written, not believed."
        )


def rows_in(data: dict, *, sections: Sections) -> int:
    """How many rows an import of ``data`` loads: its progress's total."""
    return sum(_rows(data[section.key]) for section in sections if section.key in data)


def _rows(value) -> int:
    return len(value) if isinstance(value, list) else 1


# The memory app's sections --------------------------------------------------------------------


DOCUMENT_TEXT = '"document" must be an object with the document\'s "text".'
VOICE_TEXT = 'The document\'s "voice" must be text.'


class DocumentEntry(Entry):
    class Meta(Entry.Meta):
        model = DocumentRevision
        fields = ("text", "voice", "generation")
        extra_kwargs = {
            "text": {
                "required": True,
                "allow_blank": True,
                "error_messages": dict.fromkeys(("required", "invalid", "null"), DOCUMENT_TEXT),
            },
            "voice": {"error_messages": dict.fromkeys(("invalid", "null"), VOICE_TEXT)},
            "generation": {"read_only": True},
        }

    def validate_voice(self, voice: str) -> str:
        size = document.size_bytes(voice)
        if size > VOICE_MAX_BYTES:
            raise serializers.ValidationError(
                f"The document's voice distillate is {size:,} bytes; the limit is "
                f"{VOICE_MAX_BYTES:,}."
            )
        return voice


class DocumentSection(Section[Memory]):
    key = "document"
    entries = DocumentEntry
    many = False
    not_an_object = DOCUMENT_TEXT

    def rows(self, memory: Memory, reader: Any) -> DocumentRevision:
        return DocumentRevision.objects.current(memory)

    def load(self, memory: Memory, data: dict, options: ImportOptions) -> None:
        text = data["text"]
        current = revisions.lock_document(memory)  # a pass filing now commits before, or after
        if text == current.text or document.is_effectively_empty(text):
            options.report.append("Document: unchanged.")
            return
        if not document.is_effectively_empty(current.text) and not options.replace_memory:
            options.report.append(
                "Document: kept yours (it is not empty); pass "
                "--replace-memory to replace it with the imported one."
            )
            return
        revisions.check_fits(memory, text)
        revisions.write_document(
            memory=memory,
            expected_generation=current.generation,
            text=text,
            voice=data.get("voice") or None,  # none in the file: distil one from the text
            kind=DocumentRevision.Kind.IMPORT,
            by=options.by,
            summary="Imported the memory document from an export",
        )
        options.report.append("Document: imported.")


class InboxEntry(Entry):
    fact = Uid(source="fact.uid", allow_null=True, required=False)

    class Meta(Entry.Meta):
        model = InboxItem
        fields = (
            "uid",
            "text",
            "action",
            "origin",
            "confidence",
            "taught_by_name",
            "created_at",
            "state",
            "outcome",
            "valence",
            "fact",
        )
        keys = {"taught_by_name": "taught_by"}
        extra_kwargs = {
            "text": {"max_length": taught.MAX_ITEM_CHARS},
            **required("confidence", "created_at", "state"),
        }


class InboxSection(Section[Memory]):
    key = "inbox"
    entries = InboxEntry
    related = ("fact",)

    def rows(self, memory: Memory, reader: Any):
        return super().rows(memory, reader).in_filing_order()

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        fresh = placed(InboxItem, memory, data)
        facts = self._facts_here(memory, [entry for entry, _ in fresh])
        new = [
            InboxItem(
                uid=uid,
                memory=memory,
                fact_id=facts.pop(entry["fact"], None) if entry.get("fact") is not None else None,
                **self.values(entry),
            )
            for entry, uid in fresh
        ]
        InboxItem.objects.bulk_create(new)
        self.summary(options, "Inbox", len(new), len(data))

    @staticmethod
    def _facts_here(memory: Memory, entries: list[dict]) -> dict[str, int]:
        """The fact row in ``memory`` each entry's "fact" uid names, by that uid, leaving out
        facts another candidate already holds (a fact has at most one). A uid this memory has no
        fact for (a file without facts) links nothing: the candidate still files its line.

        The facts section loads before this one, so the file's facts are here by now.
        """
        wanted = {uuid.UUID(e["fact"]): e["fact"] for e in entries if e.get("fact") is not None}
        here = {
            uid_here: wanted[uid]
            for uid, (uid_here, present) in placements(Fact, memory, wanted).items()
            if present
        }
        rows = (
            Fact.objects.as_system("an import finds the facts it names")
            .filter(memory=memory, uid__in=here)
            .exclude(inbox_item__isnull=False)
        )
        return {here[uid]: pk for uid, pk in rows.values_list("uid", "pk")}


class ChangeEntry(Entry):
    class Meta(Entry.Meta):
        model = Change
        fields = ("uid", "number", "source", "summary", "operations", "author_name", "created_at")
        keys = {"author_name": "author"}
        extra_kwargs = required("operations", "created_at")

    def validate_operations(self, operations: Any) -> Any:
        if not isinstance(operations, list):
            raise serializers.ValidationError('has invalid "operations" (a list).')
        for op in operations:
            if not (
                isinstance(op, dict)
                and op.get("op") in {"add", "remove"}
                and isinstance(op.get("line"), str)
            ):
                raise serializers.ValidationError("has an invalid operation.")
        return operations


class ChangeLogSection(Section[Memory]):
    key = "changes"
    entries = ChangeEntry
    ordering = ("number",)

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        fresh = sorted(placed(Change, memory, data), key=lambda placed: placed[0]["number"])
        # Imported history is appended after this log's own changes, in its original order.
        Memory.objects.select_for_update(no_key=True).filter(pk=memory.pk).first()
        start = (
            Change.objects.for_memory(memory)
            .order_by("-number")
            .values_list("number", flat=True)
            .first()
            or 0
        ) + 1
        Change.objects.bulk_create(
            [
                Change(uid=uid, memory=memory, **{**self.values(entry), "number": start + offset})
                for offset, (entry, uid) in enumerate(fresh)
            ]
        )
        self.summary(options, "Change log", len(fresh), len(data))


document_section = DocumentSection()
inbox_section = InboxSection()
change_log_section = ChangeLogSection()


# What the knowledge app and this one keep, in load order: subjects before facts (a fact names
# its subjects), facts and episodes before observations and conflicts (which name them), and all
# before this app's (an inbox entry links to its fact by uid; importing the document makes the
# facts follow it, so they must be there).
SECTIONS: tuple[Any, ...] = (
    knowledge_portable.subjects_section,
    knowledge_portable.labels_section,
    knowledge_portable.facts_section,
    knowledge_portable.passages_section,
    knowledge_portable.episodes_section,
    knowledge_portable.observations_section,
    knowledge_portable.conflicts_section,
    knowledge_portable.procedures_section,
    knowledge_portable.core_section,
    knowledge_portable.grants_section,
    change_log_section,
    document_section,
    inbox_section,
)
