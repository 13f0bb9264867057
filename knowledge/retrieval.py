"""Recall: the block of memory a run is given, and searches over what is known.

``context()`` fills a token budget with facts about the subjects in play first, then facts that
share words (full text) or meaning (vectors) with the question. The reader's own page (their
person subject, ``subjects.person_of``) is in play too, so what they said about themselves ("I
like the bedroom at 19") comes back for them and not as everyone's. One subject may take at most
SUBJECT_SHARE of the budget, so a chatty device cannot crowd out the rest. Failures are fitted
first, under their own heading, so under pressure the expensive lessons are the last dropped.
Each block is ordered as a V (best at the head and the tail, where a model reads best), each
line carries ``[id]`` for outcome reports, and the whole is wrapped in a nonce envelope.

The memory's core (who the agent works for, standing rules) is loaded before anything else,
under its own heading, and counted against the budget. Procedures that match the question come
after the facts under their own heading (``[p<id>]`` lines, ranked by success like facts); they
are fitted after the failures and before the facts, but may take at most PROCEDURE_SHARE of the
budget: a way of doing the task that worked is the most directly useful line an agent can get,
and a quarter still leaves most of the block to what is known.

Diversity (``diversify``): candidates are re-ranked by maximal marginal relevance, where only a
near-identical line (cosine of the embeddings at least NEAR_IDENTICAL, in the same class) counts
as redundant, so the relevance order — subjects first, proven use, fused ranks — stands
everywhere else. ``retrieve`` returns that order; ``context()`` does not spend a slot on a line
nearly identical to one it already holds.

Never included: the inbox, guesses, the change log, expired, forgotten or superseded facts,
facts about removed entities, or anything the reader may not read (``readable_by``).

Two paths give the same block, line for line (``knowledge/tests/test_fast_paths.py`` holds
them to it on 500 generated questions). ``plain_context`` is the reference: a query per
subject, per full-text tier, for the vectors, the hydration, the vectors again for diversity
and the subjects of each line, each through the ORM, and the question embedded before any of
them. ``context`` is what every surface calls. Measured at 100k live facts (benchmark
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

import heapq
import math
import re
from dataclasses import dataclass, field

import numpy as np

from brain import llm
from knowledge import envelope, search
from knowledge.embedding import (
    QUESTION_TIMEOUT_S,
    embed_question,
    embedder_for,
    question_vector_soon,
)
from knowledge.models import Fact, Memory, Procedure, Subject
from knowledge.subjects import (
    mentioned_ids_and_page,
    mentioned_in,
    person_of,
    resolve,
)

MIN_BUDGET = 50  # below this not one line and its envelope fit
MAX_BUDGET = 32_000
SUBJECT_SHARE = 0.4
PER_SOURCE = 40  # candidates read from each of: subjects, full text, vectors
RRF_K = 60  # reciprocal-rank fusion constant
PROCEDURE_SHARE = 0.25  # of the budget, at most, for procedures (see the module docstring)
PROCEDURES_READ = 20  # procedures matching a question that are ranked for a block
# Cosine at or above which two lines say nearly the same words. Measured on pairs that differ
# by a word ("… at 03:00." / "… at 03:00 UTC."): 0.98 with the hash embedder, 0.99 with MiniLM;
# templated lines about different things ("reading 1 was logged…" / "reading 2 …") reach 0.93
# and 0.95, and paraphrases 0.93 (MiniLM): those stay, as the gate keeps them apart too.
NEAR_IDENTICAL = 0.97
MMR_LAMBDA = 0.5  # relevance against redundancy: a near-identical line drops about half the list
MMR_WINDOW = 80  # candidates re-ranked; a 600-token block holds about 25 lines

CORE_HEADING = "## Core"
FAILURES_HEADING = "## What has gone wrong before"
FACTS_HEADING = "## What I know"
PROCEDURES_HEADING = "## How it was done before"


class BadBudget(ValueError):
    pass


@dataclass
class Context:
    text: str
    fact_ids: list[int] = field(default_factory=list)
    nonce: str = ""
    tokens: int = 0
    procedure_ids: list[int] = field(default_factory=list)


def tokens(text: str) -> int:
    """A model-free token estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


PROVEN_AFTER = 5  # successes at which a fact counts as fully proven in use
UTILITY_WEIGHT = 0.002  # in the fused ranking, about eight ranks between unproven and proven


def utility(fact: Fact | Procedure) -> float:
    """How much a fact (or a procedure) has earned its place: 0.7 × confidence + 0.3 × proven
    use (successes reported for it, up to PROVEN_AFTER). Repetition is not evidence: a fact said
    ten times and never acted on ranks below one that worked 9 times out of 9."""
    return 0.7 * fact.confidence + 0.3 * min(1.0, fact.successes / PROVEN_AFTER)


