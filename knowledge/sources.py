"""Adding a note, a document or an email: the one action behind the Sources tab's form,
``POST /api/sources/`` and ``brain sources add FILE``.

What it takes: pasted text (a note), or a file — ``.txt`` and ``.md`` as UTF-8 text, ``.pdf``
through pypdf (its text layer, page by page), ``.eml`` through the standard library's ``email``
package (the plain-text body, else the HTML body with its tags taken out; attachments are not
read). The source is kept whole and cut into passages (``knowledge.passages.cut``: by
paragraph, and by sentence where a paragraph names two subjects), each labelled with the labels
chosen for the source, else the memory's default labels; then the labeller looks at the new
passages (``knowledge.labeller``), and compiling them into facts on pages is asked for on a
worker (``knowledge.compile_requests``; not while learning is off).

A new version of a source (``previous``) is a new row: a passage whose text was in the previous
version keeps that passage's labels, and only new text is labelled.

Bad input is a ValidationError naming the problem, never a half-written source: nothing to add
(empty text, an empty file, a file of only spaces), a file over MAX_UPLOAD_BYTES (the limit is
named), a text that cuts into more than MAX_PASSAGES passages (the limit is named, with how
many it would be; it is counted before anything is written), a file that is not text (binary
bytes in a .txt or .md, an unknown extension), a PDF with no text layer (a scan: nothing to
read), a PDF that cannot be opened, an email with attachments only, and a label the memory does
not have.

MAX_UPLOAD_BYTES: 50 MB. A long book is a few MB of text; a PDF with pictures is larger, but
only its text is kept, and pypdf reads a 50 MB file in seconds — larger uploads are scans or
archives that hold nothing brain can read.

MAX_PASSAGES: 2,000 passages a source (about 400 KB of prose). What a source costs grows with
its passages, not its bytes: each is looked at for the subjects it names, labelled, and then
compiled on a worker (a model call's worth of passages at a time). 1.2 MB of blank-line-separated
"line" was 200,000 passages: 104 s to cut before anything was written, and a worker's whole time
limit to compile. 2,000 are cut, written and labelled in about 3 s, so the upload answers while
the person waits, and compile in turns on the compile queue (memory/compiling.py). A longer text
is refused before anything is written, saying so: it goes in as several sources. Counting is
two steps: the paragraphs alone first (no subject lookups: 200,000 of them counted in well under
a second), then the passages as cut.
"""

from __future__ import annotations

import email
import email.policy
import html
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from brain import inputs
from brain.words import counted
from knowledge import compile_requests, label_names, labeller, labelling_rules, passages
from knowledge.models import Label, Memory, Passage, Source, name_of

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
MAX_PASSAGES = 2_000
MAX_TITLE_CHARS = 300
EXTENSIONS = {".txt": "text", ".md": "text", ".pdf": "pdf", ".eml": "email"}
_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Upload:
    """A file as it arrived: its name and its bytes."""

    name: str
    content: bytes


@dataclass(frozen=True)
class SourceAdded:
    source: Source
    passages: list[Passage]
    kept: int = 0  # passages of a new version that kept the previous version's labels
    asked: bool = False  # the labeller filed a Review item about this source
    labels: tuple[str, ...] = field(default_factory=tuple)
    compiling: bool | None = None  # a compile was asked for (None: not a kind that compiles)

    @property
    def message(self) -> str:
        count = len(self.passages)
        cut = f"cut into {counted(count, 'passage')}"
        labelled = f", labelled {', '.join(self.labels)}" if self.labels else ""
        version = ""
        if self.source.previous is not None:
            version = f"; a new version of “{self.source.previous.title}” ({self.kept} unchanged"
            version += " passage kept its labels)" if self.kept == 1 else " passages kept theirs)"
        asked = " Brain was unsure about some of it: see Review." if self.asked else ""
        compiled = ""  # while it compiles, the source view shows how far it has got
        if self.compiling is False:
            compiled = " Learning is switched off: it is not compiled into facts until it is on."
        return f"Added “{self.source.title}”, {cut}{labelled}{version}.{asked}{compiled}"


