"""Passages: the pieces of a source's text that facts cite, and citing them.

Cutting (``cut``): a source is cut by paragraph (a blank line ends one; so does a heading or a
quoted-reply marker in an email); a paragraph that names two or more subjects of the memory
(``knowledge.subjects``) is cut again by sentence, so a label or a citation never covers more
than the thing it is about. A sentence is never cut: one sentence naming two pages is one
passage, cited by the facts of both. Paragraphs longer than MAX_PASSAGE_CHARS are cut by
sentence too, so a passage stays something a person reads in one glance.

Citing (``cite``): every fact cites at least one passage of its own memory. Teaching a line
with no document behind it cites the line itself as a passage of its source (``of_line``): the
typed line, the conversation, the run. The database keeps each fact's label sets from its
citations (see visibility.py), so citing is all a writer does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection, transaction
from django.db.models import Case, OuterRef, Q, Subquery, When
from django.utils import timezone

from knowledge import labelling_rules, statements, visibility
from knowledge.models import (
    Citation,
    Fact,
    Label,
    LabelSet,
    Memory,
    Passage,
    PassageLabel,
    Source,
)
from knowledge.subjects import mentioned_ids

MAX_PASSAGE_CHARS = 2_000  # about a long paragraph; longer ones are cut by sentence
_PARAGRAPHS = re.compile(r"\n[ \t]*\n+")
# A sentence ends at . ! or ? followed by space and a capital, a digit or a quote; "e.g. this"
# and "€50,000.00" stay whole.
_SENTENCES = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“‘(]?[A-Z0-9À-Ý€$£])")


def text_hash(text: str) -> str:
    """The passage's text with its spaces evened out, hashed: equal for unchanged text."""
    return hashlib.sha256(statements.as_stored(text).encode()).hexdigest()


def sentences(paragraph: str) -> list[str]:
    return [part.strip() for part in _SENTENCES.split(paragraph) if part.strip()]


