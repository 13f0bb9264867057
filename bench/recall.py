"""Recall quality: does the block, and the ask bar's first line, hold what answers a question?

Labelled questions written by hand (``bench/recall_sets/``), each with the facts that answer it
marked (or none: nothing in the memory answers it):

- ``household.yaml``: the demo household (``memory/fixtures/demo-facts.yaml``, its lines live
  as ``make demo`` leaves them), with its rooms, devices and people as pages;
- ``team.yaml``: a product team's memory (people, services, customers as pages);
- ``coding.yaml``: a coding agent's memory of one person's projects (repositories, tools, the
  person as pages), failures among them;
- ``conversations.yaml``: two people talking over several sessions, every turn taught as one
  fact, "Name (date): words", small talk and all, each speaker with a person page: where
  nearly every question names a page.

Each set is loaded twice, into memories of its own: with its pages (the facts linked to the
pages they name, as teaching links them) and without any page. Facts are written directly
with MiniLM vectors (``minilm-int8-v1``, each text embedded once for both), dated in the order
they were said. Questions are asked as the system, or as the person a question names in
``by`` (their own page then in play).

Measured for each question: the block (``retrieval.context``, budget 600 tokens: its lines
best first), the ask bar's first line (``memory.ask.answer``), and two baselines over the same
facts that know nothing of pages: BM25 (Okapi, k1 1.2, b 0.75, IDF over the memory's facts,
the same words and stems as full text) and dense-only (the exact top-k by cosine of the same
question vector). recall@k: the share of a question's answering facts among the first k lines;
MRR: the reciprocal rank of the first one (0 when absent). Over the questions that have an
answer. The ask bar answers when its first line is an answering fact, and says it does not
know (a question with no answer) when no line passes the relevance floor.

Splits: every third question of each set (by its place in the file) is held out; the ranking's
weights (``knowledge.retrieval``: WORDS_WEIGHT, MEANING_WEIGHT, COSINE_SPANS, NAME_WEIGHT,
NAME_WORDS_WEIGHT, RELEVANCE_FLOOR, ANSWER_FLOOR, REPLY_SHARE, SUBJECT_BOOST) were chosen on the
others (``fit``), and the section shows the figures that
chose them: the chosen weights beside each neighbour, one at a time, on the dev questions.

Study: ``household.yaml`` also labels ten topics (three about nothing the household holds) with
the lines a study of each should read; the section shows what ``memory.study.facts_about``
reads for each.

On its own (the section printed, and put into docs/BENCHMARKS.md in place of the one there):
``python manage.py shell -c "from bench.recall import main; main()"``; ``main(["--misses",
"20"])`` lists the questions whose block misses their answer, ``main(["--fit"])`` searches the
weights' grid again over the dev questions. ``make bench`` runs it with the rest
(``recall_quality``).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from unittest import mock

import numpy as np
import yaml
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

from bench.tables import table
from knowledge import registry, retrieval, search, statements, word_stats
from knowledge.embedding import embed_question, get_embedder
from knowledge.models import Fact, Memory, Subject
from knowledge.read_layer import SYSTEM
from knowledge.subjects import mentions

SETS_DIR = Path(__file__).with_name("recall_sets")
SLUG = "bench-recall-{index}-{pages}"
BUDGET = 600  # tokens: the default block (about twenty lines)
HELD_OUT_EVERY = 3  # every third question of a set is held out from fitting
BM25_K1, BM25_B = 1.2, 0.75
TARGET_MARGIN = 0.10  # brain's recall@10 over the best baseline's
PAGES_TOLERANCE = 0.02  # with pages no lower than without, within this
ANSWERS_TARGET = 0.70  # answerable questions whose first line answers
ABSTAINS_TARGET = 0.80  # questions with no answer where the ask bar says it does not know


class SetError(ValueError):
    """A labelled set names an answer no fact holds, or one that more than one fact holds."""


@dataclass
class LabelledFact:
    text: str
    when: datetime
    failure: bool = False


@dataclass
class LabelledQuestion:
    text: str
    answers: list[str]  # pieces of the answering facts' texts
    by: str = ""
    held_out: bool = False


@dataclass
class LabelledSet:
    name: str
    kind: str  # household, team, coding, conversation
    subjects: list[dict]  # kind, name, aliases (and for the household, from its registry file)
    facts: list[LabelledFact]
    questions: list[LabelledQuestion]
    registry_file: Path | None = None


def _questions(entries: list[dict]) -> list[LabelledQuestion]:
    return [
        LabelledQuestion(
            text=entry["q"],
            answers=[str(answer) for answer in entry.get("a") or []],
            by=entry.get("by", ""),
            held_out=index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1,
        )
        for index, entry in enumerate(entries)
    ]


def _household(now: datetime) -> LabelledSet:
    """The demo household's lines as ``make demo`` leaves them live: each line dated its
    moment, less the lines a correction replaced and the health notes since expired."""
    from knowledge import kinds
    from review import demo_household

    household = demo_household.read()
    replaced = {line.replaces for line in household.corrections}
    facts = []
    for moment in household.moments:
        when = now - timedelta(days=moment.days_ago)
        for line in moment.lines:
            if line.text in replaced:
                continue
            expiry = kinds.expiry_for(kinds.kind_for(line.text), when)
            if expiry is not None and expiry <= now:
                continue
            facts.append(LabelledFact(line.text, when, line.went_wrong))
    document = yaml.safe_load((SETS_DIR / "household.yaml").read_text())
    return LabelledSet(
        "household",
        "household",
        [],
        facts,
        _questions(document["questions"]),
        registry_file=demo_household.HOUSE,
    )


def _memory_set(name: str, now: datetime) -> LabelledSet:
    document = yaml.safe_load((SETS_DIR / f"{name}.yaml").read_text())
    raw = document["facts"]
    facts = []
    for index, entry in enumerate(raw):  # oldest first, a day apart
        entry = {"text": entry} if isinstance(entry, str) else entry
        when = now - timedelta(days=len(raw) - index)
        facts.append(LabelledFact(entry["text"], when, bool(entry.get("failure"))))
    return LabelledSet(name, name, document["subjects"], facts, _questions(document["questions"]))


def _conversations(now: datetime) -> list[LabelledSet]:
    document = yaml.safe_load((SETS_DIR / "conversations.yaml").read_text())
    found = []
    for pair in document["conversations"]:
        facts = []
        for session in pair["sessions"]:
            day = session["date"]
            when = timezone.make_aware(datetime(day.year, day.month, day.day, 18))
            for minute, (speaker, words) in enumerate(session["turns"]):
                facts.append(
                    LabelledFact(
                        f"{speaker} ({day.isoformat()}): {words}", when + timedelta(minutes=minute)
                    )
                )
        people = [{"kind": "person", "name": person, "aliases": []} for person in pair["people"]]
        found.append(
            LabelledSet(
                " & ".join(pair["people"]),
                "conversation",
                people,
                facts,
                _questions(pair["questions"]),
            )
        )
    return found


def read_sets() -> list[LabelledSet]:
    now = timezone.now()
    return [
        _household(now),
        _memory_set("team", now),
        _memory_set("coding", now),
        *_conversations(now),
    ]


# Loading -------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """One labelled set in a memory: the memory, each question's answering fact ids and the
    facts' rows for the baselines."""

    labelled: LabelledSet
    memory: Memory
    pages: bool
    answers: list[set[int]]
    fact_ids: np.ndarray
    vectors: np.ndarray
    lexemes: list[dict[str, int]]


