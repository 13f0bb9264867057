"""Finding facts by words (PostgreSQL full text) and by meaning (pgvector), planned by
selectivity so a filtered search never loses recall.

HNSW is approximate and filters after it walks the graph: restricted to a subject holding a few
percent of the rows it returns too few (measured: recall 0.73 at 2%). So a search restricted to
a subject with at most EXACT_SCAN_LIMIT live facts scans them exactly (an index on the
subject's facts, then a sort by distance); only wider searches use the HNSW index, with
iterative scanning on so filtered-out rows do not starve the result.

Full text (``text_matches``) widens tier by tier (every word, any two, any one) and, within a
tier, ranks only the newest TEXT_CANDIDATES matches. Ranking every match was what cost: a
question of common words matched thousands of facts at 100k (2,202 for one question, 36 ms of
ranking; the any-one-word tier matched a fifth of the memory) and the ranks below the first
forty are never read. Newest first because a newer statement is likelier to be the one still
meant, and because the primary key is an index the scan can stop on.

Which way those newest matches are found is the planner's choice, from its estimate of how many
facts a tier matches: through the full-text index when few do, walking the memory's facts newest
first (the index on memory and id, migration 0011) when many do. Forcing the index for the tiers
that join words was tried and measured: it saved the walks the planner misjudged (45 ms against
5 ms for one question at 100k) but lost more where two common words match thousands of facts
(66 ms against a few), and over the recall questions and the intake statements of the
benchmark household the planner's choice was as fast at the median and faster in the tail.

Where a tier's words match thousands of facts (templated lines: 7,406 of 100k for one question
of the benchmark household), its time is the table, not the index: the full-text index gives
every match in 1.7 ms, and each is then read to be filtered and sorted, 1.3 µs a match (8.5 ms),
ten times that at 1M. The planner cannot see this coming (it estimates an AND of words at one
row), so the statement decides (``_walking``): where the column's statistics (``word_stats``:
the share of facts holding each word; the least common word bounds an AND of them) call the
words a tier joins common, and the tier is expected to run, it first walks the memory's newest
WALK live facts in the index ``fact_words``, which holds their words and everything the read
rule tests, and stops at TEXT_CANDIDATES matches; only when it found fewer there, and the memory
holds more live facts than the walk read, does it ask the full-text index for older ones (that
index is one for every memory in the table). Any walk gives the same matches: those among the
newest facts are all newer than any below them. The estimate is only an upper bound, so a walk
can come back short and cost its 2.5 ms on top of the index's. Measured over 100 questions of
the benchmark household at 100k, interleaved with the index alone: the candidates statement p50
2.9 ms against 3.0, p95 9.5 against 14.5; ``context()`` p50 13.6 against 14.4, p95 19.4 against
26.5. With every tier allowed to walk and 410k facts in the table it was p95 18.7 against 53.7,
but planning a walk into every tier, run or not, took 1.66 ms a statement against 0.82. Windows
of ids back from the newest fact, left to the planner, were tried first: it read every match
anyway and applied the range after.

``candidates`` and ``nearest_rows`` are the same searches for ``retrieval.context``, in two
round trips where the plain path takes one per subject, per tier, per search and per
hydration: the subjects' slices, the text tiers (a looser tier runs only while the stricter
found fewer than ENOUGH, decided inside the statement), whether the memory has procedures and
the rows of what they found in one statement, which runs while the question is embedded; the
vector neighbours and the rows of those not read already in the other, the only one that has
to wait for the question's vector. Both build on the one read rule (``readable_where``: the
WHERE clause of the ``readable_by`` queryset), so raw SQL never has a rule of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from knowledge import statements, word_stats
from knowledge.embedding import embedder_for
from knowledge.models import Fact, Memory

ENOUGH = 10  # full-text matches that stop the search widening to looser tiers
PAIRED_WORDS = 6  # the longest words of a question tried two at a time
EXACT_SCAN_LIMIT = 20_000  # live facts about one subject below which the scan is exact
HNSW_EF_SEARCH = 100  # candidates HNSW keeps per query: recall against speed
TEXT_CANDIDATES = 200  # matches of one tier ranked, newest first (see the module docstring)
# When a tier walks the memory's newest facts before it asks the index (``_walking``).
WALK = 10_000  # the newest live facts a tier walks (2.5 ms at 300k)
WALK_MARGIN = 1.5  # the walk holds this many times the matches the tier needs, by its estimate
WALK_ROW_US = 0.25  # measured at 300k: a fact read and tested in a walk of ``fact_words``
INDEX_MATCH_US = 1.3  # measured at 100k: a match the full-text index gives, read and filtered
NO_ID = 2**63 - 1  # above every id (bigint)

_LIVE_SQL = """
    f.memory_id = %(memory)s
    AND f.status IN ('queued', 'filed')
    AND f.valid_to IS NULL
    AND NOT f.subject_removed
    AND (f.expires_at IS NULL OR f.expires_at > %(now)s)
    AND f.embedding IS NOT NULL
    AND f.embedder = %(embedder)s
