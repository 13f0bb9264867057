"""How common a word is among the facts: PostgreSQL's own statistics of the ``search_vector``
column, which ANALYZE (autovacuum's, or the benchmark's) keeps for a tsvector column: its most
common lexemes and the share of rows holding each.

Full text (``knowledge.search``) asks this to choose how a tier of a question's words finds its
newest matches: a tier whose words most facts hold is walked newest first, one whose words few
hold goes through the full-text index. The choice changes only how long a search takes, never
what it finds, so a figure a little stale or a little off is harmless: the statistics are read
once every KEPT_S per process, and a word's lexeme (the stem the column holds: "parcels" →
"parcel") is asked of PostgreSQL once per process, for the words not already known.
"""

from __future__ import annotations

import threading
import time

from django.db import connection

KEPT_S = 600.0  # seconds a process keeps the statistics: ANALYZE itself runs far less often
KEPT_WORDS = 50_000  # lexemes of words kept per process (about 5 MB at most), then forgotten

_STATISTICS_SQL = """
    SELECT (SELECT reltuples FROM pg_class WHERE oid = 'knowledge_fact'::regclass),
           s.most_common_elems::text::text[], s.most_common_elem_freqs
    FROM (SELECT 1) AS one
    LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = 'knowledge_fact'
                         AND s.attname = 'search_vector'
"""
# A word's lexeme as the column holds it (the facts' search_vector is English), or '' for a
# stop word.
_LEXEMES_SQL = """
    SELECT word, coalesce((SELECT min(lexeme) FROM unnest(to_tsvector('english'::regconfig, word))),
                          '')
    FROM unnest(%s::text[]) AS word
"""

_lock = threading.Lock()
_statistics: tuple[float, float, dict[str, float]] | None = None  # read at, rows, shares
_lexemes: dict[str, str] = {}


def _read_statistics() -> tuple[float, dict[str, float]]:
    global _statistics
    now = time.monotonic()
    kept = _statistics
    if kept is not None and now - kept[0] < KEPT_S:
        return kept[1], kept[2]
    with connection.cursor() as cursor:
        cursor.execute(_STATISTICS_SQL)
        rows, lexemes, shares = cursor.fetchone()
    common = dict(zip(lexemes or [], shares or [], strict=False))
    kept = (now, max(float(rows or 0), 0.0), common)
    with _lock:
        _statistics = kept
    return kept[1], kept[2]


def shares(words: list[str]) -> tuple[float, dict[str, float | None]]:
    """The rows of the facts table (all memories: its full-text index is one for all) and, for
    each of ``words``, the share of them whose text holds it: 0 for a word too rare to be among
    the most common, None for a stop word (a query leaves it out)."""
    rows, common = _read_statistics()
    known = lexemes(words)
    return rows, {word: None if not known[word] else common.get(known[word], 0.0) for word in words}


def lexemes(words: list[str]) -> dict[str, str]:
    """Each of ``words`` as the facts' ``search_vector`` holds it ("batteries" → "batteri"), or
    '' for a stop word: asked of PostgreSQL once per process per word, so recall ranks a
    question's words against the facts' lexemes with the column's own stemming."""
    unknown = [word for word in words if word not in _lexemes]
    if unknown:
        with connection.cursor() as cursor:
            cursor.execute(_LEXEMES_SQL, [unknown])
            found: dict[str, str] = dict(cursor.fetchall())
        with _lock:
            if len(_lexemes) + len(found) > KEPT_WORDS:
                _lexemes.clear()
            _lexemes.update(found)
        return {word: _lexemes.get(word) or found.get(word) or "" for word in words}
    return {word: _lexemes.get(word) or "" for word in words}


def forget() -> None:
    """Read the statistics and the words' lexemes again on the next call (tests, after an
    ANALYZE)."""
    global _statistics
    with _lock:
        _statistics = None
        _lexemes.clear()