def _answer_ids(labelled: LabelledSet, by_text: dict[str, int]) -> list[set[int]]:
    """Each question's answering fact ids. Raises SetError for a piece of text that no fact
    holds, or more than one does."""
    found = []
    for question in labelled.questions:
        ids = set()
        for piece in question.answers:
            holding = [pk for text, pk in by_text.items() if piece in text]
            if len(holding) != 1:
                raise SetError(
                    f"{labelled.name}: “{piece}” (for “{question.text}”) is in "
                    f"{len(holding)} facts, not one"
                )
            ids.add(holding[0])
        found.append(ids)
    return found


def _people(labelled: LabelledSet) -> dict[str, object]:
    """The people who ask questions, as superusers (they read every fact, as the system does;
    their own page is what they add)."""
    User = get_user_model()
    people: dict[str, object] = {}
    for name in {question.by for question in labelled.questions if question.by}:
        user, _ = User.objects.get_or_create(
            username=f"bench-recall-{name}",
            defaults={"first_name": name.title(), "is_superuser": True, "is_staff": True},
        )
        people[name] = user
    return people


def load(
    labelled: LabelledSet, index: int, *, pages: bool, vectors: dict[str, list[float]]
) -> Loaded:
    """``labelled`` into a memory of its own (made again if an earlier run left it), with or
    without its pages. ``vectors``: each fact's MiniLM vector, by text."""
    slug = SLUG.format(index=index, pages="pages" if pages else "bare")
    Memory.objects.filter(slug=slug).delete()
    embedder = get_embedder()
    with transaction.atomic():
        memory = Memory.objects.create(slug=slug, name=f"Recall benchmark: {labelled.name}")
        if pages and labelled.registry_file is not None:
            registry.load_file(memory=memory, path=labelled.registry_file, partial=True)
        elif pages:
            for subject in labelled.subjects:
                Subject.objects.create(
                    memory=memory,
                    kind=subject["kind"],
                    name=subject["name"],
                    aliases=[alias.casefold() for alias in subject.get("aliases", [])],
                )
        rows = Fact.objects.bulk_create(
            Fact(
                memory=memory,
                text=fact.text,
                normalized=statements.normalise(fact.text),
                valence=Fact.Valence.FAILURE if fact.failure else Fact.Valence.FACT,
                channel=Fact.Channel.TYPED,
                status=Fact.Status.FILED,
                confidence=0.6,
                embedding=vectors[fact.text],
                embedder=embedder.name,
                created_at=fact.when,
                valid_from=fact.when,
            )
            for fact in labelled.facts
        )
        if pages:
            named = mentions(memory)
            Link = Fact.subjects.through
            Link.objects.bulk_create(
                Link(fact_id=row.pk, subject_id=subject.pk)
                for row in rows
                for subject in named(row.text)
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_fact")
    word_stats.forget()
    by_text = {row.text: row.pk for row in rows}
    lexemes = dict(
        Fact.objects.filter(memory=memory)
        .as_system("the recall benchmark reads its own memory")
        .values_list("pk", "search_vector")
    )
    ids = np.array([row.pk for row in rows])
    return Loaded(
        labelled,
        memory,
        pages,
        _answer_ids(labelled, by_text),
        ids,
        np.array([vectors[row.text] for row in rows], dtype=np.float32),
        [search.lexemes_of(lexemes[pk]) for pk in ids.tolist()],
    )


def unload() -> None:
    """Every memory and person the benchmark made."""
    Memory.objects.filter(slug__startswith="bench-recall-").delete()
    get_user_model().objects.filter(username__startswith="bench-recall-").delete()


# Measuring -----------------------------------------------------------------------------------


@dataclass
class Asked:
    """One question's results: ids best first from each ranking, and the ask bar's first
    line (None: it said it does not know)."""

    question: LabelledQuestion
    answers: set[int]
    block: list[int]
    ask_first: int | None
    bm25: list[int]
    dense: list[int]
    pool: tuple | None = None  # the ranking's candidates, kept for ``fit``


def bm25_top(loaded: Loaded, question: str, k: int = 10) -> list[int]:
    """Okapi BM25 over every fact of the memory, the question's words stemmed as full text
    stems them (the baseline)."""
    words = search._words(question)
    terms = [lexeme for lexeme in dict.fromkeys(word_stats.lexemes(words).values()) if lexeme]
    count = len(loaded.lexemes)
    lengths = np.array([max(1, sum(held.values())) for held in loaded.lexemes], dtype=float)
    average = lengths.mean()
    scores = np.zeros(count)
    for term in terms:
        holding = np.array([held.get(term, 0) for held in loaded.lexemes], dtype=float)
        df = int((holding > 0).sum())
        idf = math.log(1 + (count - df + 0.5) / (df + 0.5))
        norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / average)
        scores += idf * holding * (BM25_K1 + 1) / (holding + norm)
    order = sorted(range(count), key=lambda i: (-scores[i], -int(loaded.fact_ids[i])))
    return [int(loaded.fact_ids[i]) for i in order[:k] if scores[i] > 0]