"""


def _words(text: str) -> list[str]:
    """The words worth searching for: stop words would only widen every tier."""
    words = set(re.findall(r"[a-z0-9]{2,}", text.casefold()))
    return sorted(
        word
        for word in words
        if not statements.is_stopword(word) and word not in {"on", "off", "up", "down"}
    )


def _groups(words: list[str]) -> list[list[tuple[str, ...]]]:
    """The tiers from the most to the least demanding, each the groups of words of which a
    fact must hold every word of one: every word, any two, any one.

    Matching any one word of a question matches a large share of a big memory, and ranking
    every match is what costs; the stricter tiers find the best matches among far fewer rows.
    """
    tiers = []
    if len(words) >= 2:
        tiers.append([tuple(words)])
    pairing = sorted(words, key=len, reverse=True)[:PAIRED_WORDS]
    if len(pairing) >= 3:
        tiers.append(list(combinations(pairing, 2)))
    tiers.append([(word,) for word in words])
    return tiers


def _tiers(words: list[str]) -> list[str]:
    """Raw tsqueries of ``_groups``: "a & b & c", "(a & b) | (a & c) | …", "a | b | c"."""
    return [_tsquery(groups) for groups in _groups(words)]


def _tsquery(groups: list[tuple[str, ...]]) -> str:
    if len(groups) == 1:
        return " & ".join(groups[0])
    return " | ".join(f"({' & '.join(group)})" if len(group) > 1 else group[0] for group in groups)


def _walking(words: list[str]) -> list[bool]:
    """For each tier of ``_tiers(words)``, whether it walks the memory's newest live facts for
    its matches before it asks the full-text index (see the module docstring): where its
    estimated share of matching facts should find its matches within WALK facts with
    WALK_MARGIN to spare, and the walk would cost under half of what reading every match the
    index gives would.

    Only the tiers that join words decide here: the planner cannot estimate an AND of words (at
    one row, whatever the words: 726 facts for a tier of pairs that matched 8,085 at 100k,
    then read from the table in 14.5 ms), while it estimates one word's share itself and walks
    ``fact_words`` on its own where that pays. A tier's share is estimated as its likeliest
    group's, and a group's as its least common word's (a stop word is left out of the query,
    so of the estimate too): an upper bound, so a walk can come back short.

    A walk costs its planning in every statement, run or not (walks planned into every tier
    of every question: 1.66 ms of planning a statement, against 0.82), and a looser tier runs
    only while the stricter ones found fewer than ENOUGH. So a looser tier walks only where the
    stricter ones are expected to find fewer (by the same estimates, a word too rare to be
    among the most common counting as none): a new statement's rare word leaves its every-word
    tier empty and its tier of pairs is what runs. Measured at 100k over 150 statements of the
    kind the benchmark teaches: the gate's neighbours statement p50 16.4 → 5.2 ms, mean 12.4 →
    5.0; ``context()`` over 190 benchmark questions unchanged (no question's walks differed)."""
    groups = _groups(words)
    if not words:  # no tier to search: nothing to read the statistics for
        return [False] * len(groups)
    rows, share = word_stats.shares(words)

    def likeliest(group: tuple[str, ...]) -> float:
        known = [value for word in group if (value := share[word]) is not None]
        return min(known) if known else 0.0

    walks, before = [], 0.0
    for tier in groups:
        matching = max((likeliest(group) for group in tier), default=0.0)
        joins = any(len(group) > 1 for group in tier)
        runs = before < ENOUGH
        enough_within = matching * WALK >= WALK_MARGIN * TEXT_CANDIDATES
        cheaper = rows * matching * INDEX_MATCH_US / 2 > WALK * WALK_ROW_US
        walks.append(joins and runs and enough_within and cheaper)
        before += rows * sum(likeliest(group) for group in tier)
    return walks


def text_matches[M: Model](facts: QuerySet[M], text: str, limit: int) -> list[M]:
    """The facts of ``facts`` sharing the most words with ``text``, best first.

    Ranked over the stored ``search_vector`` (GIN index), widening tier by tier only while
    fewer than ``ENOUGH`` (or ``limit``) facts have been found; within a tier only the newest
    TEXT_CANDIDATES matches not already found are ranked. Ties go to the newer fact.
    """
    words = _words(text)
    found: list[M] = []
    enough = min(limit, ENOUGH)
    for tier in _tiers(words):
        query = SearchQuery(tier, config="english", search_type="raw")
        newest = (
            facts.exclude(pk__in=[fact.pk for fact in found])
            .filter(search_vector=query)
            .order_by("-pk")
            .values("pk")[:TEXT_CANDIDATES]
        )
        more = list(
            facts.filter(pk__in=newest)
            .annotate(rank=SearchRank(F("search_vector"), query))
            .order_by("-rank", "-pk")[: limit - len(found)]
        )
        found += more
        if len(found) >= enough:
            break
    return found


def _vector_literal(embedding: list[float]) -> str:
    """The vector as pgvector reads it: nine significant digits, exactly the float4 it
    stores (six decimals left small components with three digits, and closeness ~1e-6 off)."""
    return "[" + ",".join(f"{value:.9g}" for value in embedding) + "]"


def nearest(
    memory: Memory, embedding: list[float], *, limit: int, subject_id: int | None = None
) -> list[tuple[int, float]]:
    """The ids of the live facts nearest ``embedding`` (cosine distance), nearest first. Only
    vectors made by the memory's embedder are compared (see reembedding.py)."""
    params = {
        "memory": memory.pk,
        "now": timezone.now(),
        "q": _vector_literal(embedding),
        "limit": limit,
        "subject": subject_id,
        "embedder": embedder_for(memory).name,
    }
    if subject_id is not None and _subject_size(subject_id) <= EXACT_SCAN_LIMIT:
        sql = f"""
            WITH about AS MATERIALIZED (
                SELECT f.id, f.embedding FROM knowledge_fact f
                JOIN knowledge_fact_subjects s ON s.fact_id = f.id
                WHERE s.subject_id = %(subject)s AND {_LIVE_SQL}
            )
            SELECT id, embedding <=> %(q)s::vector AS distance FROM about
            ORDER BY distance LIMIT %(limit)s
        """
        return _fetch(sql, params)
    subject_filter = ""
    if subject_id is not None:
        subject_filter = """AND EXISTS (SELECT 1 FROM knowledge_fact_subjects s
                                        WHERE s.fact_id = f.id AND s.subject_id = %(subject)s)"""
    sql = f"""
        SELECT f.id, f.embedding <=> %(q)s::vector AS distance FROM knowledge_fact f
        WHERE {_LIVE_SQL} {subject_filter}
        ORDER BY f.embedding <=> %(q)s::vector LIMIT %(limit)s
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}; "
                "SET LOCAL hnsw.iterative_scan = relaxed_order"
            )
        rows = _fetch(sql, params)
    return sorted(rows, key=lambda row: row[1])  # relaxed order: sort what came back


def _fetch(sql: str, params: dict) -> list[tuple[int, float]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


# What the statements that walk the HNSW index share: its settings for the one statement, the
# live rule with positional parameters (memory, now, embedder) for a CTE, and reading the rows
# that come after the settings.
_HNSW_SETTINGS = (
    f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}; SET LOCAL hnsw.iterative_scan = relaxed_order;"
)
_LIVE_POSITIONAL = (
    _LIVE_SQL.replace("%(memory)s", "%s").replace("%(now)s", "%s").replace("%(embedder)s", "%s")
)


def _rows_after_settings(sql: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while cursor.description is None and cursor.cursor.nextset():
            pass  # past the SET LOCALs to the rows
        return cursor.fetchall()


def _subject_size(subject_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM knowledge_fact_subjects WHERE subject_id = %s", [subject_id]
        )
        return cursor.fetchone()[0]


# The same searches for context(), in two round trips -----------------------------------------


def readable_where(readable) -> tuple[str, list] | None:
    """The WHERE clause of a Fact queryset (``for_memory().live().readable_by()``) as SQL over
    the unaliased table ``knowledge_fact``, with its parameters; None when it reads nothing.
    Raw SQL applies the one read rule through this, never a copy of it. Given a rule already
    compiled (what this returned), returns it as it is, so one call compiles it once."""
    if readable is None or isinstance(readable, tuple):
        return readable
    query = readable.query
    if any(count for alias, count in query.alias_refcount.items() if alias != Fact._meta.db_table):
        raise ValueError("the read rule joins other tables: raw SQL cannot take it as it is")
    try:
        sql, params = query.get_compiler(connection=connection).compile(query.where)
    except EmptyResultSet:
        return None
    return sql, list(params)


@dataclass
class Row:
    """A fact as ``retrieval`` ranks it: no model instance, its subjects' ids, its vector (None
    when made by another embedder) and its words as full text holds them (``lexemes``: each
    lexeme of ``search_vector`` and how often it occurs) alongside."""

    pk: int
    text: str
    valence: str
    confidence: float
    support: int
    successes: int
    failures: int
    subject_ids: list[int]
    vector: np.ndarray | None
    lexemes: dict[str, int] = field(default_factory=dict)
    kind: str = ""
    # When it was taught, in whole seconds since 1970 (what a line said in a conversation
    # replies to is the line taught just before it: ``retrieval._replies``).
    taught: int = 0


# A fact's row as both statements read it, after a tag, an id and two spare columns.
_ROW_SQL = """knowledge_fact.text, knowledge_fact.valence, knowledge_fact.confidence,
    knowledge_fact.support, knowledge_fact.successes, knowledge_fact.failures,
    ARRAY(SELECT link.subject_id FROM knowledge_fact_subjects link
          WHERE link.fact_id = knowledge_fact.id),
    CASE WHEN knowledge_fact.embedder = %s THEN vector_send(knowledge_fact.embedding) END,
    knowledge_fact.search_vector::text, knowledge_fact.kind,
    floor(extract(epoch FROM knowledge_fact.created_at))::bigint"""
_NO_ROW_SQL = (
    "NULL::text, NULL::varchar, NULL::float8, NULL::int, NULL::int, NULL::int, "
    "NULL::bigint[], NULL::bytea, NULL::text, NULL::varchar, NULL::bigint"
)

# One lexeme of a tsvector's text: 'word':1,5B (positions optional, quotes doubled inside).
_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


def lexemes_of(search_vector: str | None) -> dict[str, int]:
    """A ``search_vector`` as its text reads (``'batteri':4 'spare':1,7``): each lexeme and
    the number of places it holds (1 for a lexeme stored without positions)."""
    found: dict[str, int] = {}
    for word, places in _LEXEME.findall(search_vector or ""):
        found[word.replace("''", "'")] = places.count(",") + 1 if places else 1
    return found


def vector_of(raw) -> np.ndarray | None:
    """A vector as ``vector_send`` gives it (dimensions and a spare int16, then big-endian
    floats): exactly the float4s stored, which the ranking compares."""
    if raw is None:
        return None
    return np.frombuffer(bytes(raw), dtype=">f4", offset=4).astype(np.float32)


def _row(pk: int, columns) -> Row:
    (text, valence, confidence, support, successes, failures, subject_ids, raw, words, kind,
     taught) = columns  # fmt: skip
    return Row(
        pk,
        text,
        valence,
        confidence,
        support,
        successes,
        failures,
        subject_ids,
        vector_of(raw),
        lexemes_of(words),
        kind,
        taught,
    )


@dataclass
class Found:
    """What one statement found: each subject's slice (fact ids, in subject order, each
    slice by confidence then newest), the full-text ranking, whether any procedure exists in
    the memory, and (``hydrate``) the row of every fact it found."""

    about: list[int]
    text: list[int]
    procedures: bool
    rows: dict[int, Row] = field(default_factory=dict)


def candidates(
    memory: Memory,
    readable,
    *,
    subject_ids: list[int],
    question: str,
    limit: int,
    hydrate: bool = False,
):
    """``Found`` for ``retrieval.context``, in one statement, or None when nothing is
    readable. The same as a slice per subject (``limit`` each, by confidence) and
    ``text_matches(readable, question, limit)``, which the tests check. ``readable``: the
    queryset, or its ``readable_where``. ``hydrate``: with the rows of what it found, read
    while the question is still being embedded, so the statement that waits for the
    question's vector reads only its neighbours."""
    rule = readable_where(readable)
    if rule is None:
        return None
    where, where_params = rule
    words = _words(question)
    tiers, walks = (_tiers(words), _walking(words)) if words else ([], [])
    ctes, params = _tier_ctes(tiers, where, where_params, limit, memory.pk, walks)
    parts = [
        (f"{index + 1}, 0::bigint, id, rank::float8", f"FROM t{index}")
        for index in range(len(tiers))
    ]
    if subject_ids:
        # Each link carries its fact's confidence and liveness (migration 0010), so the
        # subject's most certain facts come from one index in order and the scan stops at
        # ``limit``; the fact row is still read for the read rule and expiry.
        ctes.append(f"""slices AS (
            SELECT s.position, x.id, x.confidence
            FROM unnest(%s::bigint[]) WITH ORDINALITY AS s(subject, position)
            CROSS JOIN LATERAL (
                SELECT knowledge_fact.id, knowledge_fact.confidence
                FROM knowledge_fact_subjects link
                JOIN knowledge_fact ON knowledge_fact.id = link.fact_id
                WHERE link.subject_id = s.subject AND link.live AND {where}
                ORDER BY link.confidence DESC, link.fact_id DESC LIMIT {int(limit)}
            ) AS x)""")
        params += [list(subject_ids), *where_params]
        parts.append(("0, position, id, confidence", "FROM slices"))
    parts.append(
        (
            "-1, 0::bigint, 0::bigint, 0::float8",
            "WHERE EXISTS (SELECT 1 FROM knowledge_procedure WHERE memory_id = %s)",
        )
    )
    params.append(memory.pk)
    found = [f"SELECT id FROM t{index}" for index in range(len(tiers))]
    found += ["SELECT id FROM slices"] if subject_ids else []
    hydrate = hydrate and bool(found)
    selects = [
        f"SELECT {columns}{', ' + _NO_ROW_SQL if hydrate else ''} {rest}" for columns, rest in parts
    ]
    if hydrate:
        ctes.append(f"found AS ({' UNION '.join(found)})")
        selects.append(
            f"SELECT -2, 0::bigint, knowledge_fact.id, NULL::float8, {_ROW_SQL} "
            "FROM knowledge_fact WHERE knowledge_fact.id IN (SELECT id FROM found)"
        )
        params.append(embedder_for(memory).name)
    sql = ("WITH " + ",\n".join(ctes) + "\n" if ctes else "") + "\nUNION ALL\n".join(selects)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    slices: dict[int, list[tuple[float, int]]] = {}
    tiered: dict[int, list[tuple[float, int]]] = {}
    procedures = False
    hydrated: dict[int, Row] = {}
    for source, position, pk, value, *columns_read in rows:
        if source == -2:
            hydrated[pk] = _row(pk, columns_read)
        elif source == -1:
            procedures = True
        elif source == 0:
            slices.setdefault(position, []).append((value, pk))
        else:
            tiered.setdefault(source, []).append((value, pk))
    about = [
        pk
        for position in sorted(slices)
        for _, pk in sorted(slices[position], key=lambda row: (-row[0], -row[1]))
    ]
    return Found(about, _widened(tiered, limit), procedures, hydrated)


