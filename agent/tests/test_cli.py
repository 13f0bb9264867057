"""`brain agent …` from the terminal: against the local database and against a running server,
the same words either way; refusals in one line, the outcome vocabulary closed."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.authtoken.models import Token

from agent import actions
from brain.testing import database_url
from knowledge.models import Episode, Fact, Memory, Procedure
from knowledge.read_layer import SYSTEM

WRAPPER = Path(django_settings.BASE_DIR) / "bin" / "brain"


def agent(*args: str) -> str:
    """`brain agent ARGS` in this process, against the test database; what it printed."""
    out = io.StringIO()
    call_command("agent", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def shell(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`bin/brain agent ARGS` in a real shell, as a person or a script runs it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    clean.update(DATABASE_URL=database_url(connection.settings_dict), BRAIN_EMBEDDER="hash")
    return subprocess.run(
        [str(WRAPPER), "agent", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def a_belief(memory: Memory, text: str = "Deploys take 20 minutes.") -> Fact:
    actions.encode(memory=memory, text=text, outcome="ok")
    actions.sleep(memory=memory)
    return Fact.objects.for_memory(memory).get(text=text)


# Against the local database -------------------------------------------------------------------


def test_encode_records_an_episode_with_its_outcome(home):
    out = agent("encode", "The 60MB CSV timed out in validation.", "--outcome", "fail")

    episode = Episode.objects.get()
    assert (episode.text, episode.outcome) == ("The 60MB CSV timed out in validation.", "fail")
    assert out.startswith(f"Recorded episode #{episode.pk} (fail)")


def test_an_episode_without_an_outcome_is_unknown(home):
    agent("encode", "The deploy ran on Tuesday.")

    assert Episode.objects.get().outcome == "unknown"


@pytest.mark.parametrize("word", ["failure", "success", "FAIL", "yes"])
def test_outcome_words_outside_the_vocabulary_are_refused_not_coerced(home, word):
    with pytest.raises(CommandError) as refused:
        agent("encode", "The deploy hung.", "--outcome", word)

    assert str(refused.value) == f"outcome must be one of ok, fail or unknown, not {word!r}."
    assert not Episode.objects.exists()


def test_an_outcome_for_a_fact_is_ok_or_fail_and_nothing_else(home):
    fact = a_belief(home)

    with pytest.raises(CommandError) as refused:
        agent("outcome", str(fact.pk), "success")
    recorded = agent("outcome", str(fact.pk), "ok")

    assert str(refused.value) == "The outcome is ok or fail, not 'success'; nothing was recorded."
    assert recorded.startswith(f"Recorded that acting on fact #{fact.pk} worked: confidence")
    fact.refresh_from_db()
    assert (fact.successes, fact.failures) == (1, 0)


def test_consolidate_distils_what_was_encoded_and_retrieve_finds_it(home):
    agent("encode", "Deploys take 20 minutes.", "--outcome", "ok")

    slept = agent("consolidate")
    found = agent("retrieve", "how long do deploys take", "-k", "3")

    fact = Fact.objects.get(text="Deploys take 20 minutes.")
    assert slept.startswith("Distilled 1 episode into 1 new belief.")
    assert found.splitlines()[0] == (
        f"[{fact.pk}] Deploys take 20 minutes.  (conf {fact.confidence:.2f}, n={fact.support})"
    )


def test_context_prints_the_block_for_a_goal(home):
    fact = a_belief(home)

    block = agent("context", "deploy the app", "--budget", "300")

    assert block.startswith("<memory-")
    assert f"- [{fact.pk}] Deploys take 20 minutes." in block


def test_explain_says_where_a_belief_came_from(home):
    fact = a_belief(home)

    explained = json.loads(agent("explain", str(fact.pk)))

    assert (explained["id"], explained["text"]) == (fact.pk, "Deploys take 20 minutes.")


def test_stats_counts_beliefs_and_waiting_episodes(home):
    a_belief(home)
    agent("encode", "The cache warms in a minute.")

    said = agent("stats")

    assert said == actions.stats(memory=home, reader=SYSTEM).message + "\n"


def test_refusals_name_the_problem_in_one_line(home):
    for args, message in [
        (("explain", "424242"), "There is no fact #424242 you can read."),
        (("--memory", "nope", "stats"), "There is no memory called 'nope'."),
        (("retrieve", "deploy", "-k", "0"), "-k must be between 1 and 50; got 0."),
        (("context", "deploy", "--budget", "10"), "token_budget must be between 50 and 32,000"),
    ]:
        with pytest.raises(CommandError) as refused:
            agent(*args)
        assert str(refused.value).startswith(message)
        assert "\n" not in str(refused.value)


@pytest.mark.django_db(transaction=True)
def test_from_a_real_shell_refusals_are_one_line_with_no_traceback():
    Memory.objects.default()

    bad_word = shell("encode", "The deploy hung.", "--outcome", "failure")
    no_verb_args = shell("outcome", "12")
    ok = shell("encode", "The deploy hung.", "--outcome", "fail")

    assert bad_word.returncode == 1 and bad_word.stdout == ""
    assert bad_word.stderr.splitlines() == [
        "CommandError: outcome must be one of ok, fail or unknown, not 'failure'."
    ]
    assert no_verb_args.returncode == 2
    assert len(no_verb_args.stderr.splitlines()) == 1
    assert "required: ok|fail" in no_verb_args.stderr
    assert ok.returncode == 0, ok.stderr
    assert re.match(r"Recorded episode #\d+ \(fail\)", ok.stdout)
    assert Episode.objects.count() == 1


# Against a running server ---------------------------------------------------------------------


@pytest.fixture
def served(transactional_db, live_server, admin_user):
    """A live server, its default memory, and a token: what --server and --token need."""
    memory = Memory.objects.default()
    return live_server.url, Token.objects.create(user=admin_user).key, memory


def test_every_verb_works_against_a_server_and_prints_what_it_prints_locally(served):
    url, token, memory = served
    remote = ("--server", url, "--token", token)

    encoded = agent(*remote, "encode", "Deploys take 20 minutes.", "--outcome", "ok")
    slept = agent(*remote, "consolidate")
    fact = Fact.objects.get(text="Deploys take 20 minutes.")
    found = agent(*remote, "retrieve", "how long do deploys take")
    found_here = agent("retrieve", "how long do deploys take")
    block = agent(*remote, "context", "deploy the app")
    explained = json.loads(agent(*remote, "explain", str(fact.pk)))
    stats = agent(*remote, "stats")
    scored = agent(*remote, "outcome", str(fact.pk), "fail")

    episode = Episode.objects.get()
    assert encoded.startswith(f"Recorded episode #{episode.pk} (ok)")
    assert episode.recorded_by_name == "ada"
    assert slept.startswith("Distilled 1 episode into 1 new belief.")
    assert found == found_here and found.startswith(f"[{fact.pk}] Deploys take 20 minutes.")
    assert f"- [{fact.pk}] Deploys take 20 minutes." in block
    assert explained["id"] == fact.pk
    assert stats.startswith(actions.stats(memory=memory, reader=SYSTEM).message.split(".")[0])
    assert scored.startswith(f"Recorded that acting on fact #{fact.pk} did not work")

    recorded = agent(*remote, "procedure", "deploy", "--step", "build", "--step", "ship")
    again_here = agent("procedure", "deploy", "--step", "build", "--step", "ship", "--outcome=ok")
    procedure = Procedure.objects.get()
    assert procedure.steps == ["build", "ship"] and procedure.successes == 1
    assert f"p{procedure.pk} (deploy)" in recorded and f"p{procedure.pk}" in again_here


def test_the_server_and_token_can_come_from_the_environment(served):
    url, token, _ = served

    ran = shell("encode", "Deploys take 20 minutes.", env={"BRAIN_URL": url, "BRAIN_TOKEN": token})

    assert ran.returncode == 0, ran.stderr
    assert Episode.objects.get().recorded_by_name == "ada"


def test_a_refused_token_or_a_missing_server_is_one_line(served, tmp_path):
    url, _, _ = served

    wrong = shell("--server", url, "--token", "not-a-token", "stats")
    gone = shell("--server", "http://127.0.0.1:9", "--token", "t", "stats")
    no_token = shell("--server", url, "stats")
    refused = shell("--server", url, "--token", "t", "encode", "x", "--outcome", "success")

    assert wrong.returncode == 1
    assert wrong.stderr.splitlines() == [
        "CommandError: Invalid token. (check the token: --token or BRAIN_TOKEN)"
    ]
    assert gone.stderr.splitlines() == [
        "CommandError: Cannot reach brain at http://127.0.0.1:9 (Connection refused): is it "
        "running (make run), and is the URL right?"
    ]
    assert len(no_token.stderr.splitlines()) == 1 and "needs a token" in no_token.stderr
    assert refused.stderr.splitlines() == [
        "CommandError: outcome must be one of ok, fail or unknown, not 'success'."
    ]
    assert not Episode.objects.exists()