def dense_top(loaded: Loaded, vector: np.ndarray, k: int = 10) -> list[int]:
    """The exact top-k by cosine of the question's vector (the baseline)."""
    scores = loaded.vectors @ (vector / np.linalg.norm(vector))
    order = np.argsort(-scores, kind="stable")[:k]
    return [int(loaded.fact_ids[i]) for i in order]


def ask(
    loaded: Loaded, people: dict, *, keep_pools: bool = False, baselines: list | None = None
) -> list[Asked]:
    """Each question asked of the block and the ask bar; ``baselines``: each question's
    (BM25, dense) top-k when another load of the same facts already worked them out (they
    know nothing of pages). ``keep_pools``: the candidates the block ranked, for ``fit``."""
    from memory import ask as ask_bar

    embedder = get_embedder()
    results = []
    kept: list = []
    candidates = retrieval.candidates
    by_text = {text: pk for pk, text in _texts(loaded).items()} if baselines else {}

    def keeping(**kwargs):  # the candidates context() itself ranks, kept as it reads them
        found = candidates(**kwargs)
        kept.append(found)
        return found

    for index, (question, answers) in enumerate(
        zip(loaded.labelled.questions, loaded.answers, strict=True)
    ):
        reader = people.get(question.by, SYSTEM) if question.by else SYSTEM
        kept.clear()
        with mock.patch.object(retrieval, "candidates", keeping):
            block = retrieval.context(
                memory=loaded.memory, question=question.text, reader=reader, token_budget=BUDGET
            )
        answered = ask_bar.answer(memory=loaded.memory, question=question.text, reader=reader)
        if baselines is not None:
            bm25 = [by_text[text] for text in baselines[index][0]]
            dense = [by_text[text] for text in baselines[index][1]]
        else:
            vector = np.array(embed_question(embedder, question.text), dtype=np.float32)
            bm25, dense = bm25_top(loaded, question.text), dense_top(loaded, vector)
        results.append(
            Asked(
                question,
                answers,
                block.ranked,
                answered.facts[0].pk if answered.knows and answered.facts else None,
                bm25,
                dense,
                (kept[0][0], kept[0][1]) if keep_pools and kept else None,
            )
        )
    return results