def _tier_ctes(
    tiers: list[str], where: str, where_params: list, limit: int, memory: int, walks: list[bool]
):
    """The CTEs t0, t1 … ranking each tier's newest matches (id, rank): a looser tier runs
    only while the stricter ones found fewer than ENOUGH, decided inside the statement. The
    SQL of ``text_matches`` for one statement; returns the CTEs and their parameters.

    A tier that walks (``_walking``) looks for its newest matches among the memory's newest
    WALK live facts first, read from the index that holds their words (``fact_words``), and
    through the full-text index below them only when it found fewer there: the matches among
    those facts are all newer than any below, so the matches are the same."""
    ctes: list[str] = []
    params: list[Any] = []
    enough = min(limit, ENOUGH)
    beyond = False
    for index, (tier, walk) in enumerate(zip(tiers, walks, strict=True)):
        before = [f"SELECT id FROM t{j}" for j in range(index)]
        earlier = ""
        if before:
            union = " UNION ALL ".join(before)
            earlier = (
                f" AND knowledge_fact.id NOT IN ({union})"
                f" AND (SELECT count(*) FROM ({union}) AS found) < {enough}"
            )
        matching = f"""WHERE {where}
                  AND knowledge_fact.search_vector @@ to_tsquery('english'::regconfig, %s)
                  {earlier}"""
        newest = f"ORDER BY knowledge_fact.id DESC LIMIT {TEXT_CANDIDATES}"
        columns = "knowledge_fact.id, knowledge_fact.search_vector"
        if not walk:
            source = f"SELECT {columns} FROM knowledge_fact {matching} {newest}"
            source_params: list[Any] = [*where_params, tier]
        else:
            if not beyond:  # one for every tier that walks
                ctes.append(f"beyond AS ({_BEYOND_WALK_SQL.format(walk=int(WALK))})")
                params.append(memory)
                beyond = True
            recent = _WALK_SQL.format(walk=int(WALK))
            ctes.append(f"""t{index}walk AS MATERIALIZED (
                SELECT {columns} FROM ({recent}) AS knowledge_fact {matching} {newest})""")
            # Come back short, the walk holds every match among the facts it walked, so any
            # other is older than its oldest (than any fact, when it found none): reading the
            # walked facts again for their oldest id cost 2.4 ms at 100k. A walk that read the
            # whole memory leaves nothing below: asking the full-text index anyway read every
            # match of every memory in the table (5.5 ms for a 10k memory beside a 100k one).
            ctes.append(f"""t{index}below AS (
                SELECT {columns} FROM knowledge_fact {matching}
                  AND (SELECT count(*) FROM t{index}walk) < {TEXT_CANDIDATES}
                  AND (SELECT older FROM beyond)
                  AND knowledge_fact.id < coalesce((SELECT min(id) FROM t{index}walk), {NO_ID})
                {newest})""")
            params += [memory, *where_params, tier, *where_params, tier]
            source = (
                f"SELECT * FROM t{index}walk UNION ALL SELECT * FROM t{index}below "
                f"ORDER BY id DESC LIMIT {TEXT_CANDIDATES}"
            )
            source_params = []
        ctes.append(f"""t{index} AS (
            SELECT c.id, ts_rank(c.search_vector, to_tsquery('english'::regconfig, %s)) AS rank
            FROM ({source}) AS c
            ORDER BY rank DESC, c.id DESC LIMIT {int(limit)})""")
        params += [tier, *source_params]
    return ctes, params


