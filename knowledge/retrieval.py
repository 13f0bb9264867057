"""Recall: the block of memory a run is given, and searches over what is known.

``context()`` fills a token budget with facts about the subjects in play first, then facts that
share words (full text) or meaning (vectors) with the question. One subject may take at most
SUBJECT_SHARE of the budget, so a chatty device cannot crowd out the rest. Failures are fitted
first, under their own heading, so under pressure the expensive lessons are the last dropped.
Each block is ordered as a V (best at the head and the tail, where a model reads best), each
line carries ``[id]`` for outcome reports, and the whole is wrapped in a nonce envelope.

Never included: the inbox, guesses, the change log, expired, forgotten or superseded facts,
facts about removed entities, or anything the reader may not read (``readable_by``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from knowledge import envelope, search
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Memory, Subject
from knowledge.subjects import mentioned_in, resolve

MIN_BUDGET = 50  # below this not one line and its envelope fit
MAX_BUDGET = 32_000
SUBJECT_SHARE = 0.4
PER_SOURCE = 40  # candidates read from each of: subjects, full text, vectors
RRF_K = 60  # reciprocal-rank fusion constant


class BadBudget(ValueError):
    pass


@dataclass
class Context:
    text: str
    fact_ids: list[int] = field(default_factory=list)
    nonce: str = ""
    tokens: int = 0


def tokens(text: str) -> int:
    """A model-free token estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


PROVEN_AFTER = 5  # successes at which a fact counts as fully proven in use
UTILITY_WEIGHT = 0.002  # in the fused ranking, about eight ranks between unproven and proven


def utility(fact: Fact) -> float:
    """How much a fact has earned its place: 0.7 × confidence + 0.3 × proven use (successes
    reported for it, up to PROVEN_AFTER). Repetition is not evidence: a fact said ten times
    and never acted on ranks below one that worked 9 times out of 9."""
    return 0.7 * fact.confidence + 0.3 * min(1.0, fact.successes / PROVEN_AFTER)


_AVOID = re.compile(r"^\s*avoid\b\s*:?\s*", re.IGNORECASE)


def _line(fact: Fact) -> str:
    observed = fact.successes + fact.failures
    if fact.valence == Fact.Valence.FAILURE:
        trust = "unverified" if not observed else f"conf {fact.confidence:.2f}"
        lesson = _AVOID.sub("", fact.text)  # taught as "Avoid: X": one label, not two
        return f"- [{fact.pk}] Avoid: {lesson}  ({trust}, n={fact.support})"
    return f"- [{fact.pk}] {fact.text}  (conf {fact.confidence:.2f}, n={fact.support})"


def v_order(items: list) -> list:
    """Best first and second best last, then inwards: the middle is where things get lost."""
    head, tail = [], []
    for index, item in enumerate(items):
        (head if index % 2 == 0 else tail).append(item)
    return head + tail[::-1]


def check_budget(token_budget: int) -> None:
    if not MIN_BUDGET <= token_budget <= MAX_BUDGET:
        raise BadBudget(
            f"token_budget must be between {MIN_BUDGET} and {MAX_BUDGET:,}; got {token_budget:,}."
        )