def recall_at(ranked: list[int], answers: set[int], k: int) -> float:
    return len(answers & set(ranked[:k])) / len(answers)


def reciprocal_rank(ranked: list[int], answers: set[int]) -> float:
    return next((1 / (rank + 1) for rank, pk in enumerate(ranked) if pk in answers), 0.0)


@dataclass
class Scores:
    questions: int = 0
    unanswerable: int = 0
    recall5: dict[str, float] = field(default_factory=dict)
    recall10: dict[str, float] = field(default_factory=dict)
    mrr: dict[str, float] = field(default_factory=dict)
    answers: float = 0.0  # answerable questions whose ask bar's first line answers
    abstains: float = 0.0  # unanswerable questions where the ask bar does not know
    lines: float = 0.0  # lines in the block, on average


RANKINGS = ("block", "ask bar", "bm25", "dense")


def _ranked(result: Asked, name: str) -> list[int]:
    if name == "block":
        return result.block
    if name == "ask bar":
        return [result.ask_first] if result.ask_first is not None else []
    return result.bm25 if name == "bm25" else result.dense


def score(results: Sequence[Asked]) -> Scores:
    answerable = [result for result in results if result.answers]
    unanswerable = [result for result in results if not result.answers]
    found = Scores(questions=len(answerable), unanswerable=len(unanswerable))
    for name in RANKINGS:
        ranked = [(_ranked(result, name), result.answers) for result in answerable]
        found.recall5[name] = (
            statistics.fmean(recall_at(r, a, 5) for r, a in ranked) if ranked else 0
        )
        found.recall10[name] = (
            statistics.fmean(recall_at(r, a, 10) for r, a in ranked) if ranked else 0
        )
        found.mrr[name] = (
            statistics.fmean(reciprocal_rank(r, a) for r, a in ranked) if ranked else 0
        )
    if answerable:
        found.answers = statistics.fmean(
            result.ask_first in result.answers for result in answerable
        )
        found.lines = statistics.fmean(len(result.block) for result in results)
    if unanswerable:
        found.abstains = statistics.fmean(result.ask_first is None for result in unanswerable)
    return found


# Fitting -------------------------------------------------------------------------------------


@contextmanager
def weights(**chosen) -> Iterator[None]:
    """``knowledge.retrieval``'s ranking constants set to ``chosen`` for the block."""
    with mock.patch.multiple(retrieval, **chosen):
        yield


def ranked_again(results: Sequence[Asked]) -> list[Asked]:
    """The block's ranking and the ask bar's first line again, from the candidates kept,
    with the ranking constants as they are now (``weights``): the block as its relevant lines
    best first, the first line as the best of them."""
    again = []
    embedder = get_embedder()
    for result in results:
        assert result.pool is not None  # asked with its candidates kept
        rows, asked = result.pool
        asked.vector = retrieval._meaning(embedder, asked.embedding, asked)
        ranking = retrieval._ranking(rows, asked, [])
        lines = [line for line in ranking.lines if line.pk not in ranking.near_identical]
        first = next((line.pk for line in lines if line.relevance >= retrieval.ANSWER_FLOOR), None)
        again.append(
            Asked(
                result.question,
                result.answers,
                [line.pk for line in lines],
                first,
                result.bm25,
                result.dense,
                result.pool,
            )
        )
    return again


def objective(scores: Scores) -> float:
    """What the weights are chosen for: recall@10 and MRR of the block, the share of first
    lines that answer and the share of questions without an answer it abstains on."""
    return scores.recall10["block"] + scores.mrr["block"] + scores.answers + scores.abstains


