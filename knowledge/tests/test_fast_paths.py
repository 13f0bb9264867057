"""context() is fast, and gives exactly the block the plain path gives: the same lines in the
same order, for the same questions, subjects, readers and budgets."""

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from bench import knowledge as bench
from knowledge import embedding, gate, retrieval, search, statements
from knowledge.embedding import get_embedder
from knowledge.models import Fact, Procedure, Subject
from knowledge.read_layer import SYSTEM

QUESTIONS = 500
BUDGETS = (120, 600, 2_000)


@pytest.fixture
def household(transactional_db):
    """A synthetic household (committed, as `make bench` loads it), with what the plain path
    has to get right besides: failures, near-identical lines, procedures, a core, facts that
    must never be read (forgotten, expired) and facts about several subjects at once."""
    household = bench.generate_household(slug="fast-paths", count=3_000, seed=5)
    memory = household.memory
    memory.core = "I work for the Hills household.\nNever unlock the front door."
    memory.save(update_fields=["core"])
    embedder = get_embedder()
    kitchen, sarah = household.subjects[0], Subject.objects.get(memory=memory, name="Sarah")

    def add(text, **fields):
        fact = Fact.objects.create(
            memory=memory,
            text=text,
            normalized=statements.normalise(text),
            channel=Fact.Channel.TYPED,
            embedding=embedder.embed_one(text),
            embedder=embedder.name,
            **fields,
        )
        return fact

    for n in range(12):  # near-identical lines, for the diversity re-ranking
        add(f"The kitchen ceiling light flickers when the oven is on ({n % 3}).", confidence=0.9)
        add(f"Avoid: restarting the kitchen hub while the oven is on, try {n}", valence="failure")
    both = add("Sarah cooks in the kitchen on Sundays at 6.", confidence=0.95)
    both.subjects.add(kitchen, sarah)
    add("The kitchen is painted blue.", status=Fact.Status.FORGOTTEN)
    for n in range(5):
        Procedure.objects.create(
            memory=memory,
            task=f"Reset the kitchen ceiling light {n}",
            steps=["Switch it off at the wall", "Wait ten seconds", "Switch it on"],
            normalized=statements.normalise(f"reset the kitchen ceiling light {n}"),
            text=f"Reset the kitchen ceiling light {n}: switch it off, wait, switch it on.",
            successes=n,
            failures=1,
        )
    yield household
    bench.delete_household("fast-paths")


def _questions(household, count: int, seed: int = 9):
    sampler = bench.Sampler(household.subjects, bench.subject_shares(40), seed)
    about = np.random.default_rng(seed).choice(
        40, size=count, p=np.array(sampler.shares) / sum(sampler.shares)
    )
    about[1::2] = -1
    texts, _ = sampler.sample(about, np.random.default_rng(seed + 1))
    in_play = [[household.subjects[i]] if i >= 0 else [] for i in about.tolist()]
    texts[::7] = ["How do I reset the kitchen ceiling light?"] * len(texts[::7])
    # Failures are recalled only when relevant: these make the household's failures relevant.
    texts[5::13] = ["Can I restart the kitchen hub while the oven is on?"] * len(texts[5::13])
    texts[3::11] = [""] * len(texts[3::11])  # no question: the subjects alone
    return list(zip(texts, in_play, strict=True))


def _loosened(questions):
    """Every other question with a word no fact holds: its every-word tier finds nothing, so
    the looser tiers run (a new statement the gate judges is often so)."""
    return [
        (f"{question} quokka" if n % 2 and question else question, subjects)
        for n, (question, subjects) in enumerate(questions)
    ]


def _seen(block: retrieval.Context):
    return block.text.replace(block.nonce, "NONCE"), block.fact_ids, block.procedure_ids