def cut(text: str, memory: Memory | None = None) -> list[str]:
    """``text`` as passages: paragraphs, each cut again by sentence when it names two or more
    of ``memory``'s subjects or runs past MAX_PASSAGE_CHARS (see the module docstring)."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPHS.split(text.replace("\r\n", "\n").replace("\r", "\n")):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        mixed = memory is not None and len(mentioned_ids(memory, paragraph)) >= 2
        if mixed or len(paragraph) > MAX_PASSAGE_CHARS:
            pieces += _grouped(sentences(paragraph))
        else:
            pieces.append(paragraph)
    return pieces


def _grouped(parts: list[str]) -> list[str]:
    """Sentences as passages; one longer than MAX_PASSAGE_CHARS is cut at that length."""
    out: list[str] = []
    for part in parts:
        while len(part) > MAX_PASSAGE_CHARS:
            out.append(part[:MAX_PASSAGE_CHARS])
            part = part[MAX_PASSAGE_CHARS:]
        if part:
            out.append(part)
    return out


def labels_for(source: Source) -> list[Label]:
    """What a new passage of ``source`` carries: the labels set on the source (by a person, or
    by the labelling rules it matched when it was added), else those of the rules it matches
    (a conversation, a typed line: ``knowledge.labelling_rules``), else the memory's default
    labels."""
    chosen = list(source.labels.all()) if source.pk else []
    return chosen or labelling_rules.labels_for(source) or visibility.default_labels(source.memory)


def add(source: Source, texts: Sequence[str], *, labels: Iterable[Label] | None = None) -> list:
    """New passages of ``source`` after any it has, each with ``labels`` (default:
    ``labels_for(source)``)."""
    given = list(labels) if labels is not None else None
    return add_many([(source, text) for text in texts], labels=given)


def add_many(
    pieces: Sequence[tuple[Source, str]], *, labels: Sequence[Label] | None = None
) -> list[Passage]:
    """New passages, each after those its source has, in a few statements whatever their
    number: each takes ``labels`` or else its source's labels (``labels_for``), and comes back
    with the label set the database worked out for them."""
    if not pieces:
        return []
    sources = {source.pk: source for source, _ in pieces}
    # No savepoint of its own: a failure here fails the caller's transaction anyway.
    with transaction.atomic(savepoint=False):
        return _add_many(pieces, sources, labels)


def _add_many(pieces, sources, labels) -> list[Passage]:
    # Two writers adding to one source (a conversation's reflection and its next turn) take
    # their places in turn; NO KEY so rows citing the source are not held up. The sources are
    # locked first and read after, in a statement of their own: a statement that waited for a
    # lock still reads with the snapshot it began with, so reading the last place in the
    # locking statement could miss the passages the other writer just added.
    adding = Source.objects.as_system("adding passages to sources a writer holds")
    list(adding.select_for_update(no_key=True).filter(pk__in=sorted(sources)))
    locked = (
        adding.filter(pk__in=sources)
        .annotate(
            last=Subquery(
                Passage.objects.filter(source=OuterRef("pk"))
                .order_by("-ordinal")
                .values("ordinal")[:1]
            ),
            chosen=ArraySubquery(
                Source.labels.through.objects.filter(source=OuterRef("pk")).values("label_id")
            ),
            defaults=ArraySubquery(
                Label.objects.filter(memory=OuterRef("memory_id"), default=True).values("pk")
            ),
        )
        .values_list("pk", "last", "chosen", "defaults")
    )
    last: dict[int, int] = {}
    chosen: dict[int, list[int]] = {}
    defaults: dict[int, list[int]] = {}
    for pk, ordinal, chosen_ids, default_ids in locked:
        if ordinal is not None:
            last[pk] = ordinal
        chosen[pk] = chosen_ids
        defaults[sources[pk].memory_id] = default_ids
    if labels is None:
        for source in sources.values():
            if not chosen[source.pk] and not defaults[source.memory_id]:  # a memory's first
                defaults[source.memory_id] = [
                    label.pk for label in visibility.default_labels(source.memory)
                ]
        label_ids = {pk: chosen[pk] or defaults[source.memory_id] for pk, source in sources.items()}
    else:
        label_ids = {pk: [label.pk for label in labels] for pk in sources}
    made = []
    for source, text in pieces:
        last[source.pk] = ordinal = last.get(source.pk, -1) + 1
        made.append(
            Passage(
                memory_id=source.memory_id,
                source=source,
                ordinal=ordinal,
                text=text,
                text_hash=text_hash(text),
            )
        )
    Passage.objects.bulk_create(made)
    PassageLabel.objects.bulk_create(
        [
            PassageLabel(passage_id=passage.pk, label_id=label_id)
            for passage in made
            for label_id in label_ids[passage.source_id]
        ]
    )
    # Their label sets were worked out by the database as their labels were written.
    made_now = Passage.objects.as_system("the label sets of passages just added")
    sets = dict(made_now.filter(pk__in=[p.pk for p in made]).values_list("pk", "label_set_id"))
    for passage in made:
        passage.label_set_id = sets[passage.pk]
    return made


def set_labels(passages: Sequence[Passage], labels: Iterable[Label]) -> None:
    """Give each of ``passages`` exactly ``labels``. The database moves their label sets and
    every fact citing them in this same statement's transaction (see visibility.py)."""
    wanted = {label.pk for label in labels}
    ids = [passage.pk for passage in passages]
    if not ids:
        return
    with transaction.atomic():
        PassageLabel.objects.filter(passage_id__in=ids).exclude(label_id__in=wanted).delete()
        PassageLabel.objects.bulk_create(
            [PassageLabel(passage_id=pk, label_id=label) for pk in ids for label in wanted],
            ignore_conflicts=True,
        )