# Around the chosen weights, one at a time (``python -m bench.recall --fit`` searches the grid).
NEIGHBOURS = {
    "WORDS_WEIGHT": (0.6, 0.8),
    "MEANING_WEIGHT": (0.8, 0.9),
    "COSINE_LOW": (0.2, 0.3),
    "COSINE_HIGH": (0.75, 0.85),
    "NAME_WEIGHT": (0.0, 0.3, 0.7),
    "NAME_WORDS_WEIGHT": (0.0, 0.5),
    "RELEVANCE_FLOOR": (0.1, 0.3),
    "ANSWER_FLOOR": (0.6, 0.7),
    "REPLY_SHARE": (0.0, 0.7),
    "SUBJECT_BOOST": (0.0, 0.1),
}
GRID = {
    "WORDS_WEIGHT": (0.6, 0.7, 0.8),
    "MEANING_WEIGHT": (0.9, 1.0),
    "COSINE_LOW": (0.2, 0.25, 0.3),
    "COSINE_HIGH": (0.75, 0.8, 0.85),
    "NAME_WEIGHT": (0.3, 0.5, 0.7),
    "RELEVANCE_FLOOR": (0.2, 0.3),
    "ANSWER_FLOOR": (0.6, 0.65, 0.7),
    "SUBJECT_BOOST": (0.05,),
}


def current() -> dict:
    low, high = retrieval.COSINE_SPANS.get(get_embedder().name, retrieval.COSINE_SPAN)
    return {
        "WORDS_WEIGHT": retrieval.WORDS_WEIGHT,
        "MEANING_WEIGHT": retrieval.MEANING_WEIGHT,
        "COSINE_LOW": low,
        "COSINE_HIGH": high,
        "NAME_WEIGHT": retrieval.NAME_WEIGHT,
        "NAME_WORDS_WEIGHT": retrieval.NAME_WORDS_WEIGHT,
        "RELEVANCE_FLOOR": retrieval.RELEVANCE_FLOOR,
        "ANSWER_FLOOR": retrieval.ANSWER_FLOOR,
        "REPLY_SHARE": retrieval.REPLY_SHARE,
        "SUBJECT_BOOST": retrieval.SUBJECT_BOOST,
    }


def _with(choice: dict) -> dict:
    name = get_embedder().name
    spans = {**retrieval.COSINE_SPANS, name: (choice["COSINE_LOW"], choice["COSINE_HIGH"])}
    return {
        "WORDS_WEIGHT": choice["WORDS_WEIGHT"],
        "MEANING_WEIGHT": choice["MEANING_WEIGHT"],
        "COSINE_SPANS": spans,
        "NAME_WEIGHT": choice["NAME_WEIGHT"],
        "NAME_WORDS_WEIGHT": choice.get("NAME_WORDS_WEIGHT", retrieval.NAME_WORDS_WEIGHT),
        "RELEVANCE_FLOOR": choice["RELEVANCE_FLOOR"],
        "ANSWER_FLOOR": choice["ANSWER_FLOOR"],
        "REPLY_SHARE": choice.get("REPLY_SHARE", retrieval.REPLY_SHARE),
        "SUBJECT_BOOST": choice["SUBJECT_BOOST"],
    }


def tried(results: Sequence[Asked], choice: dict) -> Scores:
    with weights(**_with(choice)):
        return score(ranked_again(results))


def fit(results: Sequence[Asked], grid: dict = GRID) -> list[tuple[float, dict, Scores]]:
    """Every combination of ``grid`` scored on ``results`` (their kept candidates), best
    first."""
    found = []
    names = list(grid)
    for values in itertools.product(*(grid[name] for name in names)):
        choice = dict(zip(names, values, strict=True))
        if choice["COSINE_LOW"] >= choice["COSINE_HIGH"]:
            continue
        scores = tried(results, choice)
        found.append((objective(scores), choice, scores))
    return sorted(found, key=lambda entry: -entry[0])


# Study topics --------------------------------------------------------------------------------


@dataclass
class Topic:
    topic: str
    wanted: set[int]
    read: list[int]


def study_topics(loaded: Loaded) -> list[Topic]:
    """What a study of each labelled topic reads (``memory.study.facts_about``), against the
    lines labelled as about it."""
    from memory import study

    document = yaml.safe_load((SETS_DIR / "household.yaml").read_text())
    texts = {pk: text for pk, text in _texts(loaded).items()}
    found = []
    for entry in document.get("topics", []):
        wanted = {pk for pk, text in texts.items() for piece in entry["a"] if piece in text}
        facts = study.facts_about(loaded.memory, entry["t"], None, SYSTEM)
        found.append(Topic(entry["t"], wanted, [fact.pk for fact in facts]))
    return found


def _texts(loaded: Loaded) -> dict[int, str]:
    return dict(
        Fact.objects.filter(memory=loaded.memory)
        .as_system("the recall benchmark reads its own memory")
        .values_list("pk", "text")
    )


# Running -------------------------------------------------------------------------------------


