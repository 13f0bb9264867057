"""Search across passages: the words of a question found in the passages a reader may read, best
first, each with its source and a link to the source view at that passage (the Sources tab's
search box and ``GET /api/passages/?q=``).

The rules:

- Only passages ``reader`` may read (``Passage.objects.readable_by``, the one read rule): a
  masked passage is never matched, counted or quoted, and a snippet is cut from the matching
  passage's own text only.
- The words are PostgreSQL full text over the stored ``Passage.search_vector`` (GIN index), with
  the words worth searching for as the facts' search takes them (``knowledge.search``: stop words
  dropped): a passage holding any of them matches, ranked by how well it matches (every word
  beats some), newer first among equals. A question of stop words alone finds nothing.
- At most MAX_QUERY_CHARS characters of question (the Sources filter's own limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank
from django.core.exceptions import ValidationError
from django.db.models import F, QuerySet
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge import search
from knowledge.models import Memory, Passage
from knowledge.source_listing import MAX_SEARCH_CHARS as MAX_QUERY_CHARS

# ts_headline marks the matched words with these; they cannot occur in cleaned text, so the
# snippet is escaped first and only then are they made <mark>.
_START, _STOP = "\x02", "\x03"
SNIPPET_WORDS = (12, 30)  # ts_headline's MinWords, MaxWords: a line or two around the match


def clean_query(q: str) -> str:
    """``q`` with its spaces evened out, or ValidationError naming the limit."""
    q = " ".join((q or "").split())
    if len(q) > MAX_QUERY_CHARS:
        raise ValidationError(f"Search for at most {MAX_QUERY_CHARS} characters.")
    return q


def _query(q: str) -> SearchQuery | None:
    words = search._words(q)
    if not words:
        return None
    # The loosest of the facts' tiers: any one word. Ranking puts passages holding more of
    # them first, so one ordered list serves every page of results.
    return SearchQuery(search._tiers(words)[-1], config="english", search_type="raw")


def matching(memory: Memory, reader, q: str) -> QuerySet[Passage]:
    """The passages of ``memory`` that ``reader`` may read holding words of ``q``, best first,
    each with its source, ``rank`` and ``snippet`` (the text around the words, marked with
    _START/_STOP: see ``snippet_html``)."""
    query = _query(q)
    if query is None:
        return Passage.objects.none()
    min_words, max_words = SNIPPET_WORDS
    return (
        Passage.objects.for_memory(memory)
        .readable_by(reader)
        .filter(search_vector=query)
        .select_related("source")
        .annotate(
            rank=SearchRank(F("search_vector"), query),
            snippet=SearchHeadline(
                "text",
                query,
                config="english",
                start_sel=_START,
                stop_sel=_STOP,
                min_words=min_words,
                max_words=max_words,
            ),
        )
        .order_by("-rank", "-pk")
    )


def snippet_html(snippet: str) -> SafeString:
    """A snippet for a page: escaped, the matched words in <mark>."""
    return mark_safe(escape(snippet).replace(_START, "<mark>").replace(_STOP, "</mark>"))


def snippet_text(snippet: str) -> str:
    return snippet.replace(_START, "").replace(_STOP, "")


def link(passage: Passage) -> str:
    """The source view at ``passage``."""
    return reverse("knowledge:source", args=[passage.source_id]) + f"#passage-{passage.ordinal}"


@dataclass(frozen=True)
class Hit:
    """One passage found, as the Sources tab shows it."""

    passage: Passage

    @property
    def source_title(self) -> str:
        return self.passage.source.title

    @property
    def snippet(self) -> SafeString:
        return snippet_html(getattr(self.passage, "snippet", None) or self.passage.text)

    @property
    def url(self) -> str:
        return link(self.passage)