# The memory's newest WALK live facts, from the index ``fact_words`` alone (migration 0022),
# with every column ``live()`` and the read rule (knowledge/read_rule.py) test: the tier's own
# WHERE clause runs on these rows. A rule that tests another column needs it here and in the
# index (the tests that make every tier walk fail without it).
_WALKED_ROWS_SQL = """FROM knowledge_fact
    WHERE memory_id = %s AND status IN ('queued', 'filed') AND valid_to IS NULL
      AND NOT subject_removed"""
_WALK_SQL = f"""SELECT id, memory_id, status, valid_to, subject_removed, expires_at,
    label_sets, set_mask, newest_set, search_vector {_WALKED_ROWS_SQL}
    ORDER BY id DESC LIMIT {{walk}}"""
# Whether the memory holds more such facts than a walk reads (from ``fact_live_count`` alone).
_BEYOND_WALK_SQL = f"SELECT EXISTS (SELECT 1 {_WALKED_ROWS_SQL} OFFSET {{walk}}) AS older"


def _widened(tiered: dict[int, list[tuple[float, int]]], limit: int) -> list[int]:
    """The full-text ranking from each tier's (rank, id) rows, keyed by tier from 1: the same
    widening as ``text_matches``, over what came back."""
    text: list[int] = []
    for source in sorted(tiered):
        ranked = sorted(tiered[source], key=lambda row: (-row[0], -row[1]))
        text += [pk for _, pk in ranked][: limit - len(text)]
        if len(text) >= min(limit, ENOUGH):
            break
    return text