def ranked_facts(memory: Memory, *, question: str, subjects: list[Subject], reader) -> list[Fact]:
    """Every candidate, best first: the subjects' facts (by utility), then the question's
    (full-text and vector ranks fused)."""
    readable = Fact.objects.for_memory(memory).live().readable_by(reader).without_vectors()
    ordered: list[Fact] = []
    seen: set[int] = set()
    about: list[Fact] = []
    for subject in subjects:  # each subject its own slice, so one cannot take all the places
        about += readable.filter(subjects=subject).order_by("-confidence", "-pk")[:PER_SOURCE]
    for fact in sorted(about, key=utility, reverse=True):
        if fact.pk not in seen:
            ordered.append(fact)
            seen.add(fact.pk)
    if question.strip():
        scores: dict[int, float] = {}
        for rank, fact in enumerate(search.text_matches(readable.only("pk"), question, PER_SOURCE)):
            scores[fact.pk] = scores.get(fact.pk, 0) + 1 / (RRF_K + rank)
        embedding = get_embedder().embed_one(question)
        for rank, (pk, _distance) in enumerate(search.nearest(memory, embedding, limit=PER_SOURCE)):
            scores[pk] = scores.get(pk, 0) + 1 / (RRF_K + rank)
        wanted = [pk for pk in scores if pk not in seen]
        # The read rule applies to the vector hits here, through the one queryset method.
        found = readable.filter(pk__in=wanted).in_bulk()
        ordered += sorted(
            found.values(),
            key=lambda fact: scores[fact.pk] + UTILITY_WEIGHT * utility(fact),
            reverse=True,
        )
    return ordered


def subject_ids(facts: list[Fact]) -> dict[int, list[int]]:
    """Which subjects each fact is about, in one query (ids only: the share needs no more)."""
    about: dict[int, list[int]] = {fact.pk: [] for fact in facts}
    links = Fact.subjects.through.objects.filter(fact_id__in=list(about))
    for fact_id, subject_id in links.values_list("fact_id", "subject_id"):
        about[fact_id].append(subject_id)
    return about


def context(
    *, memory: Memory, question: str = "", subjects: list = (), reader=None, token_budget: int = 600
) -> Context:
    """The memory block for one prompt. Raises BadBudget, subjects.UnknownSubject."""
    check_budget(token_budget)
    if not memory.memory_injection:
        return Context("")
    in_play = resolve(memory, list(subjects))
    in_play += [s for s in mentioned_in(memory, question) if s not in in_play]
    candidates = ranked_facts(memory, question=question, subjects=in_play, reader=reader)
    about = subject_ids(candidates)
    nonce = envelope.new_nonce()
    overhead = tokens(
        envelope.wrap(
            "## What has gone wrong before\n## What I know", nonce=nonce, memory_slug=memory.slug
        )
    )
    left = token_budget - overhead
    share = max(1, int(token_budget * SUBJECT_SHARE))
    spent_on: dict[int, int] = {}
    chosen: dict[str, list[Fact]] = {Fact.Valence.FAILURE: [], Fact.Valence.FACT: []}
    # Failures are fitted first: under pressure they are the last thing dropped.
    for valence in (Fact.Valence.FAILURE, Fact.Valence.FACT):
        for fact in candidates:
            if fact.valence != valence:
                continue
            cost = tokens(_line(fact)) + 1
            fact_subjects = about[fact.pk]
            if cost > left or any(spent_on.get(pk, 0) + cost > share for pk in fact_subjects):
                continue
            chosen[valence].append(fact)
            left -= cost
            for pk in fact_subjects:
                spent_on[pk] = spent_on.get(pk, 0) + cost
    if not any(chosen.values()):
        return Context("", nonce=nonce)
    blocks = []
    if chosen[Fact.Valence.FAILURE]:
        lines = [_line(f) for f in v_order(chosen[Fact.Valence.FAILURE])]
        blocks.append("## What has gone wrong before\n" + "\n".join(lines))
    if chosen[Fact.Valence.FACT]:
        lines = [_line(f) for f in v_order(chosen[Fact.Valence.FACT])]
        blocks.append("## What I know\n" + "\n".join(lines))
    text = envelope.wrap("\n\n".join(blocks), nonce=nonce, memory_slug=memory.slug)
    ids = [f.pk for f in chosen[Fact.Valence.FAILURE] + chosen[Fact.Valence.FACT]]
    return Context(text, ids, nonce, tokens(text))


def retrieve(*, memory: Memory, question: str, reader=None, k: int = 3) -> list[Fact]:
    """The k best facts for a question (the agent's search), best first."""
    return ranked_facts(
        memory, question=question, subjects=mentioned_in(memory, question), reader=reader
    )[:k]