def _size(count: int) -> str:
    return f"{count / (1024 * 1024):.1f} MB"


def read_upload(upload: Upload) -> tuple[str, str]:
    """The text of ``upload`` and the kind of source it makes. Raises ValidationError."""
    name = PurePath(upload.name or "").name
    extension = PurePath(name.lower()).suffix
    if extension not in EXTENSIONS:
        raise ValidationError(
            f"“{name or 'The file'}” is not a kind of file brain reads: add a .txt, .md, .pdf "
            "or .eml file, or paste the text."
        )
    if len(upload.content) > MAX_UPLOAD_BYTES:
        raise ValidationError(
            f"“{name}” is {_size(len(upload.content))}; the limit is "
            f"{MAX_UPLOAD_BYTES // (1024 * 1024)} MB."
        )
    if not upload.content:
        raise ValidationError(f"“{name}” is empty: there is nothing to add.")
    reader = EXTENSIONS[extension]
    if reader == "pdf":
        return _pdf_text(name, upload.content), Source.Kind.DOCUMENT
    if reader == "email":
        return _email_text(name, upload.content), Source.Kind.EMAIL
    return _plain_text(name, upload.content), Source.Kind.DOCUMENT


def _plain_text(name: str, content: bytes) -> str:
    if b"\x00" in content:
        raise ValidationError(f"“{name}” is not text (it holds binary bytes): nothing was added.")
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationError(
            f"“{name}” is not UTF-8 text: save it as UTF-8 (or paste its text) and add it again."
        ) from None


def _pdf_text(name: str, content: bytes) -> str:
    import pypdf  # only a PDF upload pays for loading it
    from pypdf.errors import PdfReadError

    try:
        document = pypdf.PdfReader(io.BytesIO(content))
        pages = [page.extract_text() or "" for page in document.pages]
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as error:
        raise ValidationError(
            f"“{name}” could not be read as a PDF ({type(error).__name__}): nothing was added."
        ) from None
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not text.strip():
        raise ValidationError(
            f"“{name}” has no text to read: it may be a scan. Add a PDF with a text layer, or "
            "paste its text."
        )
    return text


def _email_text(name: str, content: bytes) -> str:
    message = email.message_from_bytes(content, policy=email.policy.default)
    body = message.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        text = body.get_content()
        if body.get_content_type() == "text/html":
            text = html.unescape(_TAGS.sub(" ", text))
    if not text.strip():
        attached = [part.get_filename() for part in message.iter_attachments()]
        if attached:
            names = ", ".join(f"“{n}”" for n in attached if n) or "attachments"
            raise ValidationError(
                f"“{name}” holds only attachments ({names}) and no text: add the attachment "
                "itself, or paste the email's text."
            )
        raise ValidationError(f"“{name}” has no text in it: there is nothing to add.")
    subject = str(message.get("subject", "") or "").strip()
    sender = str(message.get("from", "") or "").strip()
    heading = "\n".join(f"{k}: {v}" for k, v in (("From", sender), ("Subject", subject)) if v)
    return f"{heading}\n\n{text.strip()}" if heading else text.strip()


def _labels(memory: Memory, names: Sequence[Label | str]) -> list[Label]:
    found: list[Label] = []
    for name in names:
        if isinstance(name, Label):
            label = name if name.memory_id == memory.pk else None
            shown = name.name
        else:
            shown = str(name).strip()
            key = label_names.key(shown)
            label = next((x for x in memory.labels.all() if label_names.key(x.name) == key), None)
        if label is None:
            have = ", ".join(Label.objects.filter(memory=memory).values_list("name", flat=True))
            raise ValidationError(
                f"{memory.name} has no label “{shown}”"
                + (f": use one of {have}." if have else ": add labels in the admin first.")
            )
        if label not in found:
            found.append(label)
    return found


