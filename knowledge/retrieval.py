"""Recall: the block of memory a run is given, and searches over what is known.

One ranking (``rank``) serves every surface: ``context()`` (the block a run is given, MCP's
``memory_context``, ``POST /api/context``, the SessionStart hook), ``retrieve()`` (the agent's
search, MCP's ``memory_search``, ``POST /api/agent/retrieve``), the ask bar
(``memory/ask.py``) and study sessions (``memory/study.py``). Relevance decides what is
recalled; subjects, outcomes and recency only adjust the order:

- Candidates: the slice of each subject in play (named in the question, given by the caller,
  the reader's own page), the full-text tiers of the question's words and its vector
  neighbours, each at most PER_SOURCE.
- Relevance (``scored``), in [0, 1]: the words' evidence (BM25 over the candidates, with IDF,
  as a share of a full match) and the meaning's (the cosine read through the embedder's span)
  joined so that either may carry a line alone and both together more: a list that is sure
  of a line (every word of the question, or a near paraphrase) is heard whatever the other
  says. The words that name a subject are not evidence: a subject's lines are ranked by the
  rest of the question, so naming Ollie narrows and boosts and never fills the block with
  Ollie's newest lines.
- The floor: a line below RELEVANCE_FLOOR is not recalled — not in the block, not a failure
  under "What has gone wrong before", not the ask bar's line; with none above it the ask bar
  says brain does not know.
- The order: relevance, then SUBJECT_BOOST for each subject in play a line is about and
  UTILITY_WEIGHT × ``utility`` (proven use); ties go to the newer line.
- The block (``_fitted``): the relevant lines in that order until the budget is spent. One
  subject may take SUBJECT_SHARE of the budget while lines as relevant as its own (within TIE)
  wait: a line its share holds back goes in before the first less relevant line, or at the
  end while room is left, so the share never drops a relevant line to keep a less relevant
  one and the block fills its budget while relevant lines remain. Failures are lines like any
  other, shown under their own heading. Each block is ordered as a V (best at the head and
  the tail, where a model reads best), each line carries ``[id]`` for outcome reports, and
  the whole is wrapped in a nonce envelope.

The memory's core (who the agent works for, standing rules) is loaded before anything else,
under its own heading, and counted against the budget. Procedures that match the question come
after the facts under their own heading (``[p<id>]`` lines, ranked by success like facts); they
are fitted before the facts, but may take at most PROCEDURE_SHARE of the budget: a way of doing
the task that worked is the most directly useful line an agent can get, and a quarter still
leaves most of the block to what is known.

Diversity (``_rerank``): the relevant lines are re-ranked by maximal marginal relevance, where
only a near-identical line (cosine of the embeddings at least NEAR_IDENTICAL, in the same
class) counts as redundant, so the relevance order stands everywhere else. ``retrieve`` returns
that order; ``context()`` does not spend a slot on a line nearly identical to one it already
holds.

What chose the weights (``bench/recall.py``, ``make bench``): 636 questions written by hand
over the demo household, a team's memory, a coding agent's memory and three two-person
conversations kept turn by turn (every turn a fact "Name (date): words", each speaker with a
page), each with its answering facts marked or none; MiniLM vectors; weights chosen on two
thirds of them for the sum of the block's recall@10 and MRR, the share of questions whose ask
bar's first line answers and the share of those with no answer it says it does not know. What
each part bought, on all of them, with pages:

- Either-may-carry (1 - (1 - 0.7 × words) × (1 - meaning)) with one floor for block and ask
  bar alike (0.575): recall@10 0.846, against BM25 0.870 and dense-only 0.920, the ask bar
  answering 0.730 and knowing it does not know 0.618. The floor had to sit high for the ask
  bar, and cut relevant lines out of the block: 5.9 lines on average in the conversations'
  600-token blocks, their recall@10 0.701 against dense-only 0.765.
- Two floors, the block's (0.2: below it an unrelated failure, small talk) under the ask
  bar's, and half the names' part taken out of the question's vector: recall@10 0.929, the
  ask bar 0.700 and 0.803 (its floor at 0.65). Taking out the names' part (NAME_WEIGHT,
  explored at 0, 0.5 and 1) moved the conversations' recall@10 before any floor from 0.805 to
  0.837, and there, where every line holds a name, the ask bar knows it does not know 0.476 of
  the time with pages against 0.190 without.
- Replies (REPLY_SHARE 0.5 of a line that answers, within ten minutes): the conversations'
  recall@10 0.832 → 0.869 (dense-only 0.765), every other set unchanged.
- The words that named a subject count 0.15 of a word of the rest (NAME_WORDS_WEIGHT: 0 at
  first), a question of names alone compares lines with the question's whole vector and finds
  every line about them relevant at least to the ask bar's floor: recall@10 0.944 → 0.950, the
  demo household's with pages 0.972 → 0.992 ("Which light is the beacon?", "How will Grandma
  Jean know someone is at the door?"), the ask bar's floor at 0.65 answering 0.716 and knowing
  it does not know 0.803. Below that floor the ask bar shows the nearest lines it has as just
  that ("where are the spare batteries": the drawer of AA cells, 0.634).
- The cosine spans: MiniLM's 0.25-0.8 (0.3 kept fewer answers above the ask bar's floor, 0.2
  let more questions with no answer through); the hash embedder's 0.2-0.7 on the same
  questions with its own vectors (its unrelated sentences reach a cosine of 0.3); spans of
  their own for a question of one or two words (``SHORT_COSINE_SPANS``).
- SUBJECT_BOOST and UTILITY_WEIGHT change the order of near-equal lines only: 0.05 a subject,
  and 0.1 × utility so a line proven 9 times in 9 leads one said ten times and never acted on.

The section ``make bench`` writes shows the chosen weights beside each neighbour, and the
held-out third.

Never included: the inbox, guesses, the change log, expired, forgotten or superseded facts,
facts about removed entities, or anything the reader may not read (``readable_by``).

Two paths give the same ranking and block, line for line (``knowledge/tests/test_fast_paths.py``
holds them to it on 500 generated questions): both score with ``scored`` and fit with
``_block``; they differ only in how the candidates' rows are read. ``plain_rank`` (and
``plain_context``) is the reference: a query per subject, per full-text tier, for the vectors,
the rows, their subjects and their vectors, each through the ORM, and the question embedded
before any of them. ``rank`` (behind ``context``, ``retrieve``, the ask bar and study) is what
every surface calls. Measured at 100k live facts (benchmark
household), almost all of the plain path's time was fixed cost per call rather than growth
with the memory: ranking every full-text match, slices sorted after walking the wrong index,
the MiniLM question embedding, parsing 80 vectors from text for diversity, three empty
procedure searches and a dozen round trips. So ``context``:

- embeds the question on a thread of its own while its first statements run, and keeps the
  vectors of recent questions (``embedding.question_vector_soon``); a memory whose vectors
  come from a worker asks it first, in the caller's thread (the gateway writes rows on the
  caller's connection), for at most ``embedding.QUESTION_TIMEOUT_S``, and without an answer
  recalls by subjects and words only, as over facts that have no vectors;
- finds the subjects' slices, the full-text tiers, whether there are procedures and the row,
  subjects and vector (binary) of every fact they found in one statement, sent while the
  question is still being embedded (``search.candidates``), and in a second, which needs the
  question's vector, only the vector neighbours and the rows of those not read already
  (``search.nearest_rows``);
- compiles the read rule once for both (``search.readable_where``);
- reads rows, not model instances, and searches procedures only in a memory that has some.

Tried at 10k and not kept (the benchmark household, this machine's two cores):

- The neighbour search on the embedding thread's own database connection, beside the
  candidates, made ``context`` slower (9.6–10.3 ms against 8.6–9.7): the model, two server
  processes and the caller contended for two cores, the model took 5.2 ms instead of 3.7, and
  handing the work to the thread cost 0.4 ms.
- A per-channel int8 quantisation of the model for facts and questions alike (onnxruntime's
  ``quantize_dynamic`` over the folded weights) embedded a question in 1.7 ms instead of 3.6,
  but moved vectors by up to 0.01 in cosine, and the gate's labelled pairs with them: "same"
  recall 0.741 → 0.722, accuracy 0.904 → 0.900. Questions alone are now embedded in 8 bits
  per block of 32 weights (lowest cosine to the float vector 0.9995 instead of 0.987), facts
  (what the gate compares) in float: ``knowledge.question_model``.
"""

