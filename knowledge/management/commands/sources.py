"""`brain sources add FILE [--label L]…`, `brain sources list`, `brain sources relabel`,
`brain sources compile ID` and `brain sources search WORDS`: notes, documents and emails from the
terminal, through the same actions as the Sources tab and ``POST /api/sources/``
(knowledge/sources.py), Compile again on a source (knowledge/compile_requests.py; a worker
compiles it) and the search across passages (knowledge/passage_search.py)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError, CommandParser

from brain.cli import GroupCommand
from brain.words import counted
from knowledge import access, compile_requests, labeller, passage_search, sources
from knowledge.models import Permission, Source
from knowledge.read_layer import reader_for

NEEDS = {
    "add": Permission.TEACH,
    "list": Permission.READ,
    "relabel": Permission.ADMINISTER,
    "compile": Permission.ADMINISTER,
    "search": Permission.READ,
}
FOUND_SHOWN = 20


class Command(GroupCommand):
    help = "Add notes, documents and emails as sources; list, search, relabel, compile them."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")
        add = verbs.add_parser("add", help="add a .txt, .md, .pdf or .eml file ('-': stdin)")
        add.add_argument("file")
        add.add_argument(
            "--label", action="append", default=[], help="a label its passages take (repeat)"
        )
        add.add_argument("--title", default="", help="default: the file's name")
        add.add_argument(
            "--version-of", type=int, default=None, help="the source this is a new version of"
        )
        verbs.add_parser("list", help="the sources you may read, newest first")
        relabel = verbs.add_parser(
            "relabel", help="label passages again after a new label or a changed meaning"
        )
        relabel.add_argument("--source", type=int, default=None, help="one source (default: all)")
        again = verbs.add_parser(
            "compile", help="compile a source into facts on pages again (on a worker)"
        )
        again.add_argument("source", type=int, nargs="?", default=None)
        again.add_argument(
            "--all",
            action="store_true",
            help="every note, document and email with a passage not compiled yet",
        )
        search = verbs.add_parser("search", help="the passages you may read holding these words")
        search.add_argument("words", nargs="+")

    def handle(self, *args, verb: str, memory: str, person: str, **options) -> None:
        self.memory = self.chosen_memory(memory)
        self.person = self.chosen_person(person)
        self.reader = reader_for(self.person)
        access.require(self.person, self.memory, NEEDS[verb])
        getattr(self, f"do_{verb}")(**options)

    def do_add(self, *, file: str, label: list[str], title: str, version_of, **_) -> None:
        if file == "-":
            upload = sources.Upload("stdin.txt", self.stdin.buffer.read())
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"There is no file {file!r}.")
            if path.stat().st_size > sources.MAX_UPLOAD_BYTES:  # refused before it is read
                raise CommandError(
                    f"“{path.name}” is {path.stat().st_size / (1024 * 1024):.1f} MB; the limit "
                    f"is {sources.MAX_UPLOAD_BYTES // (1024 * 1024)} MB."
                )
            upload = sources.Upload(path.name, path.read_bytes())
        previous = None if version_of is None else self._source(version_of)
        added = sources.add_source(
            memory=self.memory,
            by=self.person,
            upload=upload,
            title=title,
            labels=label,
            previous=previous,
        )
        self.stdout.write(f"#{added.source.pk} {added.message}")

    def _source(self, pk: int) -> Source:
        """Source ``pk`` of the memory, when the person may read it; a CommandError otherwise."""
        found = Source.objects.readable_by(self.reader).filter(memory=self.memory, pk=pk).first()
        if found is None:
            raise CommandError(f"There is no source #{pk} in {self.memory.name}.")
        return found

    @property
    def stdin(self):
        import sys

        return sys.stdin

    def do_list(self, **_) -> None:
        listed = Source.objects.filter(memory=self.memory).readable_by(self.reader)
        for source in listed.order_by("-created_at", "-pk")[:100]:
            stamp = f"{source.created_at:%Y-%m-%d %H:%M}"
            self.stdout.write(f"#{source.pk}  {stamp}  {source.get_kind_display()}  {source.title}")

    def do_compile(self, *, source, **options) -> None:
        every = options.get("all", False)
        if every == (source is not None):
            raise CommandError("Name one source (its id), or --all.")
        if every:
            waiting = (
                Source.objects.readable_by(self.reader)
                .filter(
                    memory=self.memory,
                    kind__in=compile_requests.COMPILED_KINDS,
                    passages__compiled_at__isnull=True,
                )
                .distinct()
            )
            asked = [compile_requests.compile_again(one, by=self.person) for one in waiting]
            self.stdout.write(
                f"Asked for {counted(len(asked), 'compile')}; a worker "
                "compiles them (each source's page shows how far it got)."
            )
            return
        one = self._source(source)
        run = compile_requests.compile_again(one, by=self.person)
        self.stdout.write(
            f"#{one.pk} “{one.title}”: compile #{run.pk} asked for; a worker compiles it "
            "(the source's page on the Sources tab shows how far it got)."
        )

    def do_search(self, *, words: list[str], **_) -> None:
        q = passage_search.clean_query(" ".join(words))
        found = passage_search.matching(self.memory, self.reader, q)
        count = found.count()
        self.stdout.write(f"{counted(count, 'passage')} you may read hold “{q}”")
        for passage in found[:FOUND_SHOWN]:
            where = f"#{passage.source_id} ¶{passage.ordinal + 1} {passage.source.title}"
            # snippet is matching's annotation, which its QuerySet[Passage] does not carry.
            snippet = passage.snippet  # type: ignore[attr-defined]
            self.stdout.write(f"{where}: {passage_search.snippet_text(snippet)}")

    def do_relabel(self, *, source, **_) -> None:
        one = None if source is None else self._source(source)
        looked = labeller.relabel(memory=self.memory, source=one)
        self.stdout.write(
            f"Looked again at {counted(looked, 'passage')}; facts follow their "
            "passages at once, nothing was compiled again."
        )