def test_the_fast_path_gives_the_plain_paths_block_for_500_generated_questions(household):
    memory = household.memory
    resting = get_user_model().objects.create(username="resting", is_active=False)
    differ = []
    for n, (question, subjects) in enumerate(_questions(household, QUESTIONS)):
        asked = {
            "memory": memory,
            "question": question,
            "subjects": subjects,
            "token_budget": BUDGETS[n % len(BUDGETS)],
            "reader": resting if n % 50 == 0 else SYSTEM,
        }
        fast, plain = retrieval.context(**asked), retrieval.plain_context(**asked)
        if _seen(fast) != _seen(plain):
            differ.append(question)

    assert differ == []


def test_the_questions_reach_every_part_of_the_block(household):
    """The comparison above means something only if the blocks hold what can go wrong."""
    memory = household.memory
    blocks = [
        retrieval.context(memory=memory, question=q, subjects=s, token_budget=2_000, reader=SYSTEM)
        for q, s in _questions(household, 60)
    ]

    assert sum(bool(block.fact_ids) for block in blocks) >= 50  # not those with nothing asked
    assert any("## What has gone wrong before" in block.text for block in blocks)
    assert any(block.procedure_ids for block in blocks)
    assert all("## Core" in block.text for block in blocks)


def test_near_identical_lines_are_left_out_by_both_paths(household):
    question = "Why does the kitchen ceiling light flicker when the oven is on?"
    fast = retrieval.context(
        memory=household.memory, question=question, token_budget=2_000, reader=SYSTEM
    )
    plain = retrieval.plain_context(
        memory=household.memory, question=question, token_budget=2_000, reader=SYSTEM
    )

    flickers = [line for line in fast.text.splitlines() if "flickers" in line]
    assert 1 <= len(flickers) <= 3  # one line per wording, not twelve
    assert _seen(fast) == _seen(plain)


def _ranks_as_text_matches_does(household, seed: int) -> None:
    memory = household.memory
    readable = Fact.objects.as_system("the test reads its memory").for_memory(memory).live()
    loose = 0
    for question, _ in _loosened(_questions(household, 100, seed=seed)):
        found = search.candidates(memory, readable, subject_ids=[], question=question, limit=40)
        plain = search.text_matches(readable.only("pk"), question, 40)

        assert found.text == [fact.pk for fact in plain]
        loose += question.endswith("quokka") and bool(found.text)
    assert loose >= 30  # the looser tiers ran, and found


def test_the_fast_full_text_ranks_as_text_matches_does(household):
    _ranks_as_text_matches_does(household, seed=3)


@pytest.fixture(
    params=[(20, 100), (20, 1_000), (200, 3_500)],
    ids=["walks that come back short", "walks that find enough", "walks of the whole memory"],
)
def walking(request, monkeypatch):
    """Every full-text tier of every question walks the memory's newest facts before it asks the
    index, with ``(TEXT_CANDIDATES, WALK)`` of these sizes. A tier of the household's template
    words matches about 7% of its facts: 20 of them are within its newest 1,000 facts, not
    within 100, so both halves of a walking tier (``search._tier_ctes``) are compared."""
    candidates, walk = request.param
    monkeypatch.setattr(search, "TEXT_CANDIDATES", candidates)
    monkeypatch.setattr(search, "WALK", walk)
    monkeypatch.setattr(search, "_walking", _every_tier)


def _every_tier(words: list[str]) -> list[bool]:
    return [True] * len(search._tiers(words))


def _no_tier(words: list[str]) -> list[bool]:
    return [False] * len(search._tiers(words))


def test_a_walking_full_text_ranks_as_text_matches_does(household, walking):
    _ranks_as_text_matches_does(household, seed=4)


def test_the_fast_path_gives_the_plain_paths_block_when_tiers_walk(household, walking):
    memory = household.memory
    differ = []
    for n, (question, subjects) in enumerate(_loosened(_questions(household, 100, seed=6))):
        asked = {"memory": memory, "question": question, "subjects": subjects, "reader": SYSTEM}
        asked["token_budget"] = BUDGETS[n % len(BUDGETS)]
        fast, plain = retrieval.context(**asked), retrieval.plain_context(**asked)
        if _seen(fast) != _seen(plain):
            differ.append(question)

    assert differ == []