from __future__ import annotations

import calendar
import heapq
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import BinaryField, F, Func

from brain import llm
from knowledge import envelope, passage_search, search, word_stats
from knowledge.embedding import (
    QUESTION_TIMEOUT_S,
    embed_question,
    embedder_for,
    question_vector_soon,
)
from knowledge.models import Fact, Memory, Passage, Procedure
from knowledge.subjects import Named, question_subjects, resolve

MIN_BUDGET = 50  # below this not one line and its envelope fit
MAX_BUDGET = 32_000
SUBJECT_SHARE = 0.4
PER_SOURCE = 40  # candidates read from each of: subjects, full text, vectors
PROCEDURE_SHARE = 0.25  # of the budget, at most, for procedures (see the module docstring)
PROCEDURES_READ = 20  # procedures matching a question that are ranked for a block
# Cosine at or above which two lines say nearly the same words. Measured on pairs that differ
# by a word ("… at 03:00." / "… at 03:00 UTC."): 0.98 with the hash embedder, 0.99 with MiniLM;
# templated lines about different things ("reading 1 was logged…" / "reading 2 …") reach 0.93
# and 0.95, and paraphrases 0.93 (MiniLM): those stay, as the gate keeps them apart too.
NEAR_IDENTICAL = 0.97
MMR_LAMBDA = 0.5  # relevance against redundancy: a near-identical line drops about half the list
MMR_WINDOW = 80  # candidates re-ranked; a 600-token block holds about 25 lines

