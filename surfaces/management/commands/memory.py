"""`brain memory …`: the memory document from the terminal, as the seed's commands are written.

A verb imports what it uses when it runs: the actions behind teaching (the gate, the embedder,
Celery) are most of a second to import, which `brain memory list` need not pay.

Every refusal is one line on stderr and a non-zero exit; nothing is half-written.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from datetime import date
from functools import partial
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from brain.cli import GroupCommand
from brain.errors import in_words
from brain.portable import ImportRejected
from brain.progress import Progress
from knowledge import access
from knowledge.models import Conflict, Fact, Permission
from knowledge.read_layer import reader_for
from memory.models import (
    Change,
    Confidence,
    ConsolidationRun,
    DocumentRevision,
    InboxItem,
    Origin,
)
from review import cli as guesses_cli

# What each verb needs (knowledge/access.py), checked before it runs.
NEEDS = {
    "list": Permission.READ,
    "inbox": Permission.READ,
    "conflicts": Permission.READ,
    "log": Permission.READ,
    "add": Permission.TEACH,
    "forget": Permission.CURATE,
    "settle": Permission.CURATE,
    "consolidate": Permission.CURATE,
    "undo": Permission.CURATE,
    "edit": Permission.CURATE,
    "clear": Permission.CURATE,
    "export": Permission.CURATE,
    "import": Permission.ADMINISTER,
}


# Verbs other apps keep (guesses live in review): modules with ``VERBS``,
# ``add_parsers(verbs)`` and ``run(command, verb, **options)``.
OTHER_VERBS = (guesses_cli,)


class Command(GroupCommand):
    help = "Read and change what brain has learned: the memory document, its inbox and log."
    refusals = (*GroupCommand.refusals, ImportRejected)

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        verbs.add_parser("list", help="what it knows: the memory document")
        add = verbs.add_parser("add", help="queue a fact yourself")
        add.add_argument("text")
        add.add_argument("--confidence", choices=Confidence.values, default=Confidence.MEDIUM)
        verbs.add_parser("inbox", help="facts waiting to be filed")
        for verbs_of_app in OTHER_VERBS:  # hypotheses, confirm, reject (review)
            verbs_of_app.add_parsers(verbs)
        verbs.add_parser("conflicts", help="statements that may not both be true, to settle")
        settle = verbs.add_parser(
            "settle",
            help="settle conflict N: keep new, old, both, dated (--since) or merged (--text)",
        )
        settle.add_argument("number", type=int)
        settle.add_argument("keep", choices=Conflict.Resolution.values)
        settle.add_argument("--text", help="merged: the statement written in place of both")
        settle.add_argument(
            "--since",
            type=date.fromisoformat,
            help="dated: the day (YYYY-MM-DD) the old one stopped and the new one began",
        )
        consolidate = verbs.add_parser("consolidate", help="run a consolidation pass now")
        consolidate.add_argument(
            "--background",
            action="store_true",
            help="hand the pass to the worker instead of running it here",
        )
        log = verbs.add_parser("log", help="what changed recently, and why")
        log.add_argument("--limit", type=int, default=20)
        undo = verbs.add_parser("undo", help="revert change N from the log")
        undo.add_argument("number", type=int)
        forget = verbs.add_parser("forget", help="queue a line for removal")
        forget.add_argument("text")
        verbs.add_parser("edit", help="open the document in $EDITOR and save it as your edit")
        clear = verbs.add_parser("clear", help="reset (the old document is kept as a revision)")
        clear.add_argument("--confirm", action="store_true")
        export = verbs.add_parser("export", help="everything learned, as one portable file")
        export.add_argument("file", nargs="?", help="where to write it (default: stdout)")
        load = verbs.add_parser("import", help="fold an export back in")
        load.add_argument("file")
        load.add_argument(
            "--replace-memory",
            action="store_true",
            help="replace a non-empty document with the imported one",
        )

    def handle(self, *args, verb: str, memory: str, person: str, **options) -> None:
        self.memory = self.chosen_memory(memory)
        self.person = self.chosen_person(person)
        handler, needs = self._handler(verb)
        access.require(self.person, self.memory, needs)
        handler(**options)

    def _handler(self, verb: str):
        """The method for ``verb`` and what it needs: this app's own, or another's."""
        if verb in NEEDS:
            return getattr(self, f"do_{verb}"), NEEDS[verb]
        for verbs_of_app in OTHER_VERBS:
            if verb in verbs_of_app.VERBS:
                return partial(verbs_of_app.run, self, verb), verbs_of_app.VERBS[verb]
        raise CommandError(f"Unknown command {verb!r}.")

    def do_list(self, **_) -> None:
        self.stdout.write(DocumentRevision.objects.current(self.memory).text, ending="")

    def do_add(self, *, text: str, confidence: str, **_) -> None:
        loading = _load_the_embedder_meanwhile()
        from memory import actions
        from memory.taught import Statement

        try:
            learned = actions.learn(
                Statement.typed(
                    memory=self.memory,
                    text=text,
                    origin=Origin.TERMINAL,
                    confidence=confidence,
                    by=self.person,
                )
            )
        except Exception:
            # Refused before the model was needed: the process must not end while the model
            # loads on its thread (onnxruntime aborts the process: "terminate called …").
            if loading is not None:
                loading.join(timeout=60)
            raise
        self.stdout.write(learned.message)

    def do_forget(self, *, text: str, **_) -> None:
        from memory import actions

        forgotten = actions.forget_line(
            memory=self.memory, text=text, origin=Origin.TERMINAL, by=self.person
        )
        self.stdout.write(forgotten.message)

    def do_inbox(self, **_) -> None:
        reader = reader_for(self.person)
        waiting = InboxItem.objects.for_memory(self.memory).pending().readable_by(reader)
        items = waiting.in_filing_order()
        if not items:
            self.stdout.write("Nothing is waiting to be filed.")
            return
        for item in items:
            when = timezone.localtime(item.created_at).strftime("%Y-%m-%d %H:%M")
            about = ", ".join(filter(None, [item.label, item.confidence, item.outcome_label]))
            self.stdout.write(f"#{item.pk}  {when}  {item.text}  ({about})")
        self.stdout.write(f"{len(items)} waiting to be filed.")

    def do_conflicts(self, **_) -> None:
        reader = reader_for(self.person)
        conflicts = Conflict.objects.for_memory(self.memory).readable_by(reader).to_settle()
        if not conflicts:
            self.stdout.write("Nothing to settle.")
            return
        for conflict in conflicts:
            self.stdout.write(
                f"#{conflict.pk}  {conflict.reason}\n"
                f"    old: {conflict.old.text}  ({_taught(conflict.old)})\n"
                f"    new: {conflict.new.text}  ({_taught(conflict.new)})"
            )
        self.stdout.write(
            f"{len(conflicts)} to settle: brain memory settle N new|old|both keeps one or both, "
            "dated --since DAY keeps both with their dates, merged --text WORDS writes one in "
            "place of both."
        )

    def do_settle(self, *, number: int, keep: str, text=None, since=None, **_) -> None:
        from memory import actions

        readable = Conflict.objects.for_memory(self.memory).readable_by(reader_for(self.person))
        conflict = readable.filter(pk=number).first()
        if conflict is None:
            raise CommandError(f"There is no conflict #{number} in {self.memory.name}.")
        settled = actions.settle_conflict(
            conflict=conflict, keep=keep, text=text, since=since, by=self.person
        )
        self.stdout.write(settled.message)

    def do_consolidate(self, *, background: bool, verbosity: int = 1, **_) -> None:
        from memory import consolidator

        request = consolidator.request_consolidation(
            memory=self.memory,
            trigger=ConsolidationRun.Trigger.CLI,
            by=self.person,
            send=background,
        )
        if not request.started:
            raise CommandError(
                f"{request.message} (pass #{request.run.pk}, "
                f"{request.run.elapsed_seconds:.0f} s so far)"
            )
        if background:
            self.stdout.write(f"Pass #{request.run.pk} handed to the worker.")
            return
        if verbosity < 2:
            # The outcome is the one line printed below. The pass's log (each model call, a
            # failure's traceback) is for the worker's log; -v 2 shows it here too.
            logging.disable(logging.CRITICAL)
        try:
            consolidator.execute(request.run.pk)
        finally:
            logging.disable(logging.NOTSET)
        run = ConsolidationRun.objects.get(pk=request.run.pk)
        if run.state != ConsolidationRun.State.FILED:
            raise CommandError(run.outcome)
        self.stdout.write(run.outcome)

    def do_log(self, *, limit: int, **_) -> None:
        if limit < 1:
            raise CommandError("--limit must be 1 or more.")
        changes = Change.objects.for_memory(self.memory).newest_first()[:limit]
        if not changes:
            self.stdout.write("Nothing has changed yet.")
            return
        for change in changes:
            when = timezone.localtime(change.created_at).strftime("%Y-%m-%d %H:%M")
            by = f" — {change.author_name}" if change.author_name else ""
            undone = " (undone)" if change.undone_by_id else ""
            self.stdout.write(f"#{change.number}  {when}  {change.summary}{by}{undone}")

    def do_undo(self, *, number: int, **_) -> None:
        from memory import revisions

        undo = revisions.undo_change(memory=self.memory, number=number, by=self.person)
        self.stdout.write(f"#{undo.number}  {undo.summary}")

    def do_edit(self, **_) -> None:
        from memory import revisions

        current = DocumentRevision.objects.current(self.memory)
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        with tempfile.NamedTemporaryFile("w", suffix=".md", prefix="memory-", delete=False) as f:
            f.write(current.text)
        path = Path(f.name)
        try:
            finished = subprocess.run([*shlex.split(editor), str(path)])
        except OSError as error:
            path.unlink()
            raise CommandError(
                f"Cannot start the editor {editor!r} ({error.strerror}): set $EDITOR or $VISUAL. "
                "Nothing was saved."
            ) from None
        if finished.returncode != 0:
            raise CommandError(
                f"{editor} exited with an error; nothing was saved (your text is in {path})."
            )
        try:
            changes = revisions.save_user_edit(
                memory=self.memory,
                text=path.read_text(),
                base_generation=current.generation,
                by=self.person,
            )
        except (ValidationError, revisions.DocumentChanged) as error:
            raise CommandError(f"{in_words(error)} Your text is kept in {path}.") from None
        path.unlink()
        self.stdout.write(
            f"#{changes[0].number}  {changes[0].summary}" if changes else "No changes."
        )

    def do_clear(self, *, confirm: bool, **_) -> None:
        from memory import revisions

        if not confirm:
            raise CommandError(
                "This forgets the whole memory document; run it again with "
                "--confirm (the old document stays as a revision)."
            )
        change = revisions.clear_memory(memory=self.memory, by=self.person)
        self.stdout.write(
            f"#{change.number}  {change.summary}"
            if change
            else "The memory document was already empty."
        )

    def do_export(self, *, file: str | None, **_) -> None:
        from surfaces import portable

        text = portable.export_json(self.memory, reader=reader_for(self.person))
        if not file:
            self.stdout.write(text, ending="")
            return
        try:
            Path(file).write_text(text)
        except OSError as error:
            raise CommandError(f"Cannot write {file}: {error.strerror}.") from None
        self.stdout.write(f"Exported {self.memory.name} to {file}.")

    def do_import(self, *, file: str, replace_memory: bool, **_) -> None:
        from surfaces import portable

        try:
            raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        except OSError as error:
            raise CommandError(f"Cannot read {file}: {error.strerror}.") from None
        data = portable.parse(raw)
        total = portable.rows_in(data)
        progress = Progress(self.stdout, total, "rows", label="Importing")
        report = portable.import_memory(
            self.memory, data, replace_memory=replace_memory, on_rows=progress.advance
        )
        progress.finish(f"Imported {total:,} rows into {self.memory.name}:")
        for line in report:
            self.stdout.write(line)


def _load_the_embedder_meanwhile() -> threading.Thread | None:
    """Start loading the embedding model on a thread while the teaching path is imported: the
    two take about as long, and the model's loading leaves the other core to the imports (a
    terminal add 1.34 -> 0.95 s of the two). The gate's own call waits for the model behind
    the same lock, so it is loaded once."""
    from django.conf import settings

    if settings.BRAIN_EMBEDDER != "minilm":
        return None

    def load() -> None:
        from knowledge import embedding

        embedder = embedding.get_embedder()
        if isinstance(embedder, embedding.MiniLMEmbedder):
            embedder.embed(["a sentence to load the model with"])

    thread = threading.Thread(target=load, name="embedder-load", daemon=True)
    thread.start()
    return thread


def _taught(fact: Fact) -> str:
    who = fact.taught_by_name or "brain"
    return f"{who}, {timezone.localtime(fact.created_at):%Y-%m-%d}"