def of_line(source: Source, line: str) -> Passage:
    """The passage of ``source`` a fact taught as ``line`` cites: the first that holds the line
    (a document or conversation that said it; one with the very same text before any other),
    else the line itself, added to the source."""
    line = statements.as_stored(line)
    digest = text_hash(line)
    holding = (
        source.passages.as_system("the passage a fact taught from this source cites")
        .filter(Q(text_hash=digest) | Q(text__icontains=line))
        .order_by(Case(When(text_hash=digest, then=0), default=1), "ordinal")
        .first()
    )
    return holding or add(source, [line])[0]


# The one passage of a source made a moment ago, with the memory's default labels, in one
# statement. The label set is interned first (``knowledge_label_set_of``, as the labels'
# trigger does), so the trigger finds it already right and leaves the row as it is.
_FIRST_LINE_SQL = """
WITH defaults AS MATERIALIZED (
    SELECT ids, knowledge_label_set_of(ids) AS label_set FROM (
        SELECT coalesce(array_agg(id ORDER BY id), '{}')::bigint[] AS ids
        FROM knowledge_label WHERE memory_id = %(memory)s AND "default"
    ) AS chosen
), passage AS (
    INSERT INTO knowledge_passage
        (memory_id, source_id, ordinal, text, text_hash, unsure, decided, created_at, label_set_id)
    SELECT %(memory)s, %(source)s, 0, %(text)s, %(hash)s, false, false, %(now)s, label_set
    FROM defaults
    RETURNING id, label_set_id
), labelled AS (
    INSERT INTO knowledge_passagelabel (passage_id, label_id)
    SELECT passage.id, unnest(defaults.ids) FROM passage, defaults
)
SELECT passage.id, passage.label_set_id, cardinality(defaults.ids) FROM passage, defaults
"""


def line_of_new_source(source: Source, line: str) -> Passage:
    """What ``of_line`` gives for a source made a moment ago, in this transaction (the moment a
    statement was said, ``memory.actions``): its first passage, the line itself, with the
    memory's default labels. One statement where ``of_line`` takes six: a source no other
    transaction sees yet holds no passage to find, has no labels of its own, and has no other
    writer to wait for. The memory's very first passage makes its default labels, as ``add``
    does."""
    line = statements.as_stored(line)
    digest, now = text_hash(line), timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            _FIRST_LINE_SQL,
            {
                "memory": source.memory_id,
                "source": source.pk,
                "text": line,
                "hash": digest,
                "now": now,
            },
        )
        pk, label_set_id, labelled = cursor.fetchone()
    passage = Passage(
        pk=pk,
        memory_id=source.memory_id,
        source=source,
        ordinal=0,
        text=line,
        text_hash=digest,
        label_set_id=label_set_id,
        created_at=now,
    )
    passage._state.adding = False
    passage._state.db = connection.alias
    if not labelled:
        first = visibility.default_labels(source.memory)  # none when the memory has labels
        if first:
            set_labels([passage], first)
            passage.refresh_from_db(fields=["label_set"])
    return passage


LINES_REFERENCE = "lines"


def lines_source(memory: Memory) -> Source:
    """Where the lines of facts taught with no source of their own are kept as passages (and
    those of facts taught before passages existed: migration 0012)."""
    source, _ = Source.objects.as_system("the memory's own source of lines").get_or_create(
        memory=memory,
        kind=Source.Kind.IMPORT,
        reference=LINES_REFERENCE,
        defaults={"title": "Lines taught with no source of their own"},
    )
    return source