def nearest_rows(
    memory: Memory,
    embedding: list[float] | None,
    *,
    limit: int,
    readable,
    known: dict[int, Row],
) -> tuple[list[int], dict[int, Row]]:
    """In one statement: ``nearest(memory, embedding, limit=limit)`` (ids only, nearest
    first; nothing without an embedding) and, with the ``known`` rows (read by
    ``candidates``, so readable), the rows of the neighbours ``readable`` reads."""
    rule = readable_where(readable)
    if embedding is None or rule is None:
        return [], dict(known)
    where, where_params = rule
    name = embedder_for(memory).name
    vector = _vector_literal(embedding)
    sql = f"""
        {_HNSW_SETTINGS}
        WITH near AS (
            SELECT f.id, f.embedding <=> %s::vector AS distance FROM knowledge_fact f
            WHERE {_LIVE_POSITIONAL}
            ORDER BY f.embedding <=> %s::vector LIMIT {int(limit)}
        ), arrived AS (SELECT id, distance, row_number() OVER () AS arrival FROM near)
        SELECT 0, id, distance, arrival, {_NO_ROW_SQL} FROM arrived
        UNION ALL
        SELECT 1, knowledge_fact.id, NULL::float8, NULL::bigint, {_ROW_SQL}
        FROM knowledge_fact
        WHERE knowledge_fact.id IN (SELECT id FROM arrived)
          AND knowledge_fact.id <> ALL(%s::bigint[]) AND {where}
    """
    params = [vector, memory.pk, timezone.now(), name, vector, name, list(known), *where_params]
    fetched = _rows_after_settings(sql, params)
    near, rows = [], dict(known)
    for kind, pk, distance, arrival, *columns in fetched:
        if kind == 0:
            near.append((float(distance), arrival, pk))
        else:
            rows[pk] = _row(pk, columns)
    near.sort()  # relaxed order: sort what came back, ties in the order they arrived
    return [pk for _, _, pk in near], rows