def test_the_gates_neighbours_are_the_same_whether_tiers_walk_or_not(household, walking):
    memory = household.memory
    live = Fact.objects.as_system("the test reads its memory").for_memory(memory).live()
    walks = search._walking
    for text, _ in _loosened(_questions(household, 60, seed=8)):
        walked = search.neighbours(memory, live, text=text, embedding=None, limit=gate.NEIGHBOURS)
        search._walking = _no_tier
        try:
            indexed = search.neighbours(
                memory, live, text=text, embedding=None, limit=gate.NEIGHBOURS
            )
        finally:
            search._walking = walks

        assert walked == indexed


def test_a_tier_walks_where_the_words_it_joins_are_common_and_it_is_expected_to_run(monkeypatch):
    shares = {"kettle": 0.07, "descaling": 0.07, "zebra": 0.0, "between": None, "cupboard": 0.07}
    rows = 400_000
    monkeypatch.setattr(search.word_stats, "shares", lambda words: (rows, shares))

    # Tiers: every word, (with three words or more) any two, any one.
    assert search._walking(["descaling", "kettle"]) == [True, False]
    # The rare zebra leaves every word empty: any two runs, and two of them are common.
    assert search._walking(["descaling", "kettle", "zebra"]) == [False, True, False]
    # Every word common: it finds enough, so any two is not expected to run.
    assert search._walking(["cupboard", "descaling", "kettle"]) == [True, False, False]
    # A stop word is left out of the query, and of the estimate.
    assert search._walking(["between", "kettle"]) == [True, False]
    # Any one word is the planner's to estimate, and it walks there itself.
    assert search._walking(["kettle"]) == [False]
    assert search._walking(["kettle", "zebra"]) == [False, False]
    rows = 10_000  # a small table: the index reads a few hundred rows, cheaper than a walk
    assert search._walking(["descaling", "kettle", "zebra"]) == [False, False, False]


def test_each_subjects_slice_is_its_most_certain_facts_newest_first_on_a_tie(household):
    memory = household.memory
    readable = Fact.objects.as_system("the test reads its memory").for_memory(memory).live()
    kitchen, sarah = household.subjects[0], Subject.objects.get(memory=memory, name="Sarah")
    found = search.candidates(
        memory, readable, subject_ids=[sarah.pk, kitchen.pk], question="", limit=40
    )
    plain = [
        fact.pk
        for subject in (sarah, kitchen)
        for fact in readable.filter(subjects=subject).order_by("-confidence", "-pk")[:40]
    ]

    assert found.about == plain
    assert found.procedures


def test_context_takes_three_round_trips_where_the_plain_path_takes_a_dozen(
    household, django_assert_num_queries
):
    memory, kitchen = household.memory, household.subjects[0]
    Procedure.objects.filter(memory=memory).delete()
    question = "The kitchen is aired every morning around 7:30."
    retrieval.context(memory=memory, question=question, subjects=[kitchen], reader=SYSTEM)  # warm

    # The subjects' labels; slices, full text and procedures; vectors and rows.
    with django_assert_num_queries(3):
        retrieval.context(memory=memory, question=question, subjects=[kitchen], reader=SYSTEM)
    with django_assert_num_queries(15):  # 1 + 1 + 2 full-text tiers + 4 vectors + 7 more
        retrieval.plain_context(memory=memory, question=question, subjects=[kitchen], reader=SYSTEM)


def test_a_question_asked_again_is_not_embedded_again(household, monkeypatch):
    calls = []
    embedder = get_embedder()
    real = type(embedder).embed_one
    monkeypatch.setattr(
        type(embedder), "embed_one", lambda self, text: calls.append(text) or real(self, text)
    )
    question = "Who takes the bins out on Thursday evening, and when?"
    first = retrieval.context(memory=household.memory, question=question, reader=SYSTEM)
    again = retrieval.context(memory=household.memory, question=question, reader=SYSTEM)

    assert calls == [question]
    assert first.fact_ids == again.fact_ids


