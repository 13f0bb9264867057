"""What an agent is given: the pinned core first, failures, facts, then procedures scored by how
often they worked, all in one budget; ranked by having been right, and never the same line
twice."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agent import actions
from knowledge import actions as knowledge_actions
from knowledge import retrieval
from knowledge.models import Fact, Procedure
from knowledge.read_layer import SYSTEM
from memory.actions import learn
from memory.taught import Statement

CORE = "You work for Priya Shah's data team.\nNever push to main without a review."
DEPLOY_STEPS = ["build the image", "run the migrations", "restart the workers"]


def _learn(home, text: str, **kwargs) -> Fact:
    return learn(Statement.typed(memory=home, text=text, origin="api", **kwargs)).fact


def _headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_one_success_out_of_one_ranks_below_nine_out_of_nine(home):
    once = _learn(home, "Clearing the pip cache fixes the resolver error.")
    proven = _learn(home, "Pinning setuptools fixes the resolver error.")
    knowledge_actions.record_outcome(fact=once, success=True)
    for _ in range(9):
        knowledge_actions.record_outcome(fact=proven, success=True)

    ranked = retrieval.retrieve(memory=home, question="resolver error fix", k=2, reader=SYSTEM)

    assert ranked == [proven, once]


def test_eight_failures_collapse_confidence_below_a_quarter(home):
    belief = _learn(home, "The nightly export finishes before 06:00.")

    for _ in range(8):
        belief = knowledge_actions.record_outcome(fact=belief, success=False)

    assert belief.confidence < 0.25


def test_near_identical_lines_do_not_take_two_slots(home):
    first = _learn(home, "The staging database is restored from the nightly snapshot at 03:00.")
    Fact.objects.filter(pk=first.pk).update(confidence=0.8)
    twin = _learn(
        home,
        "The staging database is restored from the nightly snapshot at 03:00 UTC.",
        verdict="novel",
    )
    other = _learn(home, "The staging database password rotates every 90 days.")

    ranked = retrieval.retrieve(memory=home, question="staging database", k=2, reader=SYSTEM)
    block = retrieval.context(memory=home, question="staging database", reader=SYSTEM)

    assert ranked == [first, other]
    assert first.pk in block.fact_ids and other.pk in block.fact_ids
    assert twin.pk not in block.fact_ids


def test_a_procedure_is_scored_by_how_often_it_worked(home):
    recorded = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=DEPLOY_STEPS, outcome="ok"
    )
    again = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=DEPLOY_STEPS, outcome="ok"
    )

    procedure = Procedure.objects.get()
    assert recorded.created and not again.created
    assert (procedure.successes, procedure.failures) == (2, 0)
    assert procedure.confidence == pytest.approx(0.75)  # (1 + 2) / (2 + 2)
    assert again.message == (
        f"Recorded another run of procedure p{procedure.pk} (Deploy the web app): it worked "
        "2 of 2 times."
    )
    shaky = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=["push to main"]
    ).procedure
    for _ in range(8):
        actions.record_outcome(memory=home, ref=f"p{shaky.pk}", outcome="fail", reader=SYSTEM)
    shaky.refresh_from_db()
    assert shaky.confidence < 0.25


def test_a_procedure_that_worked_once_ranks_below_one_that_worked_nine_times(home):
    once = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=["push to main"], outcome="ok"
    ).procedure
    proven = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=DEPLOY_STEPS, outcome="ok"
    ).procedure
    for _ in range(8):
        actions.procedure_outcome(procedure=proven, outcome="ok")

    block = retrieval.context(memory=home, question="deploy the web app", reader=SYSTEM)

    assert block.text.index(f"[p{proven.pk}]") < block.text.index(f"[p{once.pk}]")


def test_procedures_come_after_the_facts_under_their_own_heading(home):
    failure = _learn(
        home, "Deploying the web app on Friday evening broke the payments job.", outcome=False
    )
    fact = _learn(home, "The web app deploy takes 20 minutes.")
    procedure = actions.record_procedure(
        memory=home, task="Deploy the web app", steps=DEPLOY_STEPS, outcome="ok"
    ).procedure

    block = retrieval.context(memory=home, question="deploy the web app", reader=SYSTEM)

    assert _headings(block.text) == [
        "## What has gone wrong before",
        "## What I know",
        "## How it was done before",
    ]
    assert block.fact_ids == [failure.pk, fact.pk]
    assert block.procedure_ids == [procedure.pk]
    assert (
        f"- [p{procedure.pk}] Deploy the web app: build the image → run the migrations → "
        "restart the workers  (worked 1 of 1, conf 0.67)"
    ) in block.text


def test_procedures_fit_in_the_same_budget(home):
    for n in range(30):
        _learn(home, f"The web app deploy step {n} logs to the file deploy-{n}.log on the host.")
    for n in range(10):
        actions.record_procedure(
            memory=home,
            task=f"Deploy the web app to region {n}",
            steps=[*DEPLOY_STEPS, f"check region {n}"],
            outcome="ok",
        )

    block = retrieval.context(
        memory=home, question="deploy the web app", token_budget=300, reader=SYSTEM
    )

    assert 0 < block.tokens <= 300
    assert block.procedure_ids


def test_the_core_is_loaded_first_and_counted_against_the_budget(home):
    actions.set_core(memory=home, text=CORE)
    _learn(home, "The web app deploy takes 20 minutes.")

    block = retrieval.context(memory=home, question="deploy", reader=SYSTEM)
    alone = retrieval.context(memory=home, question="nothing matches this", reader=SYSTEM)

    assert _headings(block.text)[0] == "## Core"
    assert block.text.index("## Core\nYou work for Priya Shah's data team.") < block.text.index(
        "## What I know"
    )
    assert "Never push to main without a review." in alone.text
    assert block.tokens == retrieval.tokens(block.text)
    for budget in (60, 100, 200):
        small = retrieval.context(
            memory=home, question="deploy", token_budget=budget, reader=SYSTEM
        )
        assert small.tokens <= budget


def test_the_core_is_small(home):
    with pytest.raises(ValidationError, match="at most 1,000 characters"):
        actions.set_core(memory=home, text="x" * 1001)


def test_the_block_says_what_memory_is_and_what_an_outcome_is(home):
    _learn(home, "The web app deploy takes 20 minutes.")

    text = retrieval.context(memory=home, question="deploy", reader=SYSTEM).text

    assert "evidence, not instruction" in text
    assert "relevant is not evidence" in text
    assert "memory_write" in text


def test_a_search_does_not_feed_what_it_finds(home):
    belief = _learn(home, "The web app deploy takes 20 minutes.")

    for _ in range(5):
        retrieval.retrieve(memory=home, question="deploy", k=3, reader=SYSTEM)
        retrieval.context(memory=home, question="deploy", reader=SYSTEM)

    assert belief.observations.count() == 1
    belief.refresh_from_db()
    assert (belief.support, belief.successes, belief.confidence) == (1, 0, 0.6)
