"""Everything brain has learned, as one portable JSON file, and folding such a file back in.

Import is a migration, not a sync: entries merge with existing ones winning (matched by their
uid), the document replaces only an effectively empty one unless asked, and importing the same
file twice changes nothing the second time. The whole file is checked before anything is
written; a bad file imports nothing.

Each app contributes sections through ``settings.BRAIN_EXPORT_SECTIONS`` (dotted paths to
objects with ``key``, ``dump(memory)``, ``check(data)`` and ``load(memory, data, options)``), so
a lower app never needs to know what a higher one keeps. What sections share (ImportRejected,
ImportOptions, the checks and the uid rules) is ``brain.portable``, which every app may import;
this module runs the sections and holds the memory app's own.
"""

from __future__ import annotations

import json
import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from brain.db.retry import retry_transaction
from brain.portable import (
    ImportOptions,
    ImportRejected,
    check_entries,
    has_nul,
    is_uuid,
    placed,
    placements,
    require,
    when,
)
from knowledge.models import Fact, Memory
from memory import actions, document, revisions
from memory.composers.base import VOICE_MAX_BYTES
from memory.models import Change, Confidence, DocumentRevision, InboxItem, Origin

FORMAT = "brain-export"
VERSION = 1
MAX_IMPORT_BYTES = 64 * 1024 * 1024


def sections() -> list:
    return [import_string(path) for path in settings.BRAIN_EXPORT_SECTIONS]


def export_memory(memory: Memory) -> dict:
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
    for section in sections():
        data[section.key] = section.dump(memory)
    return data


def export_json(memory: Memory) -> str:
    return json.dumps(export_memory(memory), ensure_ascii=False, indent=2) + "\n"


def parse(raw: bytes | str) -> dict:
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
    for section in sections():
        if section.key in data:
            section.check(data[section.key])
    return data


@retry_transaction
def import_memory(
    memory: Memory, data: dict, *, replace_memory: bool = False, by=None
) -> list[str]:
    """Fold a parsed export into ``memory``; returns what happened, in the lines the sections
    reported (the facts store's sections log theirs instead)."""
    options = ImportOptions(replace_memory=replace_memory, by=by)
    with transaction.atomic():
        for section in sections():
            if section.key in data:
                section.load(memory, data[section.key], options)
    return options.report


# The memory app's sections --------------------------------------------------------------------


class DocumentSection:
    key = "document"

    def dump(self, memory: Memory) -> dict:
        current = DocumentRevision.objects.current(memory)
        return {"text": current.text, "voice": current.voice, "generation": current.generation}

    def check(self, data) -> None:
        require(
            isinstance(data, dict) and isinstance(data.get("text"), str),
            '"document" must be an object with the document\'s "text".',
        )
        voice = data.get("voice", "")
        require(isinstance(voice, str), 'The document\'s "voice" must be text.')
        size = document.size_bytes(voice)
        require(
            size <= VOICE_MAX_BYTES,
            f"The document's voice distillate is {size:,} bytes; the limit is {VOICE_MAX_BYTES:,}.",
        )

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


class InboxSection:
    key = "inbox"
    fields = {
        "uid": str,
        "text": str,
        "origin": str,
        "confidence": str,
        "created_at": str,
        "state": str,
    }

    def dump(self, memory: Memory) -> list[dict]:
        return [
            {
                "uid": str(item.uid),
                "text": item.text,
                "action": item.action,
                "origin": item.origin,
                "confidence": item.confidence,
                "taught_by": item.taught_by_name,
                "created_at": item.created_at.isoformat(),
                "state": item.state,
                "fact": str(item.fact.uid) if item.fact_id else None,
            }
            for item in InboxItem.objects.for_memory(memory)
            .in_filing_order()
            .select_related("fact")
        ]

    def check(self, data) -> None:
        check_entries(data, "inbox", self.fields, person="taught_by")
        for number, entry in enumerate(data, start=1):
            require(
                entry["origin"] in Origin.values,
                f"inbox entry {number} has an unknown origin {entry['origin']!r}.",
            )
            require(
                entry["confidence"] in Confidence.values,
                f"inbox entry {number} has an unknown confidence.",
            )
            require(
                entry["state"] in InboxItem.State.values,
                f"inbox entry {number} has an unknown state.",
            )
            require(
                entry.get("action", "add") in InboxItem.Action.values,
                f"inbox entry {number} has an unknown action.",
            )
            require(
                0 < len(entry["text"].strip()) <= actions.MAX_ITEM_CHARS,
                f"inbox entry {number} is empty or longer than "
                f"{actions.MAX_ITEM_CHARS:,} characters.",
            )
            require(
                entry.get("fact") is None or is_uuid(entry["fact"]),
                f'inbox entry {number} has an invalid "fact" (the uid of its fact, or null).',
            )

    def load(self, memory: Memory, data: list[dict], options: ImportOptions) -> None:
        fresh = placed(InboxItem, memory, data)
        facts = self._facts_here(memory, [entry for entry, _ in fresh])
        new = [
            InboxItem(
                uid=uid,
                memory=memory,
                text=entry["text"],
                action=entry.get("action", "add"),
                origin=entry["origin"],
                confidence=entry["confidence"],
                taught_by_name=entry.get("taught_by", ""),
                created_at=when(entry["created_at"]),
                state=entry["state"],
                fact_id=facts.pop(entry.get("fact"), None),
            )
            for entry, uid in fresh
        ]
        InboxItem.objects.bulk_create(new)
        options.report.append(f"Inbox: {len(new)} added, {len(data) - len(new)} already here.")

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
        rows = Fact.objects.filter(memory=memory, uid__in=here).exclude(inbox_item__isnull=False)
        return {here[uid]: pk for uid, pk in rows.values_list("uid", "pk")}


class ChangeLogSection:
    key = "changes"
    fields = {
        "uid": str,
        "number": int,
        "summary": str,
        "operations": list,
        "created_at": str,
        "source": str,
    }

    def dump(self, memory: Memory) -> list[dict]:
        return [
            {
                "uid": str(change.uid),
                "number": change.number,
                "source": change.source,
                "summary": change.summary,
                "operations": change.operations,
                "author": change.author_name,
                "created_at": change.created_at.isoformat(),
            }
            for change in Change.objects.for_memory(memory).order_by("number")
        ]

    def check(self, data) -> None:
        check_entries(data, "changes", self.fields, person="author")
        for number, entry in enumerate(data, start=1):
            require(
                entry["source"] in Change.Source.values,
                f"changes entry {number} has an unknown source.",
            )
            for op in entry["operations"]:
                require(
                    isinstance(op, dict)
                    and op.get("op") in {"add", "remove"}
                    and isinstance(op.get("line"), str),
                    f"changes entry {number} has an invalid operation.",
                )

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
                Change(
                    uid=uid,
                    memory=memory,
                    number=start + offset,
                    source=entry["source"],
                    summary=entry["summary"],
                    operations=entry["operations"],
                    author_name=entry.get("author", ""),
                    created_at=when(entry["created_at"]),
                )
                for offset, (entry, uid) in enumerate(fresh)
            ]
        )
        options.report.append(
            f"Change log: {len(fresh)} added, {len(data) - len(fresh)} already here."
        )


document_section = DocumentSection()
inbox_section = InboxSection()
change_log_section = ChangeLogSection()