# The write gate's neighbours, in one round trip ----------------------------------------------

# A fact's row as the gate reads it (all but its vectors, as ``without_vectors``), in one
# branch of the neighbours' UNION ALL; the other branches leave those columns NULL, typed by
# this branch, which comes first.
_GATE_FIELDS = [
    f for f in Fact._meta.concrete_fields if f.attname not in ("embedding", "search_vector")
]
_GATE_NAMES = [f.attname for f in _GATE_FIELDS]
_GATE_ROW_SQL = ", ".join(f'knowledge_fact."{f.column}"' for f in _GATE_FIELDS)
_NO_GATE_ROW_SQL = ", ".join("NULL" for _ in _GATE_FIELDS)


def neighbours(
    memory: Memory, live, *, text: str, embedding: list[float] | None, limit: int
) -> list[tuple[Fact, float | None]]:
    """The facts of ``live`` (a queryset or its ``readable_where``) near ``text``, in one
    statement: those written the same (``normalized``, oldest first), those sharing the most
    words (``text_matches``) and the vector neighbours (``nearest``, nearest first), each
    once in that order, with the cosine of its vector to ``embedding`` (None without one, or
    for a vector of another embedder: not comparable). Each comes as a model instance without
    its vectors, read in the same statement. What the gate read in nine round trips."""
    rule = readable_where(live)
    if rule is None:
        return []
    where, where_params = rule
    words = _words(text)
    tiers = _tiers(words)
    ctes, params = _tier_ctes(tiers, where, where_params, limit, memory.pk, _walking(words))
    ctes.append(f"""exact AS (
        SELECT knowledge_fact.id FROM knowledge_fact
        WHERE {where} AND knowledge_fact.normalized = %s
        ORDER BY knowledge_fact.id LIMIT {int(limit)})""")
    params += [*where_params, statements.normalise(text)]
    found = ["SELECT id FROM exact", *(f"SELECT id FROM t{index}" for index in range(len(tiers)))]
    selects = [
        f"SELECT 0, 0::bigint, id, NULL, {_NO_GATE_ROW_SQL} FROM exact",
        *(
            f"SELECT {index + 1}, 0::bigint, id, rank::float8, {_NO_GATE_ROW_SQL} FROM t{index}"
            for index in range(len(tiers))
        ),
    ]
    settings_sql, closeness, closeness_params, near_params = "", "NULL::float8", [], []
    if embedding is not None:
        name = embedder_for(memory).name
        vector = _vector_literal(embedding)
        settings_sql = _HNSW_SETTINGS
        ctes.append(f"""near AS (
            SELECT f.id, f.embedding <=> %s::vector AS distance FROM knowledge_fact f
            WHERE {_LIVE_POSITIONAL} ORDER BY f.embedding <=> %s::vector LIMIT {int(limit)})""")
        params += [vector, memory.pk, timezone.now(), name, vector]
        found.append("SELECT id FROM near")
        # The neighbours the read rule (expiry included) still reads, as ``live`` filters them.
        selects.append(
            f"SELECT -1, 0::bigint, knowledge_fact.id, near.distance, {_NO_GATE_ROW_SQL} "
            f"FROM near JOIN knowledge_fact ON knowledge_fact.id = near.id WHERE {where}"
        )
        near_params = where_params
        closeness = (
            "CASE WHEN knowledge_fact.embedder = %s AND knowledge_fact.embedding IS NOT NULL "
            "THEN 1 - (knowledge_fact.embedding <=> %s::vector) END"
        )
        closeness_params = [name, vector]
    ctes.append(f"found AS ({' UNION '.join(found)})")
    rows_sql = (
        f"SELECT -2, 0::bigint, knowledge_fact.id, {closeness}, {_GATE_ROW_SQL} "
        "FROM knowledge_fact WHERE knowledge_fact.id IN (SELECT id FROM found)"
    )
    sql = (
        settings_sql
        + "WITH "
        + ",\n".join(ctes)
        + "\n"
        + "\nUNION ALL\n".join([rows_sql, *selects])
    )
    rows = _rows_after_settings(sql, [*params, *closeness_params, *near_params])
    exact: list[int] = []
    near: list[tuple[float, int]] = []
    tiered: dict[int, list[tuple[float, int]]] = {}
    read: dict[int, tuple[Fact, float | None]] = {}
    for source, _, pk, value, *columns in rows:
        if source == -2:
            read[pk] = (Fact.from_db(connection.alias, _GATE_NAMES, columns), value)
        elif source == 0:
            exact.append(pk)
        elif source == -1:
            near.append((value, pk))
        else:
            tiered.setdefault(source, []).append((value, pk))
    ordered = dict.fromkeys(
        [*sorted(exact), *_widened(tiered, limit), *(pk for _, pk in sorted(near))]
    )
    return [read[pk] for pk in ordered]