_AVOID = re.compile(r"^\s*avoid\b\s*:?\s*", re.IGNORECASE)


def _line(fact: Fact) -> str:
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
    (full-text and vector ranks fused; a tie goes to the newer fact)."""
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
        text = [fact.pk for fact in search.text_matches(readable.only("pk"), question, PER_SOURCE)]
        embedding = _question_vector(memory, question)
        near = (
            [pk for pk, _distance in search.nearest(memory, embedding, limit=PER_SOURCE)]
            if embedding is not None
            else []
        )
        scores = _fused(text, near)
        wanted = [pk for pk in scores if pk not in seen]
        # The read rule applies to the vector hits here, through the one queryset method.
        found = readable.filter(pk__in=wanted).in_bulk()
        ordered += _by_score(found.values(), scores)
    return ordered


def _fused(text: list[int], near: list[int]) -> dict[int, float]:
    """Reciprocal-rank fusion of the full-text and vector rankings."""
    scores: dict[int, float] = {}
    for ranking in (text, near):
        for rank, pk in enumerate(ranking):
            scores[pk] = scores.get(pk, 0) + 1 / (RRF_K + rank)
    return scores


def _by_score(facts, scores: dict[int, float]) -> list:
    return sorted(
        facts,
        key=lambda fact: (scores[fact.pk] + UTILITY_WEIGHT * utility(fact), fact.pk),
        reverse=True,
    )


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


def subject_ids(facts: list[Fact]) -> dict[int, list[int]]:
    """Which subjects each fact is about, in one query (ids only: the share needs no more)."""
    about: dict[int, list[int]] = {fact.pk: [] for fact in facts}
    links = Fact.subjects.through.objects.filter(fact_id__in=list(about))
    for fact_id, subject_id in links.values_list("fact_id", "subject_id"):
        about[fact_id].append(subject_id)
    return about


def _in_play(memory: Memory, subjects: list, question: str) -> list[Subject]:
    in_play = resolve(memory, list(subjects))
    return in_play + [s for s in mentioned_in(memory, question) if s not in in_play]


def context(
    *, memory: Memory, question: str = "", subjects: list = (), reader=None, token_budget: int = 600
) -> Context:
    """The memory block for one prompt. Raises BadBudget, subjects.UnknownSubject.

    The same block as ``plain_context``, in three round trips (see the module docstring)."""
    check_budget(token_budget)
    if not memory.memory_injection:
        return Context("")
    asked = bool(question.strip())
    embedder = embedder_for(memory, timeout=QUESTION_TIMEOUT_S)
    soon = question_vector_soon(embedder, question) if asked else None
    in_play = [subject.pk for subject in resolve(memory, list(subjects))]
    mentioned, own_page = mentioned_ids_and_page(memory, question, reader)
    in_play += [pk for pk in [*mentioned, own_page] if pk is not None and pk not in in_play]
    rule = search.readable_where(Fact.objects.for_memory(memory).live().readable_by(reader))
    found = search.candidates(
        memory,
        rule,
        subject_ids=in_play,
        question=question if asked else "",
        limit=PER_SOURCE,
        hydrate=True,
    )
    embedding = _vector_of(soon)
    if found is None:  # nothing readable: only the core and procedures, as the plain path
        found = search.Found([], [], Procedure.objects.for_memory(memory).exists())
    near, rows = search.nearest_rows(
        memory, embedding, limit=PER_SOURCE, readable=rule, known=found.rows
    )
    ordered: list[search.Row] = []
    seen: set[int] = set()
    for row in sorted((rows[pk] for pk in found.about), key=utility, reverse=True):
        if row.pk not in seen:
            ordered.append(row)
            seen.add(row.pk)
    if asked:
        scores = _fused(found.text, near)
        ordered += _by_score([rows[pk] for pk in scores if pk not in seen and pk in rows], scores)
    candidates, near_identical = _rerank(
        ordered, {row.pk: row.vector for row in ordered[:MMR_WINDOW] if row.vector is not None}
    )
    procedures = procedures_for(memory, question) if found.procedures else []
    about = {row.pk: row.subject_ids for row in candidates}
    return _block(memory, token_budget, candidates, near_identical, about, procedures)


def plain_context(
    *, memory: Memory, question: str = "", subjects: list = (), reader=None, token_budget: int = 600
) -> Context:
    """``context`` the plain way: the reference the fast path is held to (and the baseline of
    the recall benchmark)."""
    check_budget(token_budget)
    if not memory.memory_injection:
        return Context("")
    in_play = _in_play(memory, subjects, question)
    own_page = person_of(memory, reader)
    in_play += [own_page] if own_page is not None and own_page not in in_play else []
    candidates, near_identical = diversify(
        ranked_facts(memory, question=question, subjects=in_play, reader=reader)
    )
    procedures = procedures_for(memory, question)
    about = subject_ids(candidates)
    return _block(memory, token_budget, candidates, near_identical, about, procedures)


def _block(
    memory: Memory,
    token_budget: int,
    candidates: list,
    near_identical: set[int],
    about: dict[int, list[int]],
    procedures: list[Procedure],
) -> Context:
    """The block: the core, then failures, procedures and facts fitted to the budget."""
    core = [line.strip() for line in memory.core.splitlines() if line.strip()]
    nonce = envelope.new_nonce()
    headings = [FAILURES_HEADING, FACTS_HEADING]
    headings += [CORE_HEADING] if core else []
    headings += [PROCEDURES_HEADING] if procedures else []
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
    share = max(1, int(token_budget * SUBJECT_SHARE))
    spent_on: dict[int, int] = {}
    chosen: dict[str, list] = {Fact.Valence.FAILURE: [], Fact.Valence.FACT: []}

    def fit(valence: str) -> None:
        nonlocal left
        for fact in candidates:
            if fact.valence != valence or fact.pk in near_identical:
                continue
            cost = tokens(_line(fact)) + 1
            fact_subjects = about[fact.pk]
            if cost > left or any(spent_on.get(pk, 0) + cost > share for pk in fact_subjects):
                continue
            chosen[valence].append(fact)
            left -= cost
            for pk in fact_subjects:
                spent_on[pk] = spent_on.get(pk, 0) + cost

    # Failures are fitted first: under pressure they are the last thing dropped.
    fit(Fact.Valence.FAILURE)
    chosen_procedures = []
    allowance = min(left, int(token_budget * PROCEDURE_SHARE))
    for procedure in procedures:
        cost = tokens(_procedure_line(procedure)) + 1
        if cost <= allowance:
            chosen_procedures.append(procedure)
            allowance -= cost
            left -= cost
    fit(Fact.Valence.FACT)
    if not core_lines and not chosen_procedures and not any(chosen.values()):
        return Context("", nonce=nonce)
    blocks = []
    if core_lines:
        blocks.append(CORE_HEADING + "\n" + "\n".join(core_lines))
    if chosen[Fact.Valence.FAILURE]:
        lines = [_line(f) for f in v_order(chosen[Fact.Valence.FAILURE])]
        blocks.append(FAILURES_HEADING + "\n" + "\n".join(lines))
    if chosen[Fact.Valence.FACT]:
        lines = [_line(f) for f in v_order(chosen[Fact.Valence.FACT])]
        blocks.append(FACTS_HEADING + "\n" + "\n".join(lines))
    if chosen_procedures:
        lines = [_procedure_line(p) for p in chosen_procedures]
        blocks.append(PROCEDURES_HEADING + "\n" + "\n".join(lines))
    text = envelope.wrap("\n\n".join(blocks), nonce=nonce, memory_slug=memory.slug)
    ids = [f.pk for f in chosen[Fact.Valence.FAILURE] + chosen[Fact.Valence.FACT]]
    return Context(text, ids, nonce, tokens(text), [p.pk for p in chosen_procedures])


def procedures_for(memory: Memory, question: str) -> list[Procedure]:
    """The procedures worth showing for ``question``, most useful first: those sharing words
    with it (full text over the task and its steps), or with no question the most proven."""
    procedures = Procedure.objects.for_memory(memory)
    if question.strip():
        found = search.text_matches(procedures, question, PROCEDURES_READ)
    else:
        found = list(procedures.order_by("-confidence", "-pk")[:PROCEDURES_READ])
    return sorted(found, key=lambda procedure: (utility(procedure), procedure.pk), reverse=True)


def retrieve(*, memory: Memory, question: str, reader=None, k: int = 3) -> list[Fact]:
    """The k best facts for a question (the agent's search), best first, a near-identical
    line behind the others (``diversify``)."""
    ranked = ranked_facts(
        memory, question=question, subjects=mentioned_in(memory, question), reader=reader
    )
    return diversify(ranked)[0][:k]


def diversify(facts: list[Fact]) -> tuple[list[Fact], set[int]]:
    """``facts`` (best first) re-ranked by maximal marginal relevance, and the ids of those
    nearly identical to a fact placed before them (see the module docstring).

    Relevance is the rank given (1 for the first, falling evenly); redundancy is the highest
    cosine to a fact already placed in the same class (a failure is never redundant with a
    success), counted only from NEAR_IDENTICAL. Only the first MMR_WINDOW are re-ranked."""
    window = facts[:MMR_WINDOW]
    if len(window) < 2:
        return facts, set()
    name = embedder_for(window[0].memory_id).name
    vectors = dict(
        Fact.objects.filter(pk__in=[fact.pk for fact in window], embedder=name)
        .exclude(embedding=None)
        .values_list("pk", "embedding")
    )
    return _rerank(facts, vectors)


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
