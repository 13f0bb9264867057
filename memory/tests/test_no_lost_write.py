"""No write is lost to a lock race: teaching, edits, forgets and a pass's commit at the same
moment neither deadlock nor answer 500, and a pass that fails says why and where."""

import json
import threading
import urllib.error
import urllib.request

import pytest
from django.db import DatabaseError, connection, transaction
from rest_framework.authtoken.models import Token

from brain.db import retry
from brain.testing import wait_until
from knowledge import actions as knowledge_actions
from knowledge.models import Fact, Memory
from memory import actions, consolidator, document, revisions
from memory.composers.base import ComposerError, Composition
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem, Origin
from memory.taught import Statement

ADD = "/api/memory/add"


@pytest.fixture
def home(transactional_db) -> Memory:
    """Writes commit for real here: a retry only happens outside any outer transaction."""
    return Memory.objects.default()


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


# The lock order between teaching and a pass's commit -------------------------------------------


def test_teaching_a_replacement_for_a_fact_a_pass_is_filing_deadlocks_neither(home, monkeypatch):
    """learn() holds the replaced fact's row and, at commit, checks its new rows' foreign keys
    against the memory row (FOR KEY SHARE); the pass holds the memory row and waits for that
    fact. The memory lock must not conflict with a foreign-key check."""
    old = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    superseded, go_on, errors, results = threading.Event(), threading.Event(), [], {}
    supersede = knowledge_actions.supersede

    def supersede_then_wait(**kwargs):
        supersede(**kwargs)
        superseded.set()
        go_on.wait(timeout=10)  # until the pass is blocked on the row just locked

    monkeypatch.setattr(knowledge_actions, "supersede", supersede_then_wait)

    def teach():
        try:
            with transaction.atomic():  # commit here, and no retry: the race must not happen
                results["learned"] = actions.learn(
                    Statement.typed(
                        memory=home,
                        text="The loft is cold.",
                        origin=Origin.TYPED,
                        verdict="contradiction",
                        target=old.pk,
                    )
                )
        except Exception as error:  # reported by the assertion below
            errors.append(error)
        finally:
            connection.close()

    def commit_a_pass():
        superseded.wait(timeout=10)
        try:
            with transaction.atomic():
                revisions.write_document(
                    memory=home,
                    expected_generation=0,
                    text=document.TEMPLATE + "- The loft is warm.\n",
                    kind=DocumentRevision.Kind.PASS,
                    filed=[old.pk],
                )
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=teach), threading.Thread(target=commit_a_pass)]
    for thread in threads:
        thread.start()
    assert superseded.wait(timeout=10)
    try:
        wait_until(_waiting_on_a_lock, timeout=10, message="the pass never waited for the fact")
    finally:
        go_on.set()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    new = results["learned"].fact
    assert Fact.objects.live().filter(pk=new.pk).exists()
    assert Fact.objects.get(pk=old.pk).superseded_by_id == new.pk
    assert DocumentRevision.objects.current(home).generation == 1


# Every write path runs again after losing a race ------------------------------------------------


def test_teaching_that_loses_a_race_is_taught_once(home, races):
    calls = races(knowledge_actions, "file_fact")

    learned = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    )

    assert len(calls) == 2
    assert list(Fact.objects.values_list("pk", flat=True)) == [learned.fact.pk]
    assert InboxItem.objects.get().fact_id == learned.fact.pk


def test_an_edit_that_loses_a_race_is_saved_once(home, races):
    calls = races(knowledge_actions, "reconcile_with_document")

    revisions.save_user_edit(memory=home, text=document.TEMPLATE + "- Mine.\n", base_generation=0)

    assert len(calls) == 2
    assert DocumentRevision.objects.current(home).generation == 1
    assert Change.objects.count() == 1


def test_a_clear_that_loses_a_race_is_done_once(home, races):
    revisions.save_user_edit(memory=home, text=document.TEMPLATE + "- Mine.\n", base_generation=0)
    calls = races(knowledge_actions, "reconcile_with_document")

    change = revisions.clear_memory(memory=home)

    assert len(calls) == 2
    assert change is not None
    assert DocumentRevision.objects.current(home).text == document.TEMPLATE
    assert Change.objects.count() == 2