@dataclass
class Run:
    sets: list[LabelledSet]
    results: dict[tuple[str, bool], list[Asked]]  # (set name, pages) → results
    facts: dict[str, int]
    topics: list[Topic]
    seconds: float
    embedder: str


def run(*, keep_pools: bool = True) -> Run:
    started = time.monotonic()
    sets = read_sets()
    embedder = get_embedder()
    texts = list(dict.fromkeys(fact.text for labelled in sets for fact in labelled.facts))
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    results: dict[tuple[str, bool], list[Asked]] = {}
    topics: list[Topic] = []
    unload()
    try:
        # The ask bar as brain answers offline: a model's answer is the model's, not brain's.
        with override_settings(ANTHROPIC_API_KEY=""):
            for index, labelled in enumerate(sets):
                baselines = None
                for pages in (True, False):
                    loaded = load(labelled, index, pages=pages, vectors=vectors)
                    people = _people(labelled)
                    asked = ask(loaded, people, keep_pools=keep_pools, baselines=baselines)
                    results[(labelled.name, pages)] = asked
                    # The baselines know nothing of pages: the same ids in the other load.
                    baselines = _same_facts(loaded, asked)
                    if labelled.kind == "household" and pages:
                        topics = study_topics(loaded)
    finally:
        unload()
    facts = {labelled.name: len(labelled.facts) for labelled in sets}
    return Run(sets, results, facts, topics, time.monotonic() - started, embedder.name)


def _same_facts(loaded: Loaded, asked: list[Asked]) -> list:
    """The baselines of ``asked`` as fact texts, read back as ids in the next load of the
    same facts (texts are unique within a set)."""
    texts = _texts(loaded)
    return [
        ([texts[pk] for pk in result.bm25], [texts[pk] for pk in result.dense]) for result in asked
    ]


def _all(run_: Run, pages: bool, *, kinds: Sequence[str] = (), split: str = "all") -> list[Asked]:
    chosen = []
    for labelled in run_.sets:
        if kinds and labelled.kind not in kinds:
            continue
        for result in run_.results[(labelled.name, pages)]:
            if split == "all" or (split == "held_out") == result.question.held_out:
                chosen.append(result)
    return chosen


# Reporting -----------------------------------------------------------------------------------

KINDS = {
    "household": "demo household",
    "team": "team",
    "coding": "coding agent",
    "conversation": "conversations",
}


def _f(value: float) -> str:
    return f"{value:.3f}"


def _sets_table(run_: Run) -> list[str]:
    rows = []
    for kind, label in KINDS.items():
        chosen = [labelled for labelled in run_.sets if labelled.kind == kind]
        results = _all(run_, True, kinds=(kind,))
        facts = sum(run_.facts[labelled.name] for labelled in chosen)
        pages = sum(len(labelled.subjects) for labelled in chosen)
        if kind == "household":
            assert chosen[0].registry_file is not None  # the household set has its house
            pages = len(registry.read_file(chosen[0].registry_file).entries)
        answerable = sum(1 for result in results if result.answers)
        rows.append(
            (label, len(chosen), f"{facts:,}", pages, answerable, len(results) - answerable)
        )
    header = ("set", "memories", "facts", "pages", "questions with an answer", "with none")
    return table(header, rows)


def _quality_table(run_: Run) -> list[str]:
    names = {"block": "brain: the block", "ask bar": "brain: the ask bar's first line",
             "bm25": "BM25 top-k", "dense": "dense-only top-k"}  # fmt: skip
    rows = []
    for label, pages, scores in _by_set(run_):
        shown = RANKINGS if pages else ("block", "ask bar")
        for name in shown:
            figures = (scores.recall5[name], scores.recall10[name], scores.mrr[name])
            rows.append((label, _pages_word(pages), names[name], *map(_f, figures)))
    header = ("set", "pages", "ranking", "recall@5", "recall@10", "MRR")
    return table(header, rows, words=3)


def _pages_word(pages: bool) -> str:
    return "with" if pages else "without"


def _by_set(run_: Run) -> Iterator[tuple[str, bool, Scores]]:
    """Each set's scores with pages and without, then every set's together."""
    for kind in (*KINDS, ""):
        label = KINDS.get(kind, "**all**")
        for pages in (True, False):
            yield label, pages, score(_all(run_, pages, kinds=(kind,) if kind else ()))


def _ask_table(run_: Run) -> list[str]:
    header = (
        "set",
        "pages",
        "first line answers (questions with an answer)",
        "says it does not know (questions with none)",
        "lines in the block, on average",
    )
    rows = (
        (label, _pages_word(pages), _f(scores.answers), _f(scores.abstains), f"{scores.lines:.1f}")
        for label, pages, scores in _by_set(run_)
    )
    return table(header, rows, words=2)