def test_the_question_vector_kept_is_the_one_the_embedder_gives():
    embedder = get_embedder()
    text = "The loft hatch sticks in wet weather."

    asked = embedding.embed_question(embedder, text)
    assert embedding.question_vector(embedder, text) == asked
    assert embedding.question_vector_soon(embedder, text).result() == asked


def test_an_embedder_failure_reaches_the_caller_through_the_future():
    class Broken:
        name = "broken-v1"

        def embed_one(self, text):
            raise RuntimeError("the model file is missing")

    with pytest.raises(RuntimeError, match="model file"):
        embedding.question_vector_soon(Broken(), "anything").result()


def test_a_subjects_slice_follows_every_change_of_confidence_and_liveness(home, office_lamp):
    facts = []
    for n in range(6):
        fact = Fact.objects.create(
            memory=home,
            text=f"The office lamp note {n}.",
            normalized=f"the office lamp note {n}",
            channel=Fact.Channel.TYPED,
            confidence=0.5,
        )
        fact.subjects.add(office_lamp)
        facts.append(fact)
    readable = Fact.objects.as_system("the test reads its memory").for_memory(home).live()

    def slice_():
        found = search.candidates(
            home, readable, subject_ids=[office_lamp.pk], question="", limit=3
        )
        return found.about

    facts[0].confidence = 0.9
    facts[0].save()
    Fact.objects.filter(pk=facts[1].pk).update(confidence=0.8)
    Fact.objects.filter(pk=facts[5].pk).update(status=Fact.Status.FORGOTTEN)

    assert slice_() == [facts[0].pk, facts[1].pk, facts[4].pk]
    Fact.objects.filter(pk=facts[0].pk).update(status=Fact.Status.FILED, confidence=0.1)
    Fact.objects.filter(pk=facts[5].pk).update(status=Fact.Status.FILED)
    assert slice_() == [facts[1].pk, facts[5].pk, facts[4].pk]


def _plain_neighbours(memory, text, embedding):
    """What the gate read before ``search.neighbours``, one query each: the same words, the
    full-text tiers, the vector neighbours, their rows and their vectors' closeness."""
    from pgvector.django import CosineDistance

    live = Fact.objects.as_system("the test reads its memory").for_memory(memory).live()
    found = {
        fact.pk for fact in live.filter(normalized=statements.normalise(text))[: gate.NEIGHBOURS]
    }
    found |= {fact.pk for fact in search.text_matches(live, text, gate.NEIGHBOURS)}
    found |= {pk for pk, _ in search.nearest(memory, embedding, limit=gate.NEIGHBOURS)}
    rows = (
        live.filter(pk__in=found, embedder=get_embedder().name)
        .annotate(distance=CosineDistance("embedding", embedding))
        .values_list("pk", "distance")
    )
    closeness = {pk: 1.0 - distance for pk, distance in rows}
    return {pk: closeness.get(pk) for pk in live.filter(pk__in=found).values_list("pk", flat=True)}


def test_the_gate_reads_the_plain_queries_neighbours_and_judges_the_labelled_pairs_alike(db, home):
    """The gate's one statement against the eight queries it replaced: for every labelled
    pair's new statement, in a memory holding every pair's old one, the same neighbours with
    the same closeness and the same verdict."""
    from bench.gate_quality import load_pairs

    embedder = get_embedder()
    pairs = load_pairs()
    for pair in pairs:
        Fact.objects.create(
            memory=home,
            text=pair.old,
            normalized=statements.normalise(pair.old),
            channel=Fact.Channel.TYPED,
            taught_by_name=pair.old_by,
            embedding=embedder.embed_one(pair.old),
            embedder=embedder.name,
        )
    # As autovacuum would on a live server. In a test database no one has analysed, the planner
    # ran the plain full-text query's subquery again for every row (100 ms a query, 2 minutes).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_fact")
    differ, verdicts = [], set()
    for pair in pairs:
        vector = embedder.embed_one(pair.new)
        near = gate.neighbours(home, pair.new, vector, reader=SYSTEM)
        fast = {fact.pk: closeness for fact, closeness in near.items()}
        plain = _plain_neighbours(home, pair.new, vector)
        same_closeness = fast.keys() == plain.keys() and all(
            (fast[pk] is None) == (plain[pk] is None)
            and (fast[pk] is None or abs(fast[pk] - plain[pk]) < 1e-6)
            for pk in fast
        )
        judged = gate.judge(near, pair.new, outcome=None, speaker=pair.new_by)
        verdicts.add(judged.verdict)
        with_plain = _judged_over(pair, plain)
        # Two targets as close as each other are as good: the plain queries' order was the
        # table's, so a tie could go to either.
        target = fast[judged.target.pk] if judged.target else None
        if not same_closeness or not _alike((judged.verdict, target), with_plain):
            differ.append(pair.id)

    assert differ == []
    assert {"novel", "same", "contradiction"} <= verdicts  # the comparison judged every kind