def test_an_undo_that_loses_a_race_is_done_once(home, races):
    [edit] = revisions.save_user_edit(
        memory=home, text=document.TEMPLATE + "- Mine.\n", base_generation=0
    )
    calls = races(knowledge_actions, "reconcile_with_document")

    undo = revisions.undo_change(memory=home, number=edit.number)

    assert len(calls) == 2
    assert Change.objects.get(pk=edit.pk).undone_by_id == undo.pk
    assert DocumentRevision.objects.current(home).text == document.TEMPLATE


def test_a_forget_that_loses_a_race_is_done_once(home, races):
    fact = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    ).fact
    calls = races(knowledge_actions, "forget_fact")

    said = actions.forget(fact=fact)

    assert len(calls) == 2
    assert said.startswith("Forgotten")
    assert not Fact.objects.live().exists()
    assert InboxItem.objects.get().state == InboxItem.State.DROPPED


def test_a_drop_that_loses_a_race_is_done_once(home, races):
    learned = actions.learn(
        Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    )
    calls = races(knowledge_actions, "forget_fact")

    assert actions.drop_inbox_item(item=learned.item) is True

    assert len(calls) == 2
    assert InboxItem.objects.get().state == InboxItem.State.DROPPED
    assert not Fact.objects.live().exists()


# Over HTTP: never a 500 --------------------------------------------------------------------------


@pytest.fixture
def automation(client, alice):
    token = Token.objects.create(user=alice)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {token.key}"
    return client


def test_adding_over_the_api_through_a_lost_race_answers_201(home, automation, races):
    races(knowledge_actions, "file_fact")

    response = automation.post(ADD, {"fact": "The loft is warm."}, content_type="application/json")

    assert response.status_code == 201, response.content
    assert Fact.objects.live().get().pk == response.json()["fact"]


def test_a_race_lost_on_every_attempt_answers_503_with_retry_after_and_writes_nothing(
    home, automation, races
):
    races(knowledge_actions, "file_fact", times=retry.ATTEMPTS)

    response = automation.post(ADD, {"fact": "The loft is warm."}, content_type="application/json")

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert "nothing was saved" in response.json()["detail"]
    assert not Fact.objects.exists()
    assert not InboxItem.objects.exists()


# A pass's commit ---------------------------------------------------------------------------------


@pytest.fixture
def filing(monkeypatch):
    composer = type(
        "Filing",
        (),
        {
            "name": "filing",
            "compose": lambda self, request, **_: Composition(
                document=request.document + "".join(f"- {c.text}\n" for c in request.candidates),
                voice="",
            ),
        },
    )()
    monkeypatch.setattr("memory.consolidator.get_composer", lambda memory=None: composer)


def _pass(home) -> ConsolidationRun:
    request = consolidator.request_consolidation(memory=home, trigger="cli", send=False)
    consolidator.execute(request.run.pk)
    return ConsolidationRun.objects.get(pk=request.run.pk)


def test_a_pass_whose_commit_loses_a_race_commits_on_the_next_attempt(home, filing, races):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    calls = races(knowledge_actions, "reconcile_with_document")

    run = _pass(home)

    assert run.state == "filed", run.reason
    assert len(calls) == 2
    assert "- The loft is warm." in DocumentRevision.objects.current(home).text
    assert DocumentRevision.objects.count() == 1
    assert Change.objects.count() == 1
    assert not InboxItem.objects.pending().exists()


def test_a_pass_that_loses_every_race_writes_nothing_says_where_and_asks_for_another(
    home, filing, races
):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    races(knowledge_actions, "reconcile_with_document", times=retry.ATTEMPTS)
    sent = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(consolidator, "send_start", sent.append)
        run = _pass(home)

    assert run.state == "failed"
    assert run.reason.startswith("The pass lost a race for the database to other writes")
    assert "deadlock detected — CONTEXT: PL/pgSQL function" in run.reason
    assert not DocumentRevision.objects.exists()
    assert not Change.objects.exists()
    assert InboxItem.objects.pending().count() == 1
    again = ConsolidationRun.objects.running().get()
    assert again.trigger == ConsolidationRun.Trigger.RETRY
    assert sent == [again]