def _block_scores(scores: Scores) -> tuple[str, str, str, str]:
    """Block recall@10, block MRR, first line answers and does not know."""
    return (
        _f(scores.recall10["block"]),
        _f(scores.mrr["block"]),
        _f(scores.answers),
        _f(scores.abstains),
    )


def _split_table(run_: Run) -> list[str]:
    header = ("questions", "block recall@10", "block MRR", "first line answers", "does not know")
    rows = (
        (label, *_block_scores(score(_all(run_, True, split=split))))
        for split, label in (("dev", "chosen on (dev)"), ("held_out", "held out"))
    )
    return table(header, rows)


def _weights_table(run_: Run) -> list[str]:
    """The chosen weights and, one at a time, their neighbours, on the dev questions."""
    dev = _all(run_, True, split="dev") + _all(run_, False, split="dev")
    if any(result.pool is None for result in dev):
        return []
    chosen = current()

    def row(label: str, choice: dict) -> tuple[str, ...]:
        scores = tried(dev, choice)
        return (label, f"{objective(scores):.3f}", *_block_scores(scores))

    rows = [row("**chosen**: " + ", ".join(f"{k} {v}" for k, v in chosen.items()), chosen)]
    for name, values in NEIGHBOURS.items():
        for value in values:
            rows.append(row(f"{name} {value}", {**chosen, name: value}))
    header = (
        "weights",
        "objective",
        "block recall@10",
        "block MRR",
        "first line answers",
        "does not know",
    )
    return table(header, rows)


def _topics_table(run_: Run) -> list[str]:
    rows = (
        (topic.topic, len(topic.wanted), len(topic.read), len(topic.wanted & set(topic.read)))
        for topic in run_.topics
    )
    return table(("topic", "lines about it", "read", "of them about it"), rows)


def _targets(run_: Run) -> list[str]:
    found = []
    with_pages = score(_all(run_, True))
    without = score(_all(run_, False))
    conversation = score(_all(run_, True, kinds=("conversation",)))
    for label, scores in (("every set", with_pages), ("the conversations", conversation)):
        best = max(scores.recall10["bm25"], scores.recall10["dense"])
        got = scores.recall10["block"]
        why = ""
        if got < best + TARGET_MARGIN and best + TARGET_MARGIN > 1:
            why = (
                f" (a recall@10 above 1 would be needed: in the household's, the team's and the "
                f"coding agent's small memories, their questions written from their facts, "
                f"both baselines find nearly every answer; the block beats them by "
                f"{got - best:+.3f})"
            )
        found.append(
            f"- {label}: the block's recall@10 at least the best baseline's + {TARGET_MARGIN} "
            f"— {got:.3f} against {best:.3f} + {TARGET_MARGIN}, "
            f"{_yes(got >= best + TARGET_MARGIN)}{why}."
        )
    gap = with_pages.recall10["block"] - without.recall10["block"]
    found.append(
        f"- with subject pages no lower than without, within {PAGES_TOLERANCE} — "
        f"{with_pages.recall10['block']:.3f} with, {without.recall10['block']:.3f} without, "
        f"{_yes(gap >= -PAGES_TOLERANCE)}."
    )
    found.append(
        f"- the ask bar's first line answers at least {ANSWERS_TARGET:.0%} of the questions "
        f"with an answer — {with_pages.answers:.3f}, {_yes(with_pages.answers >= ANSWERS_TARGET)}."
    )
    none = with_pages.unanswerable
    knew = round(with_pages.abstains * none)
    short = max(0, math.ceil(ABSTAINS_TARGET * none - 1e-9) - knew)
    why = (
        f" ({knew} of {none}, {short} short; the questions with no answer were written to share "
        "a name or words with what the memory holds: which football team Ollie supports, what "
        "Daniel earns as a junior baker)"
        if short
        else ""
    )
    found.append(
        f"- it says it does not know for at least {ABSTAINS_TARGET:.0%} of the questions with "
        f"none — {with_pages.abstains:.3f}, {_yes(with_pages.abstains >= ABSTAINS_TARGET)}{why}."
    )
    return found


def _yes(met: bool) -> str:
    return "met" if met else "**not met**"