def test_the_gates_neighbours_come_as_the_rows_the_orm_reads(db, home, alice):
    """Each neighbour is built from the gate's own statement: every field but the vectors as
    ``Fact.objects.without_vectors()`` reads it, the vectors left deferred as there."""
    from memory.actions import learn
    from memory.taught import Statement

    Subject.objects.create(memory=home, kind=Subject.Kind.ROOM, name="Kitchen")
    learn(
        Statement.typed(
            memory=home, text="The kettle in the kitchen is descaled monthly.", origin="typed"
        )
    )
    learn(
        Statement.said(
            memory=home,
            text="The kettle descaling failed.",
            origin="voice",
            by=alice,
            outcome=False,
        )
    )
    learn(
        Statement.typed(
            memory=home, text="The kitchen kettle is red.", origin="typed", subjects=["kitchen"]
        )
    )
    vector = get_embedder().embed_one("The kettle in the kitchen is descaled weekly.")

    near = gate.neighbours(
        home, "The kettle in the kitchen is descaled weekly.", vector, reader=SYSTEM
    )

    assert len(near) == 3
    orm = Fact.objects.without_vectors().in_bulk([fact.pk for fact in near])
    names = [
        f.attname
        for f in Fact._meta.concrete_fields
        if f.attname not in ("embedding", "search_vector")
    ]
    for fact in near:
        assert {n: getattr(fact, n) for n in names} == {n: getattr(orm[fact.pk], n) for n in names}
        assert fact.get_deferred_fields() == orm[fact.pk].get_deferred_fields()
        assert fact.taught_by_name == orm[fact.pk].taught_by_name


def _judged_over(pair, plain):
    """``gate.judge``'s verdict and target over the plain neighbours."""
    facts = Fact.objects.in_bulk(list(plain))
    near = {facts[pk]: closeness for pk, closeness in plain.items()}
    judged = gate.judge(near, pair.new, outcome=None, speaker=pair.new_by)
    return judged.verdict, plain[judged.target.pk] if judged.target else None


def _alike(one, other) -> bool:
    (verdict, closeness), (other_verdict, other_closeness) = one, other
    if verdict != other_verdict or (closeness is None) != (other_closeness is None):
        return False
    return closeness is None or abs(closeness - other_closeness) < 1e-6


def _plain_greedy(window: list, redundancy: np.ndarray) -> tuple[list, set[int]]:
    """Maximal marginal relevance the plain way: every round scores every candidate left."""
    size = len(window)
    worst, left, order, near = [0.0] * size, list(range(size)), [], set()
    while left:
        best, best_score = 0, None
        for position, index in enumerate(left):
            score = (
                retrieval.MMR_LAMBDA * (1.0 - index / size)
                - (1 - retrieval.MMR_LAMBDA) * worst[index]
            )
            if best_score is None or score > best_score:
                best, best_score = position, score
        chosen = left.pop(best)
        if worst[chosen] > 0:
            near.add(window[chosen].pk)
        order.append(chosen)
        for other in range(size):
            if redundancy[chosen, other] > 0:
                worst[other] = max(worst[other], float(redundancy[chosen, other]))
    return [window[index] for index in order], near