# What a failed pass says -------------------------------------------------------------------------

DEADLOCK_TEXT = (
    "deadlock detected\n"
    "DETAIL:  Process 4242 waits for ShareLock on transaction 981; blocked by process 4243.\n"
    "Process 4243 waits for ShareLock on transaction 980; blocked by process 4242.\n"
    "HINT:  See server log for query details.\n"
    'CONTEXT:  while updating tuple (0,12) in relation "knowledge_fact"'
)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            DatabaseError(DEADLOCK_TEXT),
            'deadlock detected — CONTEXT: while updating tuple (0,12) in relation "knowledge_fact"',
        ),
        (DatabaseError("out of shared memory\nHINT:  Raise it."), "out of shared memory"),
        (ComposerError("Traceback…\noverloaded_error: Overloaded"), "overloaded_error: Overloaded"),
    ],
)
def test_a_failed_pass_keeps_the_errors_message_and_where_it_happened(
    home, scripted, error, reason
):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    scripted(error)

    run = _pass(home)

    assert run.state == "failed"
    assert run.reason == reason
    assert InboxItem.objects.pending().count() == 1


def test_a_failed_passs_reason_is_bounded(home, scripted):
    actions.learn(Statement.typed(memory=home, text="The loft is warm.", origin=Origin.TYPED))
    scripted(DatabaseError("deadlock detected\nCONTEXT:  " + "while locking tuple " * 200))

    run = _pass(home)

    assert len(run.reason) <= consolidator.REASON_MAX_CHARS
    assert run.reason.startswith("deadlock detected — CONTEXT: while locking tuple")
    assert run.reason.endswith("…")


# Many writers over HTTP while a real worker runs the early passes -------------------------------

NOUNS = """
kettle toaster boiler freezer doorbell mailbox hammock trampoline greenhouse dishwasher treadmill
aquarium chandelier wardrobe bookcase piano harp telescope sundial birdbath scarecrow wheelbarrow
lawnmower chainsaw ladder skylight chimney fireplace bathtub shower bidet sink faucet mirror vanity
dresser nightstand headboard mattress futon sofa armchair ottoman footstool rug carpet curtain blind
shutter awning pergola gazebo trellis fence hedge pond fountain birdhouse doghouse kennel hutch coop
stable barn shed garage driveway carport porch veranda balcony terrace patio deck jacuzzi sauna
boathouse jetty canoe kayak bicycle tricycle scooter skateboard snowblower generator compressor
dehumidifier humidifier thermostat radiator furnace heatpump woodstove barbecue smoker grill
microwave blender juicer percolator espresso pantry larder cellar attic loft basement stairwell
landing hallway foyer vestibule conservatory orangery library study nursery playroom workshop
gramophone typewriter hourglass weathervane metronome barometer harmonium samovar churn bellows
sideboard hatstand
"""
THINGS = NOUNS.split()
SOUNDS = ("squeaks", "rattles", "hums", "wobbles", "leaks", "sticks", "glows", "creaks", "buzzes")
SOUNDS += ("drips", "clicks", "whistles", "flickers")
WHEN = ("at night", "in winter", "after rain", "on Sundays", "when frost comes", "at dawn")
WHEN += ("before breakfast", "after dinner", "during storms", "in high summer")
SEQUENTIAL, CONCURRENT = 80, 50


def _saying(n: int) -> str:
    """Sentence ``n``: a subject of its own, with a sound and a time no other sentence pairs
    (the offline gate may read templated sentences about one slot as contradicting each other:
    "The boiler measures 17 cm" / "The kettle measures 47 cm")."""
    return f"The {THINGS[n]} {SOUNDS[n % 13]} {WHEN[n // 13 % 10]}."