# The ranking (see the module docstring for what chose each figure).
BM25_K1 = 1.2  # term-frequency saturation: BM25's usual value
BM25_B = 0.75  # length normalisation: BM25's usual value
POOL_AT_LEAST = 50  # the candidates counted as at least this many documents for the IDF
# Relevance: how much of the question a line's words hold (BM25's share of a full match, 0..1)
# and how close its meaning is (the cosine read through the embedder's span, 0..1), combined as
# two pieces of evidence, either of which may carry a line alone: 1 - (1 - 0.7 × words) ×
# (1 - 1.0 × meaning). A line holding every word scores 0.7 on its words alone.
WORDS_WEIGHT = 0.7
MEANING_WEIGHT = 1.0
# Cosines of a question's vector to a line's, per embedder, read as no evidence at the first
# figure and as full evidence at the second (linearly between).
COSINE_SPANS = {"minilm-int8-v1": (0.25, 0.8), "hash-ngram-v1": (0.2, 0.7)}
COSINE_SPAN = (0.25, 0.8)  # any other embedder (a worker's model): MiniLM's
# A question of one or two words, a topic rather than a sentence ("energy", "the dog": what a
# study is asked for, a word typed in the ask bar), is far from every sentence, even those about
# it (MiniLM: 0.14-0.6 for the lines about ten labelled topics, 0.1-0.25 for the rest), so its
# cosines are read on spans of their own (fitted on those topics: ``bench/recall.py``).
SHORT_QUESTION_WORDS = 2
SHORT_COSINE_SPANS = {"minilm-int8-v1": (0.15, 0.3), "hash-ngram-v1": (0.2, 0.7)}
SHORT_COSINE_SPAN = (0.15, 0.3)
# A line below RELEVANCE_FLOOR is not recalled: not in the block, not a failure under its
# heading, not a line retrieve() returns. The ask bar speaks for brain rather than handing a
# reader evidence to weigh, so it answers only from lines at ANSWER_FLOOR and above, and below
# it says brain doesn't know that yet.
RELEVANCE_FLOOR = 0.2
ANSWER_FLOOR = 0.65
# Of the question's vector, the share along its subjects' names taken out (``_meaning``); and
# what a word that named a subject counts for among the question's words (``_lexical``).
NAME_WEIGHT = 0.5
NAME_WORDS_WEIGHT = 0.15
# A reply carries half the relevance of what it replies to: the fact taught just before it,
# within ten minutes (``_replies``).
REPLY_SHARE = 0.5
REPLY_WINDOW_S = 600
SUBJECT_BOOST = 0.05  # a line about a subject in play, in the order only (never the floor)
UTILITY_WEIGHT = 0.1  # proven (utility 1) over unproven (0.42): 0.06, in the order only
TIE = 0.02  # relevance within which two lines count as equally relevant for a subject's share

CORE_HEADING = "## Core"
FAILURES_HEADING = "## What has gone wrong before"
FACTS_HEADING = "## What I know"
PROCEDURES_HEADING = "## How it was done before"

# Words that frame a question rather than say what it is about ("tell me about Ollie", "what
# did Tom say about the loft"): left out of the words a line is ranked by and searched for.
_ASKING = """tell know knows remember recall say said says saying mention mentioned talk talked
    brain anybody anyone somebody someone"""
ASKING_WORDS = frozenset(_ASKING.split())


class BadBudget(ValueError):
    pass


@dataclass
class Context:
    text: str
    fact_ids: list[int] = field(default_factory=list)
    nonce: str = ""
    tokens: int = 0
    procedure_ids: list[int] = field(default_factory=list)
    # The facts of the block best first (``fact_ids`` is in the block's order) and how
    # relevant each is to the question (RELEVANCE_FLOOR and above; 1.0 with no question).
    ranked: list[int] = field(default_factory=list)
    relevance: dict[int, float] = field(default_factory=dict)