def lines_for(facts: Sequence[Fact]) -> list[Passage]:
    """The passage each of ``facts`` (rows of one memory not written yet) is to cite, its own
    line as a passage of its source (or of ``lines_source``): an unchanged line already there
    is reused, the rest are added now with their source's labels. A few statements whatever the
    number of facts (imports). Each fact takes its passage's label set, so citing it
    (``cite_lines``, once the rows are written) leaves the row as it is: the database's
    trigger finds the sets it works out already there, where it rewrote every imported row
    (and each of its indexes) before. The trigger still decides: a set given wrong here is
    put right by it."""
    if not facts:
        return []
    memory = facts[0].memory
    spare = lines_source(memory) if any(f.source_id is None for f in facts) else None

    def key(fact: Fact) -> tuple[int, str]:
        source_id = fact.source_id
        if not source_id:
            assert spare is not None  # there is one when a fact has no source
            source_id = spare.pk
        return source_id, text_hash(statements.as_stored(fact.text))

    wanted: dict[tuple[int, str], str] = {}
    for fact in facts:
        wanted.setdefault(key(fact), statements.as_stored(fact.text))
    found = {
        (p.source_id, p.text_hash): p
        for p in Passage.objects.as_system("lines already kept, reused by what cites them")
        .filter(
            source_id__in={source for source, _ in wanted},
            text_hash__in={digest for _, digest in wanted},
        )
        .order_by("-ordinal")
    }
    sources = (
        Source.objects.as_system("the sources of lines being kept")
        .select_related("memory")
        .in_bulk({s for s, _ in wanted})
    )
    pieces = [(sources[k[0]], line) for k, line in wanted.items() if k not in found]
    for passage in add_many(pieces):
        found[(passage.source_id, passage.text_hash)] = passage
    cited = [found[key(fact)] for fact in facts]
    for fact, passage in zip(facts, cited, strict=True):
        fact.label_sets = label_sets_of([passage])
    return cited


def label_sets_of(cited: Iterable[Passage]) -> list[int]:
    """The ``label_sets`` a fact citing ``cited`` has, as the database works them out (0 for
    a passage with no labels): a fact written with them is left as it is when its citations
    are, where the trigger otherwise rewrites the new row and each of its indexes again (its
    citation took 2.2 ms at 100k facts, 0.6 without). Worked out from the passages as they
    were read; the trigger still decides, and puts right a set given wrong here."""
    return sorted({passage.label_set_id or 0 for passage in cited})


def cite_lines(facts: Sequence[Fact], cited: Sequence[Passage]) -> None:
    """Each of ``facts``, now written, cites its passage of ``lines_for``."""
    Citation.objects.bulk_create(
        [Citation(fact=fact, passage=passage) for fact, passage in zip(facts, cited, strict=True)],
        ignore_conflicts=True,
    )


def _labels_of_sets(ids: Iterable[int]) -> dict[int, frozenset[int]]:
    return {
        pk: frozenset(labels)
        for pk, labels in LabelSet.objects.filter(pk__in=set(ids)).values_list("pk", "labels")
    }


def reads_as_widely(new: Fact, old: Fact) -> bool:
    """Whether everyone who reads ``old`` reads ``new`` too, so ``new`` may replace it: every
    label set ``new`` cites is one ``old`` cites (a reader of ``old`` reads each of those). A
    newer statement read by fewer people — an HR note contradicting a Sales line — does not
    retire what the others read; a person settles it (``learn`` opens a conflict)."""
    return set(new.label_sets) <= set(old.label_sets)


def keeping_readers(fact: Fact, said: Sequence[Passage]) -> list[Passage]:
    """Of the passages that said ``fact`` again, those it may cite without being taken from
    anyone who reads it now: each passage whose labels hold all the labels of one of the label
    sets ``fact`` cites (a reader of the fact holds one of that set's labels, so reads the
    passage). A restatement cites where it was said, so a passage relabelled later takes the
    fact with it; one that would narrow it now (a line with no label) is only observed."""
    sets = _labels_of_sets([*fact.label_sets, *(p.label_set_id or 0 for p in said)])
    cited = [sets.get(pk, frozenset()) for pk in fact.label_sets if pk]
    return [
        passage
        for passage in said
        if (passage.label_set_id or 0) in fact.label_sets
        or any(
            labels and labels <= sets.get(passage.label_set_id or 0, frozenset())
            for labels in cited
        )
    ]


def cite(fact: Fact, passages: Iterable[Passage]) -> None:
    """``fact`` cites ``passages`` (more citations never make a fact readable by more people:
    it is read only by those who read every passage it cites)."""
    Citation.objects.bulk_create(
        [Citation(fact=fact, passage=passage) for passage in passages], ignore_conflicts=True
    )