def add_source(
    *,
    memory: Memory,
    by=None,
    text: str | None = None,
    upload: Upload | None = None,
    title: str = "",
    labels: Sequence[Label | str] = (),
    previous: Source | None = None,
) -> SourceAdded:
    """Keep a note (``text``) or a file (``upload``) as a source of ``memory``, cut into
    labelled passages (see the module docstring). Raises ValidationError."""
    if (text is None) == (upload is None):
        raise ValidationError("Paste a note or choose a file to add (one of them).")
    if upload is not None:
        body, kind = read_upload(upload)
        title = title.strip() or PurePath(upload.name).name
    else:
        body, kind = text or "", Source.Kind.NOTE
    body = inputs.clean_text("text", body.replace("\x00", "")).strip()
    if not body:
        raise ValidationError("There is nothing to add: the note is empty.")
    if previous is not None and previous.memory_id != memory.pk:
        raise ValidationError("A new version must be of a source of the same memory.")
    chosen = _labels(memory, labels)
    title = inputs.clean_text("title", title).strip() or _untitled(by)
    if len(title) > MAX_TITLE_CHARS:
        raise ValidationError(f"A title may be at most {MAX_TITLE_CHARS} characters.")
    _within_passages(passages.cut(body), title)  # paragraphs alone: fast, before any lookup
    pieces = passages.cut(body, memory)
    _within_passages(pieces, title)
    with transaction.atomic():
        source = Source.objects.create(
            memory=memory,
            kind=kind,
            title=title,
            text=body,
            added_by=by,
            previous=previous,
        )
        # A person's labels and those of the labelling rules it matches, set alike.
        chosen += [label for label in labelling_rules.labels_for(source) if label not in chosen]
        if chosen:
            source.labels.set(chosen)
        # No label yet: administrators only, until the labeller has placed each passage.
        made, kept = _passages(source, pieces, previous)
    decisions = labeller.decide(source, [p for p in made if p.pk not in kept])  # may ask a model
    asked = labeller.apply(source, decisions)
    shown = tuple(label.name for label in passages.labels_for(source))
    run = compile_requests.request_compile(source, by=by)  # on a worker, once this is committed
    return SourceAdded(source, made, len(kept), asked, shown, compiling=run is not None)


def _within_passages(pieces: list[str], title: str) -> None:
    if len(pieces) > MAX_PASSAGES:
        raise ValidationError(
            f"“{title}” cuts into {len(pieces):,} passages; a source may hold at most "
            f"{MAX_PASSAGES:,} (about 400 KB of prose). Add it as several smaller sources: "
            "nothing was added."
        )


def _untitled(by) -> str:
    """A note's title when none is given: who and when, never its words (a title is shown to
    everyone the source is listed for, and its first passage may be one they may not read)."""
    when = timezone.localtime().strftime("%-d %b %Y, %H:%M")
    return f"Note by {name_of(by)}, {when}" if by is not None else f"Note, {when}"


def _passages(
    source: Source, pieces: list[str], previous: Source | None
) -> tuple[list[Passage], set[int]]:
    """The new source's passages; those whose text the previous version had keep its labels.
    Returns them and the ids of those that kept their labels."""
    made = passages.add(source, pieces, labels=[])
    if previous is None:
        return made, set()
    earlier: dict[str, Passage] = {}
    kept_before = previous.passages.as_system("a new version keeps its unchanged passages' labels")
    for passage in kept_before.prefetch_related("labels").order_by("ordinal"):
        earlier.setdefault(passage.text_hash, passage)
    kept: set[int] = set()
    by_labels: dict[tuple, list[Passage]] = {}
    for passage in made:
        before = earlier.get(passage.text_hash)
        if before is not None:
            own = tuple(sorted(label.pk for label in before.labels.all()))
            by_labels.setdefault((own, before.unsure, before.decided), []).append(passage)
            kept.add(passage.pk)
    for (label_ids, unsure, decided), group in by_labels.items():
        passages.set_labels(group, Label.objects.filter(pk__in=label_ids))
        Passage.objects.filter(pk__in=[p.pk for p in group]).update(unsure=unsure, decided=decided)
    return made, kept