def _replacing(n: int) -> str:
    """What replaces sentence ``n``: the same subject, another sound and time."""
    return f"The {THINGS[n]} {SOUNDS[(n + 6) % 13]} {WHEN[(n // 13 + 4) % 10]} these days."


def _add(base_url: str, token: str, body: dict) -> tuple[int, dict | str]:
    """One POST from a client of its own (a fresh opener and connection)."""
    client = urllib.request.build_opener()
    request = urllib.request.Request(
        base_url + ADD,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with client.open(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")[:500]


@pytest.fixture
def server(live_server):
    """The live server, with room for every writer at once: Django's test server queues 10
    connections, and the kernel resets the rest before brain sees them."""
    live_server.thread.httpd.socket.listen(CONCURRENT * 2)
    return live_server


def _deadlocks() -> int:
    """How many deadlocks PostgreSQL has broken in this database (its own statistics)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _no_pass_running() -> bool:
    return not ConsolidationRun.objects.running().exists()


@pytest.mark.worker
def test_every_write_acknowledged_across_the_early_passes_is_kept(
    home, alice, server, celery_worker
):
    """80 writes in a row, then 50 at once, while early passes (20 waiting) commit. One write in
    five replaces a fact a pass may be filing at that moment: learn's supersede racing the
    pass's reconcile, as in the three 500s that were seen."""
    token = Token.objects.create(user=alice).key
    deadlocks = _deadlocks()
    sent: list[tuple[dict, int, dict | str]] = []  # (request, status, answer), in any order

    def send(body: dict) -> dict | str:
        status, answer = _add(server.url, token, body)
        sent.append((body, status, answer))
        return answer

    said: dict[int, int] = {}  # sentence number → its fact
    for n in range(SEQUENTIAL):
        if n % 5 == 4 and n - 1 in said:
            send({"fact": _replacing(n - 1), "verdict": "contradiction", "target": said.pop(n - 1)})
        elif isinstance(answer := send({"fact": _saying(n)}), dict):
            said[n] = answer["fact"]
    # The last sequential facts are likely still being filed while the writers replace them.
    recent = iter(sorted(said)[-CONCURRENT // 5 :])
    bodies = []
    for n in range(SEQUENTIAL, SEQUENTIAL + CONCURRENT):
        if n % 5 == 4:
            m = next(recent)
            bodies.append({"fact": _replacing(m), "verdict": "contradiction", "target": said[m]})
        else:
            bodies.append({"fact": _saying(n)})
    start = threading.Barrier(CONCURRENT, timeout=30)

    def writer(body: dict) -> None:
        start.wait()
        send(body)

    threads = [threading.Thread(target=writer, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    refused = [(body["fact"], status, answer) for body, status, answer in sent if status >= 300]
    assert refused == []
    assert len(sent) == SEQUENTIAL + CONCURRENT
    assert ConsolidationRun.objects.filter(trigger=ConsolidationRun.Trigger.EARLY).exists()

    wait_until(_no_pass_running, timeout=60, message="a pass never settled")
    last = consolidator.request_consolidation(memory=home, trigger=ConsolidationRun.Trigger.MANUAL)
    wait_until(lambda: not ConsolidationRun.objects.get(pk=last.run.pk).is_running, timeout=60)
    wait_until(_no_pass_running, timeout=60, message="a pass never settled")

    replaced = {body["target"]: answer["fact"] for body, _, answer in sent if "target" in body}
    live = set(Fact.objects.live().values_list("pk", flat=True))
    lost = [
        (body["fact"], answer["verdict"])
        for body, _, answer in sent
        if answer["fact"] not in live and answer["fact"] not in replaced
    ]
    assert lost == []
    superseded = Fact.objects.filter(pk__in=replaced).values_list("pk", "superseded_by_id")
    assert dict(superseded) == replaced
    assert not InboxItem.objects.pending().exists()
    failed = ConsolidationRun.objects.exclude(state="filed").values_list("reason", flat=True)
    assert all(reason.startswith("The pass lost a race") for reason in failed), list(failed)
    assert _deadlocks() == deadlocks, "the writes deadlocked (and retries hid it)"
