"""Finding facts by words (PostgreSQL full text) and by meaning (pgvector), planned by
selectivity so a filtered search never loses recall.

HNSW is approximate and filters after it walks the graph: restricted to a subject holding a few
percent of the rows it returns too few (measured: recall 0.73 at 2%). So a search restricted to
a subject with at most EXACT_SCAN_LIMIT live facts scans them exactly (an index on the
subject's facts, then a sort by distance); only wider searches use the HNSW index, with
iterative scanning on so filtered-out rows do not starve the result.
"""

from __future__ import annotations

import re
from itertools import combinations

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from knowledge import statements
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory

ENOUGH = 10  # full-text matches that stop the search widening to looser tiers
PAIRED_WORDS = 6  # the longest words of a question tried two at a time
EXACT_SCAN_LIMIT = 20_000  # live facts about one subject below which the scan is exact
HNSW_EF_SEARCH = 100  # candidates HNSW keeps per query: recall against speed

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


def _tiers(words: list[str]) -> list[str]:
    """Raw tsqueries from the most to the least demanding: every word, any two, any one.

    Matching any one word of a question matches a large share of a big memory, and ranking
    every match is what costs; the stricter tiers find the best matches among far fewer rows.
    """
    tiers = []
    if len(words) >= 2:
        tiers.append(" & ".join(words))
    pairing = sorted(words, key=len, reverse=True)[:PAIRED_WORDS]
    if len(pairing) >= 3:
        tiers.append(" | ".join(f"({a} & {b})" for a, b in combinations(pairing, 2)))
    tiers.append(" | ".join(words))
    return tiers


def text_matches(facts, text: str, limit: int) -> list[Fact]:
    """The facts of ``facts`` sharing the most words with ``text``, best first.

    Ranked over the stored ``search_vector`` (GIN index), widening tier by tier only while
    fewer than ``ENOUGH`` (or ``limit``) facts have been found.
    """
    words = _words(text)
    found: list[Fact] = []
    enough = min(limit, ENOUGH)
    for tier in _tiers(words):
        query = SearchQuery(tier, config="english", search_type="raw")
        more = list(
            facts.exclude(pk__in=[fact.pk for fact in found])
            .filter(search_vector=query)
            .annotate(rank=SearchRank(F("search_vector"), query))
            .order_by("-rank", "-pk")[: limit - len(found)]
        )
        found += more
        if len(found) >= enough:
            break
    return found


def _vector_literal(embedding: list[float]) -> str:
    return "[" + ",".join(f"{value:.6f}" for value in embedding) + "]"


def nearest(
    memory: Memory, embedding: list[float], *, limit: int, subject_id: int | None = None
) -> list[tuple[int, float]]:
    """The ids of the live facts nearest ``embedding`` (cosine distance), nearest first. Only
    vectors made by the current embedder are compared (see reembedding.py)."""
    params = {
        "memory": memory.pk,
        "now": timezone.now(),
        "q": _vector_literal(embedding),
        "limit": limit,
        "subject": subject_id,
        "embedder": get_embedder().name,
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


def _subject_size(subject_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM knowledge_fact_subjects WHERE subject_id = %s", [subject_id]
        )
        return cursor.fetchone()[0]