def section(run_: Run) -> str:
    total = sum(len(results) for (_, pages), results in run_.results.items() if pages)
    lines = [
        "## Recall quality: the block and the ask bar against BM25 and dense-only, on labelled "
        "questions\n",
        f"{total} questions written by hand (`bench/recall_sets/`), each with the facts that "
        "answer it marked, or none: over the demo household (`make demo`'s lines and its rooms, "
        "devices and people as pages), a product team's memory, a coding agent's memory and "
        'three two-person conversations over many sessions (every turn a fact, "Name (date): '
        'words", each speaker with a page). Each set is loaded into a memory of its own with '
        "its pages and again without any, with MiniLM vectors "
        f"(`{run_.embedder}`), and asked question by question: the block "
        f"(`retrieval.context`, {BUDGET} tokens, its lines best first), the ask bar's first "
        "line (`memory.ask.answer`), and two baselines over the same facts that know nothing "
        "of pages, BM25 (Okapi, IDF over the memory's facts, the same stems as full text) and "
        "the exact dense top-k of the same question vector. recall@k: the share of a "
        "question's answering facts among the first k lines; MRR: the reciprocal rank of the "
        "first. Measured in "
        f"{run_.seconds:.0f} s.\n",
        *_sets_table(run_),
        "",
        *_quality_table(run_),
        "",
        'The ask bar: its first line answers when it is an answering fact; it says "brain '
        "doesn't know that yet\" when no line passes the relevance floor.\n",
        *_ask_table(run_),
        "",
        "The ranking's weights (`knowledge/retrieval.py`) were chosen on two thirds of the "
        f"questions (every {HELD_OUT_EVERY}rd of each set held out), for the sum of the "
        "block's recall@10 and MRR, the first line's answers and the questions it knows it "
        "cannot answer, among the weights whose first line answers at least 70% of the "
        "questions with an answer (a neighbour above it on the sum answers fewer); within "
        "0.005 of the chosen sum a neighbour is a tie, and the value first chosen was kept. "
        "The chosen ones beside each neighbour, one at a time (the dev questions, with and "
        "without pages):\n",
        *_weights_table(run_),
        "",
        *_split_table(run_),
        "",
        "Study (`brain learn TOPIC`): what `memory.study.facts_about` reads for ten labelled "
        "topics of the demo household (three of them about nothing it holds), through the same "
        "ranking.\n",
        *_topics_table(run_),
        "",
        "Targets:\n",
        *_targets(run_),
        "",
    ]
    return "\n".join(lines)


def recall_quality() -> str:
    """The section ``make bench`` writes (see the module docstring)."""
    return section(run(keep_pools=True))


def misses(run_: Run, count: int) -> str:
    lines = []
    for result in _all(run_, True):
        if result.answers and not result.answers & set(result.block[:10]):
            lines.append(f"- {result.question.text} (first line #{result.ask_first})")
        elif not result.answers and result.ask_first is not None:
            lines.append(f"- {result.question.text}: answered #{result.ask_first}, should not know")
    return "\n".join(lines[:count])


def main(argv: Sequence[str] | None = None) -> None:
    """``python manage.py shell -c "from bench.recall import main; main()"``: the section,
    printed and put into docs/BENCHMARKS.md in place of the one there. ``--misses N``: the
    questions whose block misses their answer; ``--fit``: the grid searched again."""
    from django.conf import settings

    parser = argparse.ArgumentParser(prog="bench.recall")
    parser.add_argument("--misses", type=int, default=0, metavar="N")
    parser.add_argument("--fit", action="store_true")
    args = parser.parse_args(argv or [])
    measured = run(keep_pools=True)
    if args.fit:
        dev = _all(measured, True, split="dev") + _all(measured, False, split="dev")
        for value, choice, scores in fit(dev)[:15]:
            print(
                f"{value:.3f} {choice} recall@10 {_f(scores.recall10['block'])} MRR "
                f"{_f(scores.mrr['block'])} answers {_f(scores.answers)} does not know "
                f"{_f(scores.abstains)}"
            )
        return
    from bench.machine import machine

    heading, _, body = section(measured).partition("\n\n")
    stamp = (
        f"Measured {timezone.now():%Y-%m-%d %H:%M} UTC on its own, with `python manage.py shell "
        f'-c "from bench.recall import main; main()"`, on: {machine()}; load average (1 min) '
        f"{os.getloadavg()[0]:.1f}.\n"
    )
    text = f"{heading}\n\n{stamp}\n{body}"
    print(text)
    if args.misses:
        print(misses(measured, args.misses))
    replace_section(Path(settings.BASE_DIR) / "docs" / "BENCHMARKS.md", text)


HEADING = "## Recall quality:"


def replace_section(path: Path, text: str) -> None:
    """``text`` in place of the file's section that starts with HEADING (appended when there
    is none), the rest of the file as it was."""
    before = path.read_text() if path.exists() else "# Benchmarks\n"
    start = before.find(HEADING)
    if start < 0:
        path.write_text(before.rstrip("\n") + "\n\n" + text)
        return
    end = before.find("\n## ", start + len(HEADING))
    after = before[end + 1 :] if end >= 0 else ""
    path.write_text(before[:start] + text + ("\n" + after if after else ""))