def tokens(text: str) -> int:
    """A model-free token estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


PROVEN_AFTER = 5  # successes at which a fact counts as fully proven in use


def utility(fact: Fact | Procedure | search.Row) -> float:
    """How much a fact (or a procedure) has earned its place: 0.7 × confidence + 0.3 × proven
    use (successes reported for it, up to PROVEN_AFTER). Repetition is not evidence: a fact said
    ten times and never acted on ranks below one that worked 9 times out of 9."""
    return 0.7 * fact.confidence + 0.3 * min(1.0, fact.successes / PROVEN_AFTER)


_AVOID = re.compile(r"^\s*avoid\b\s*:?\s*", re.IGNORECASE)


def _line(fact: Fact | search.Row) -> str:
    observed = fact.successes + fact.failures
    if fact.valence == Fact.Valence.FAILURE:
        trust = "unverified" if not observed else f"conf {fact.confidence:.2f}"
        lesson = _AVOID.sub("", fact.text)  # taught as "Avoid: X": one label, not two
        return f"- [{fact.pk}] Avoid: {lesson}  ({trust}, n={fact.support})"
    return f"- [{fact.pk}] {fact.text}  (conf {fact.confidence:.2f}, n={fact.support})"


def _procedure_line(procedure: Procedure) -> str:
    tried = procedure.successes + procedure.failures
    score = (
        f"worked {procedure.successes} of {tried}, conf {procedure.confidence:.2f}"
        if tried
        else "not yet tried"
    )
    return f"- [p{procedure.pk}] {procedure.text}  ({score})"


def v_order(items: list) -> list:
    """Best first and second best last, then inwards: the middle is where things get lost."""
    head: list = []
    tail: list = []
    for index, item in enumerate(items):
        (head if index % 2 == 0 else tail).append(item)
    return head + tail[::-1]


def check_budget(token_budget: int) -> None:
    if not MIN_BUDGET <= token_budget <= MAX_BUDGET:
        raise BadBudget(
            f"token_budget must be between {MIN_BUDGET} and {MAX_BUDGET:,}; got {token_budget:,}."
        )


# What a question asks, and how relevant each line is to it ------------------------------------


@dataclass
class Asked:
    """A question as the ranking reads it.

    ``terms``: the lexemes of its words (``search._words`` less ASKING_WORDS and less the words
    that named a subject, stemmed as the facts' ``search_vector`` is): what the question asks
    about its subjects; ``named``: the subjects it names; ``boosted``: every subject in play
    (named, given, the reader's own page); ``vector``: its embedding (None without one);
    ``embedder``: whose cosines these are; ``text``: the words full text searches for (its
    words less the asking words, names included)."""

    question: str
    terms: frozenset[str]
    named: frozenset[int]
    boosted: frozenset[int]
    text: str = ""
    names: dict[int, str] = field(default_factory=dict)
    # The lexemes of the words that named subjects, each with the subjects it named: evidence
    # at NAME_WEIGHT, held by a line about that subject whether or not it spells the name.
    named_terms: dict[str, frozenset[int]] = field(default_factory=dict)
    vector: np.ndarray | None = None  # what lines are compared with (``_meaning``)
    embedding: list[float] | None = None  # the question's own, as the embedder gave it
    embedder: str = ""

    @property
    def asked(self) -> bool:
        return bool(self.question.strip())


def asking(memory: Memory, question: str, named: Named, given: list[int]) -> Asked:
    """The question's terms and subjects (see ``Asked``); its vector is set by the caller."""
    words = [word for word in search._words(question) if word not in ASKING_WORDS]
    lexemes = word_stats.lexemes(words) if words else {}
    naming = {word for label in named.words.values() for word in search._words(label)}
    terms = frozenset(lexemes[word] for word in words if word not in naming and lexemes[word])
    named_terms: dict[str, set[int]] = {}
    for pk, label in named.words.items():
        for word in search._words(label):
            if lexemes.get(word) and lexemes[word] not in terms:
                named_terms.setdefault(lexemes[word], set()).add(pk)
    boosted = {*given, *named.ids, *([named.own_page] if named.own_page else [])}
    return Asked(
        question,
        terms,
        frozenset(named.ids),
        frozenset(boosted),
        text=" ".join(words),
        names=dict(named.words),
        named_terms={term: frozenset(pks) for term, pks in named_terms.items()},
    )


@dataclass
class Scored:
    """A candidate line with how relevant it is to the question (``relevance``, in [0, 1])
    and its place in the ranking (``score``: relevance adjusted by subjects and use)."""

    row: search.Row
    relevance: float
    score: float

    @property
    def pk(self) -> int:
        return self.row.pk

    @property
    def valence(self) -> str:
        return self.row.valence


def _cosine_span(embedder: str, short: bool = False) -> tuple[float, float]:
    if short:
        return SHORT_COSINE_SPANS.get(embedder, SHORT_COSINE_SPAN)
    return COSINE_SPANS.get(embedder, COSINE_SPAN)


def scored(rows: list[search.Row], asked: Asked) -> list[Scored]:
    """Every candidate scored against the question, best first (ties to the newer line).

    Relevance joins two pieces of evidence, each as sure as its own score, so either may carry
    a line alone and both together more than either: 1 - (1 - WORDS_WEIGHT × words) ×
    (1 - MEANING_WEIGHT × meaning). Words: BM25 over the candidates (IDF from how many of them
    hold each term, the pool counted as at least POOL_AT_LEAST) of the question's terms,
    divided by what a line holding every term once at the average length scores, so 1 is
    "holds all of it" whatever the question. The words that name a subject are not terms: a
    subject's lines are ranked by the rest of the question, and a question of names alone
    ("tell me about Ollie") finds every line about them relevant (1.0). Meaning: the cosine of
    the vectors read through the embedder's COSINE_SPANS, the question's vector less
    NAME_WEIGHT of its names' part (``_meaning``; 0 for a line with no vector, or a question
    without one). A reply carries part of what it replies to (``_replies``). With no question
    every line is relevant (1.0).

    The score adds SUBJECT_BOOST for each subject in play a line is about (two at most) and
    UTILITY_WEIGHT × ``utility``: the order, never relevance (the floor reads relevance)."""
    if not rows:
        return []
    if not asked.asked:
        return sorted(
            (Scored(row, 1.0, utility(row)) for row in rows),
            key=lambda line: (line.score, line.pk),
            reverse=True,
        )
    lexical = _lexical(rows, asked) if asked.terms or asked.named_terms else None
    semantic = _semantic(rows, asked) if asked.vector is not None else None
    names_only = not asked.terms and bool(asked.named)
    lines = []
    for index, row in enumerate(rows):
        words = lexical[index] if lexical is not None else None
        meaning = semantic[index] if semantic is not None and row.vector is not None else None
        relevance = 1 - (1 - WORDS_WEIGHT * (words or 0.0)) * (
            1 - MEANING_WEIGHT * (meaning or 0.0)
        )
        if names_only and asked.named.intersection(row.subject_ids):
            relevance = max(relevance, ANSWER_FLOOR)  # what was asked about: every line of it
        lines.append(Scored(row, relevance, 0.0))
    _replies(lines)
    for line in lines:
        about = asked.boosted.intersection(line.row.subject_ids)
        boost = SUBJECT_BOOST * min(2, len(about))
        line.score = line.relevance + boost + UTILITY_WEIGHT * utility(line.row)
    return sorted(lines, key=lambda line: (line.score, line.pk), reverse=True)


def _replies(lines: list[Scored]) -> None:
    """A line taught just after a line that answers the question (its own relevance
    ANSWER_FLOOR and above) and within REPLY_WINDOW_S of it is relevant at least REPLY_SHARE of
    it: in a conversation kept turn by turn the answer is often the reply to the turn the
    question's words are in ("What will your dissertation be on?" — "Harbour porpoise
    acoustics…"). Just after: the next fact taught (the next id): a line that answers is among
    the candidates, so is the line before any reply that inherits from it, and the reply needs
    no look-up of its own."""
    own = {line.pk: (line.relevance, line.row.taught) for line in lines}
    for line in lines:
        before = own.get(line.pk - 1)
        if before is None or before[0] < ANSWER_FLOOR:
            continue
        if 0 <= line.row.taught - before[1] <= REPLY_WINDOW_S:
            line.relevance = max(line.relevance, REPLY_SHARE * before[0])


def _lexical(rows: list[search.Row], asked: Asked) -> list[float]:
    """BM25 of each row over the rows, as a share of a full match (``scored``). A word that
    named a subject counts NAME_WORDS_WEIGHT of a word of the rest, and a line about that
    subject holds it."""
    weight = {term: 1.0 for term in asked.terms}
    weight.update({term: NAME_WORDS_WEIGHT for term in asked.named_terms if term not in weight})
    held = []
    for row in rows:
        counts = {term: row.lexemes[term] for term in weight if term in row.lexemes}
        about = set(row.subject_ids)
        for term, pks in asked.named_terms.items():
            if term not in counts and pks & about:
                counts[term] = 1
        held.append(counts)
    pool = max(len(rows), POOL_AT_LEAST)
    idf = {}
    for term in weight:
        holding = sum(1 for counts in held if term in counts)
        idf[term] = weight[term] * math.log(1 + (pool - holding + 0.5) / (holding + 0.5))
    full = sum(idf.values())
    lengths = [max(1, sum(row.lexemes.values())) for row in rows]
    average = sum(lengths) / len(lengths)
    found = []
    for counts, length in zip(held, lengths, strict=True):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        total = sum(
            idf[term] * count * (BM25_K1 + 1) / (count + norm) for term, count in counts.items()
        )
        found.append(min(1.0, total / full) if full > 0 else 0.0)
    return found


def _semantic(rows: list[search.Row], asked: Asked) -> list[float]:
    """Each row's cosine to the question read through the embedder's span (0 for a row with
    no vector: ``scored`` does not use it)."""
    assert asked.vector is not None  # asked only for a question with a vector (scored)
    short = len(re.findall(r"\w+", asked.question)) <= SHORT_QUESTION_WORDS
    low, high = _cosine_span(asked.embedder, short=short)
    question = asked.vector / max(float(np.linalg.norm(asked.vector)), 1e-12)
    found = [0.0] * len(rows)
    have = [index for index, row in enumerate(rows) if row.vector is not None]
    if have:
        matrix = np.stack([vector for row in rows if (vector := row.vector) is not None])
        cosines = (matrix @ question) / np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
        for index, value in zip(have, np.clip((cosines - low) / (high - low), 0.0, 1.0).tolist(),
                                strict=True):  # fmt: skip
            found[index] = value
    return found


@dataclass
class Ranking:
    """What one question recalls: the relevant lines best first (``lines``: RELEVANCE_FLOOR
    and above, every line with no question), the ids of those nearly identical to a line
    placed before them (``near_identical``), and the procedures that match."""

    lines: list[Scored]
    near_identical: set[int]
    procedures: list[Procedure]


def _ranking(rows: list[search.Row], asked: Asked, procedures: list[Procedure]) -> Ranking:
    # In one order whichever path read them: the arithmetic over the vectors (a matrix
    # product) then gives the same last bits, so ties between equal lines break alike.
    rows = sorted(rows, key=lambda row: row.pk)
    lines = [line for line in scored(rows, asked) if line.relevance >= RELEVANCE_FLOOR]
    vectors = {
        line.pk: line.row.vector for line in lines[:MMR_WINDOW] if line.row.vector is not None
    }
    lines, near_identical = _rerank(lines, vectors)
    return Ranking(lines, near_identical, procedures)


NAMES_KEPT = 4096  # the vectors of subjects' names kept per process (1.5 KB each)
_names: dict[tuple[str, str], np.ndarray] = {}
_names_lock = threading.Lock()


def _meaning(embedder, embedding: list[float] | None, asked: Asked) -> np.ndarray | None:
    """The question's vector with NAME_WEIGHT of what its subjects' names say taken out: the
    part of it along the names' own vectors (``Asked.names``, each embedded once per process).
    A name is in every line about its page, so it says nothing of which of them answers: "How
    old is Grandma Jean?" is close to every line about her, and without its name's part it is
    close only to a line about her age. Not for a worker's model (a call to the worker for each
    name): its vectors stay as they are."""
    if embedding is None:
        return None
    vector = np.asarray(embedding, dtype=np.float32)
    # A question of names alone asks about them: nothing else to compare the lines by.
    labels = sorted(set(asked.names.values())) if asked.terms else []
    if not labels or NAME_WEIGHT <= 0 or embedder.name.startswith("worker:"):
        return vector
    with _names_lock:
        kept = {
            label: _names[(embedder.name, label)]
            for label in labels
            if (embedder.name, label) in _names
        }
    missing = [label for label in labels if label not in kept]
    if missing:
        for label, made in zip(missing, embedder.embed(missing), strict=True):
            kept[label] = np.asarray(made, dtype=np.float64)
        with _names_lock:
            if len(_names) + len(missing) > NAMES_KEPT:
                _names.clear()
            _names.update({(embedder.name, label): kept[label] for label in missing})
    basis, _ = np.linalg.qr(np.stack([kept[label] for label in labels]).T)
    along = basis @ (basis.T @ vector.astype(np.float64))
    return (vector - NAME_WEIGHT * along).astype(np.float32)


def _question_vector(memory: Memory, question: str) -> list[float] | None:
    """The question's vector from the memory's embedder, or None when its worker gave none
    (recall then goes on by subjects and words, as over facts with no vectors)."""
    try:
        return embed_question(embedder_for(memory, timeout=QUESTION_TIMEOUT_S), question)
    except llm.LLMError:
        return None


def _vector_of(soon) -> list[float] | None:
    """What ``question_vector_soon`` computed; None for a worker that gave nothing."""
    if soon is None:
        return None
    try:
        return soon.result()
    except llm.LLMError:
        return None


def rank(
    *, memory: Memory, question: str, subjects: Sequence[Any] = (), reader, procedures: bool = True
) -> Ranking:
    """The one ranking behind ``context``, ``retrieve``, the ask bar, MCP and the agent API,
    in three round trips (the module docstring). Raises subjects.UnknownSubject."""
    rows, asked, any_procedures = candidates(
        memory=memory, question=question, subjects=subjects, reader=reader
    )
    chosen = procedures_for(memory, question) if procedures and any_procedures else []
    return _ranking(rows, asked, chosen)


def candidates(
    *, memory: Memory, question: str, subjects: Sequence[Any] = (), reader
) -> tuple[list[search.Row], Asked, bool]:
    """What ``rank`` ranks: every candidate line's row, the question as it is read, and
    whether the memory holds any procedure."""
    asked_now = bool(question.strip())
    embedder = embedder_for(memory, timeout=QUESTION_TIMEOUT_S)
    soon = question_vector_soon(embedder, question) if asked_now else None
    given = [subject.pk for subject in resolve(memory, list(subjects))]
    named = question_subjects(memory, question, reader)
    in_play = list(dict.fromkeys([*given, *named.ids, *filter(None, [named.own_page])]))
    asked = asking(memory, question, named, given)
    rule = search.readable_where(Fact.objects.for_memory(memory).live().readable_by(reader))
    found = search.candidates(
        memory,
        rule,
        subject_ids=in_play,
        question=asked.text if asked_now else "",
        limit=PER_SOURCE,
        hydrate=True,
    )
    embedding = _vector_of(soon)
    if found is None:  # nothing readable: only the core and procedures, as the plain path
        found = search.Found([], [], Procedure.objects.for_memory(memory).exists())
    near, rows = search.nearest_rows(
        memory, embedding, limit=PER_SOURCE, readable=rule, known=found.rows
    )
    pool = dict.fromkeys([*found.about, *found.text, *near])
    asked.embedding, asked.embedder = embedding, embedder.name
    asked.vector = _meaning(embedder, embedding, asked)
    return [rows[pk] for pk in pool if pk in rows], asked, found.procedures


def plain_rank(*, memory: Memory, question: str, subjects: Sequence[Any] = (), reader) -> Ranking:
    """``rank`` the plain way, a query for each part through the ORM: the reference the fast
    path is held to (``knowledge/tests/test_fast_paths.py``)."""
    embedder = embedder_for(memory, timeout=QUESTION_TIMEOUT_S)
    given = [subject.pk for subject in resolve(memory, list(subjects))]
    named = question_subjects(memory, question, reader)
    in_play = list(dict.fromkeys([*given, *named.ids, *filter(None, [named.own_page])]))
    asked = asking(memory, question, named, given)
    readable = Fact.objects.for_memory(memory).live().readable_by(reader).without_vectors()
    pool: list[int] = []
    for subject in in_play:  # each subject its own slice, so one cannot take all the places
        pool += (
            readable.filter(subjects=subject)
            .order_by("-confidence", "-pk")
            .values_list("pk", flat=True)[:PER_SOURCE]
        )
    if asked.asked:
        pool += [
            fact.pk for fact in search.text_matches(readable.only("pk"), asked.text, PER_SOURCE)
        ]
        embedding = _question_vector(memory, question)
        if embedding is not None:
            asked.embedding = embedding
            asked.vector = _meaning(embedder, embedding, asked)
            near = [pk for pk, _ in search.nearest(memory, embedding, limit=PER_SOURCE)]
            # The read rule applies to the vector hits here, through the one queryset method.
            pool += list(readable.filter(pk__in=near).values_list("pk", flat=True))
    asked.embedder = embedder.name
    rows = _plain_rows(readable, list(dict.fromkeys(pool)), embedder.name)
    return _ranking(rows, asked, procedures_for(memory, question))


def _plain_rows(readable, pks: list[int], embedder: str) -> list[search.Row]:
    """``search.Row``s of ``pks`` (in that order) through the ORM: fields, subjects and
    vectors."""
    fields = ["pk", "text", "valence", "confidence", "support", "successes", "failures"]
    values = {
        row["pk"]: row
        for row in readable.filter(pk__in=pks).values(
            *fields, "search_vector", "kind", "created_at"
        )
    }
    about: dict[int, list[int]] = {pk: [] for pk in values}
    links = Fact.subjects.through.objects.filter(fact_id__in=list(values)).order_by("pk")
    for fact_id, subject_id in links.values_list("fact_id", "subject_id"):
        about[fact_id].append(subject_id)
    vectors = dict(  # as the fast path reads them (vector_send): the same float4s, bit for bit
        readable.filter(pk__in=list(values), embedder=embedder)
        .exclude(embedding=None)
        .annotate(raw=Func(F("embedding"), function="vector_send", output_field=BinaryField()))
        .values_list("pk", "raw")
    )
    rows = []
    for pk in pks:
        if pk not in values:
            continue
        value = values[pk]
        vector = vectors.get(pk)
        rows.append(
            search.Row(
                **{name: value[name] for name in fields},
                subject_ids=about[pk],
                vector=search.vector_of(vector),
                lexemes=search.lexemes_of(value["search_vector"]),
                kind=value["kind"],
                taught=calendar.timegm(value["created_at"].utctimetuple()),
            )
        )
    return rows


# The block ------------------------------------------------------------------------------------


def context(
    *,
    memory: Memory,
    question: str = "",
    subjects: Sequence[Any] = (),
    reader,
    token_budget: int = 600,
) -> Context:
    """The memory block for one prompt, read as ``reader`` (a person, a ``Reader`` or
    ``read_layer.SYSTEM``). Raises BadBudget, subjects.UnknownSubject."""
    ranked = partial(rank, memory=memory, question=question, subjects=subjects, reader=reader)
    return _block(memory, token_budget, ranked)


def plain_context(*, memory: Memory, token_budget: int = 600, **asked: Any) -> Context:
    """``context`` the plain way (``plain_rank``): the reference the fast path is held to."""
    return _block(memory, token_budget, partial(plain_rank, memory=memory, **asked))


def _block(memory: Memory, token_budget: int, ranked: Callable[[], Ranking]) -> Context:
    """The block: the core, then procedures and the relevant lines fitted to the budget (none
    while the memory's injection is off, and the ranking is then never read)."""
    check_budget(token_budget)
    if not memory.memory_injection:
        return Context("")
    ranking = ranked()
    core = [line.strip() for line in memory.core.splitlines() if line.strip()]
    nonce = envelope.new_nonce()
    headings = [FAILURES_HEADING, FACTS_HEADING]
    headings += [CORE_HEADING] if core else []
    headings += [PROCEDURES_HEADING] if ranking.procedures else []
    overhead = tokens(envelope.wrap("\n".join(headings), nonce=nonce, memory_slug=memory.slug))
    left = token_budget - overhead
    # The core first, always, and within the budget like everything else.
    core_lines = []
    for line in core:
        cost = tokens(line) + 1
        if cost > left:
            break
        core_lines.append(line)
        left -= cost
    chosen_procedures = []
    allowance = min(left, int(token_budget * PROCEDURE_SHARE))
    for procedure in ranking.procedures:
        cost = tokens(_procedure_line(procedure)) + 1
        if cost <= allowance:
            chosen_procedures.append(procedure)
            allowance -= cost
            left -= cost
    chosen = _fitted(
        [line for line in ranking.lines if line.pk not in ranking.near_identical],
        left,
        max(1, int(token_budget * SUBJECT_SHARE)),
    )
    if not core_lines and not chosen_procedures and not chosen:
        return Context("", nonce=nonce)
    failures = [line.row for line in chosen if line.row.valence == Fact.Valence.FAILURE]
    facts = [line.row for line in chosen if line.row.valence != Fact.Valence.FAILURE]
    blocks = []
    if core_lines:
        blocks.append(CORE_HEADING + "\n" + "\n".join(core_lines))
    if failures:
        blocks.append(FAILURES_HEADING + "\n" + "\n".join(_line(f) for f in v_order(failures)))
    if facts:
        blocks.append(FACTS_HEADING + "\n" + "\n".join(_line(f) for f in v_order(facts)))
    if chosen_procedures:
        lines = [_procedure_line(p) for p in chosen_procedures]
        blocks.append(PROCEDURES_HEADING + "\n" + "\n".join(lines))
    text = envelope.wrap("\n\n".join(blocks), nonce=nonce, memory_slug=memory.slug)
    ids = [row.pk for row in v_order(failures) + v_order(facts)]
    return Context(
        text,
        ids,
        nonce,
        tokens(text),
        [p.pk for p in chosen_procedures],
        ranked=[line.pk for line in chosen],
        relevance={line.pk: line.relevance for line in chosen},
    )


def _fitted(lines: list[Scored], left: int, share: int) -> list[Scored]:
    """The lines that fit in ``left`` tokens, in the ranking's order, each subject taking at
    most ``share`` tokens while lines as relevant as its own (within TIE) remain: a line its
    subject's share holds back waits, and goes in before the first line less relevant than it,
    or at the end while room is left. So a subject's share keeps a chatty subject from
    crowding out other lines as relevant, and never drops a line to keep a less relevant one;
    and the block fills its budget while relevant lines remain."""
    chosen: list[Scored] = []
    spent_on: dict[int, int] = {}
    waiting: list[Scored] = []

    def place(line: Scored) -> None:
        nonlocal left
        cost = tokens(_line(line.row)) + 1
        if cost > left:
            return
        chosen.append(line)
        left -= cost
        for pk in line.row.subject_ids:
            spent_on[pk] = spent_on.get(pk, 0) + cost

    for line in lines:
        while waiting and waiting[0].relevance > line.relevance + TIE:
            place(waiting.pop(0))
        cost = tokens(_line(line.row)) + 1
        if any(spent_on.get(pk, 0) + cost > share for pk in line.row.subject_ids):
            waiting.append(line)
            continue
        place(line)
    for line in waiting:
        place(line)
    return chosen


def procedures_for(memory: Memory, question: str) -> list[Procedure]:
    """The procedures worth showing for ``question``, most useful first: those sharing words
    with it (full text over the task and its steps), or with no question the most proven."""
    procedures = Procedure.objects.for_memory(memory)
    if question.strip():
        found = search.text_matches(procedures, question, PROCEDURES_READ)
    else:
        found = list(procedures.order_by("-confidence", "-pk")[:PROCEDURES_READ])
    return sorted(found, key=lambda procedure: (utility(procedure), procedure.pk), reverse=True)


PASSAGES_READ = 20  # passages holding a word of the question that are ranked for the ask bar


def rank_passages(
    *,
    memory: Memory,
    question: str,
    reader,
    kinds: tuple = (),
    limit: int = 3,
    floor: float | None = None,
) -> list[tuple[Passage, float]]:
    """The passages (of sources of ``kinds``, every kind when empty) that ``reader`` may read,
    relevant to ``question`` by their words, best first, each with its relevance: the same
    words and BM25 as ``scored`` over the PASSAGES_READ that full text ranks best
    (``passage_search.matching``, the read rule's own search), ``floor`` (RELEVANCE_FLOOR)
    and above. Passages have no vectors, so their words are all the evidence."""
    floor = RELEVANCE_FLOOR if floor is None else floor
    # A passage is about no page: the names in the question are words like any other here.
    asked = asking(memory, question, Named({}, None), [])
    if not asked.terms:
        return []
    matching = passage_search.matching(memory, reader, asked.text)
    if kinds:
        matching = matching.filter(source__kind__in=kinds)
    passages = list(matching[:PASSAGES_READ])
    rows = [
        search.Row(passage.pk, passage.text, Fact.Valence.FACT, 0.0, 0, 0, 0, [], None,
                   search.lexemes_of(passage.search_vector))
        for passage in passages
    ]  # fmt: skip
    relevance = _lexical(rows, asked) if rows else []
    found = [
        (passage, value)
        for passage, value in zip(passages, relevance, strict=True)
        if value >= floor
    ]
    return sorted(found, key=lambda pair: (pair[1], pair[0].pk), reverse=True)[:limit]


def retrieve(*, memory: Memory, question: str, reader, k: int = 3) -> list[Fact]:
    """The k most relevant facts for a question (the agent's search, MCP's ``memory_search``),
    best first: the head of ``rank``'s lines, the ranking ``context`` fills its block from, so
    the block holds what this returns whenever its budget has room for it. Fewer than k, or
    none, when fewer are relevant."""
    ranking = rank(memory=memory, question=question, reader=reader, procedures=False)
    return [_fact(memory, line.row) for line in ranking.lines[:k]]


# What ``retrieve`` hands back of a fact: the fields it read (the rest load when asked for).
_FACT_FIELDS = [
    "id", "memory_id", "text", "kind", "valence", "confidence", "support", "successes", "failures"
]  # fmt: skip


def _fact(memory: Memory, row: search.Row) -> Fact:
    """A fact from the row the ranking read (already through the read rule), without reading
    it again."""
    values = [row.pk, memory.pk, row.text, row.kind, row.valence, row.confidence, row.support,
              row.successes, row.failures]  # fmt: skip
    return Fact.from_db(connection.alias, _FACT_FIELDS, values)


def _rerank(facts: list, vectors: dict) -> tuple[list, set[int]]:
    """``diversify`` over vectors already read (pk → vector of the current embedder)."""
    window, rest = facts[:MMR_WINDOW], facts[MMR_WINDOW:]
    if len(window) < 2 or len(vectors) < 2:
        return facts, set()
    have = [index for index, fact in enumerate(window) if fact.pk in vectors]
    matrix = np.array([vectors[window[index].pk] for index in have], dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    cosines = np.zeros((len(window), len(window)), dtype=np.float32)
    cosines[np.ix_(have, have)] = matrix @ matrix.T
    classes = np.array([fact.valence for fact in window])
    cosines[classes[:, None] != classes[None, :]] = 0.0
    redundancy = np.where(cosines >= NEAR_IDENTICAL, cosines, 0.0)
    np.fill_diagonal(redundancy, 0.0)  # a fact's own row is read only once it is placed
    if not redundancy.any():  # nothing near-identical: the order stands (most questions)
        return facts, set()
    # Greedy, with a heap of scores: a candidate's score falls only when one it is redundant
    # with is placed, so each pair pushes one entry and stale entries are skipped when popped.
    # (-score, index) breaks ties towards the earlier candidate, as a scan in order would.
    # The same float64 arithmetic as the plain loop, so the same order.
    pairs: dict[int, list[tuple[int, float]]] = {}
    for a, b in zip(*np.nonzero(redundancy), strict=True):
        pairs.setdefault(int(a), []).append((int(b), float(redundancy[a, b])))
    size = len(window)
    worst = [0.0] * size  # each candidate's highest redundancy with those placed
    score = [MMR_LAMBDA * (1.0 - index / size) for index in range(size)]
    heap = [(-value, index) for index, value in enumerate(score)]  # already a heap: sorted
    placed = [False] * size
    order: list[int] = []
    near: set[int] = set()
    while heap:
        negative, chosen = heapq.heappop(heap)
        if placed[chosen] or -negative != score[chosen]:
            continue  # placed already, or its score fell since this entry was pushed
        placed[chosen] = True
        if worst[chosen] > 0:
            near.add(window[chosen].pk)
        order.append(chosen)
        for other, value in pairs.get(chosen, ()):
            if not placed[other] and value > worst[other]:
                worst[other] = value
                score[other] = MMR_LAMBDA * (1.0 - other / size) - (1 - MMR_LAMBDA) * value
                heapq.heappush(heap, (-score[other], other))
    return [window[index] for index in order] + rest, near