def test_the_diversity_reranking_places_lines_as_the_plain_greedy_loop_does():
    rng = np.random.default_rng(11)
    for round_ in range(200):
        size = int(rng.integers(2, retrieval.MMR_WINDOW + 1))
        # A few tight clusters, so near-identical pairs (and ties of score) are common.
        centres = rng.normal(size=(int(rng.integers(1, 6)), 8))
        vectors = centres[rng.integers(0, len(centres), size)] + rng.normal(
            scale=float(rng.choice([0.01, 0.05, 0.2])), size=(size, 8)
        )
        facts = [
            search.Row(pk, "", str(rng.choice(["fact", "failure"])), 0.5, 1, 0, 0, [], None)
            for pk in range(1000 + round_ * 100, 1000 + round_ * 100 + size)
        ]
        by_pk = {fact.pk: vector for fact, vector in zip(facts, vectors, strict=True)}
        matrix = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cosines = (matrix @ matrix.T).astype(np.float32)
        classes = np.array([fact.valence for fact in facts])
        cosines[classes[:, None] != classes[None, :]] = 0.0
        redundancy = np.where(cosines >= retrieval.NEAR_IDENTICAL, cosines, 0.0)
        np.fill_diagonal(redundancy, 0.0)

        placed, near = retrieval._rerank(facts, by_pk)

        expected, expected_near = _plain_greedy(facts, redundancy)
        assert [fact.pk for fact in placed] == [fact.pk for fact in expected]
        assert near == expected_near


@pytest.fixture
def crowded(db):
    """A memory where one question's words match 700 facts, some of which a reader may not
    read: what the full-text tiers filter by the read rule after the sort (``_tier_ctes``)."""
    from knowledge import passages
    from knowledge.models import Label, Membership, Memory, Permission, Role, Source

    memory = Memory.objects.create(slug="crowded", name="Crowded")
    household = passages.add(
        Source.objects.create(memory=memory, kind=Source.Kind.NOTE, title="Shared"), ["shared"]
    )[0]
    private = Label.objects.create(memory=memory, name="Private", meaning="Sarah's own.")
    Role.objects.create(memory=memory, name="Sarah").labels.add(private)
    secret = passages.add(
        Source.objects.create(memory=memory, kind=Source.Kind.NOTE, title="Sarah's"),
        ["private"],
        labels=[private],
    )[0]
    tom = get_user_model().objects.create(username="tom")
    Membership.objects.create(memory=memory, user=tom, permission=Permission.READ)

    def add(n: int, passage) -> None:
        text = f"Descale the kettle with citric acid, round {n}."
        fact = Fact.objects.create(
            memory=memory,
            text=text,
            normalized=statements.normalise(text),
            channel=Fact.Channel.TYPED,
            status=Fact.Status.FILED,
        )
        passages.cite(fact, [passage])

    return memory, tom, household, secret, add


@pytest.mark.parametrize(
    "unreadable_newest",
    [
        pytest.param(150, id="the newest matches mostly readable"),
        pytest.param(390, id="too few readable among the newest, older ones read too"),
    ],
)
def test_a_reader_gets_the_plain_paths_block_when_most_matches_are_not_theirs(
    crowded, unreadable_newest
):
    memory, tom, household, secret, add = crowded
    for n in range(700 - unreadable_newest):  # older: readable by Tom
        add(n, household)
    for n in range(700 - unreadable_newest, 700):  # newest: Sarah's alone
        add(n, secret)
    assert (
        not Fact.objects.as_system("the test reads its memory")
        .for_memory(memory)
        .readable_by(tom)
        .filter(text__endswith="699.")
    )

    for question in ("descale the kettle", "citric acid kettle", "kettle round 12"):
        asked = {"memory": memory, "question": question, "reader": tom, "token_budget": 2_000}
        fast, plain = retrieval.context(**asked), retrieval.plain_context(**asked)
        assert _seen(fast) == _seen(plain), question
        assert "699." not in fast.text and fast.fact_ids
