"""Teaching brain a statement: the secret filter, the write gate, and the fact it files."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from knowledge import passages, search
from knowledge.gate import BadVerdict
from knowledge.models import Citation, Fact, Label, Memory, Passage, Source
from knowledge.subjects import UnknownSubject
from memory.actions import learn
from memory.models import InboxItem
from memory.taught import Statement


def _learn(home, text, **kwargs):
    return learn(
        Statement.typed(memory=home, text=text, origin=kwargs.pop("origin", "typed"), **kwargs)
    )


def test_a_new_statement_is_filed_as_a_queued_fact_with_its_inbox_item(home, alice):
    learned = _learn(home, "The garage freezer is off in winter.", by=alice, origin="voice")

    assert learned.verdict == "novel"
    fact = learned.fact
    assert fact.status == "queued"
    assert fact.channel == "voice"
    assert fact.taught_by_name == "alice"
    assert fact.embedder == "hash-ngram-v1"
    assert len(fact.embedding) == 384
    assert learned.item.fact == fact
    assert learned.message == f"Queued #{learned.item.pk}: The garage freezer is off in winter."


def _fact_rows_rewritten() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_upd + n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'knowledge_fact'"
        )
        return cursor.fetchone()[0]


@pytest.mark.parametrize("labelled", [False, True], ids=["default labels", "the source's labels"])
def test_a_new_fact_is_written_once_with_the_label_sets_its_citation_gives_it(home, labelled):
    """Its row and each of its indexes are written once: the citation's trigger finds the label
    sets already there (knowledge.passages.label_sets_of)."""
    source = None
    if labelled:
        source = Source.objects.create(memory=home, kind=Source.Kind.TYPED, title="HR notes")
        source.labels.add(Label.objects.create(memory=home, name="HR"))
    before = _fact_rows_rewritten()

    fact = _learn(home, "The garage freezer is off in winter.", source=source).fact

    assert _fact_rows_rewritten() == before
    passage = Citation.objects.get(fact=fact).passage
    assert passage.label_set_id
    assert Fact.objects.get(pk=fact.pk).label_sets == [passage.label_set_id]


def _passage_row(passage) -> dict:
    passage = Passage.objects.get(pk=passage.pk)
    return {
        "ordinal": passage.ordinal,
        "text": passage.text,
        "text_hash": passage.text_hash,
        "label_set_id": passage.label_set_id,
        "labels": sorted(passage.labels.values_list("name", flat=True)),
        "unsure": passage.unsure,
        "decided": passage.decided,
    }


@pytest.mark.parametrize("labels", ["none yet", "a default", "none default"])
def test_the_line_of_a_source_made_for_it_is_the_passage_the_general_path_makes(db, labels):
    """``line_of_new_source`` (one statement) against ``of_line`` (six), on two sources made a
    moment ago: the same row, labels and label set, and the instance it returns is the row."""
    home = Memory.objects.create(slug="lines", name="Lines")  # no label of any kind yet
    if labels == "a default":
        Label.objects.create(memory=home, name="Family", default=True)
        Label.objects.create(memory=home, name="Kids", default=True)
    elif labels == "none default":
        Label.objects.create(memory=home, name="HR")
    line = "  The spare fuses are in   the hall cupboard. "

    def fresh() -> Source:
        return Source.objects.create(memory=home, kind=Source.Kind.TYPED, title="Typed now")

    made = passages.line_of_new_source(fresh(), line)
    general = passages.of_line(fresh(), line)

    assert _passage_row(made) == _passage_row(general)
    fields = ("source_id", "ordinal", "text", "text_hash", "label_set_id", "created_at")
    row = Passage.objects.get(pk=made.pk)
    assert [getattr(made, name) for name in fields] == [getattr(row, name) for name in fields]
    expected = {"none yet": ["Household"], "a default": ["Family", "Kids"], "none default": []}
    assert _passage_row(made)["labels"] == expected[labels]


def test_the_same_fact_said_another_way_only_raises_support(home):
    first = _learn(home, "Sarah is a light sleeper.")

    again = _learn(home, "sarah is a light sleeper")

    assert again.verdict == "same"
    assert again.item is None
    assert again.fact.pk == first.fact.pk
    assert again.fact.support == 2
    assert Fact.objects.get(pk=first.fact.pk).confidence == first.fact.confidence
    assert InboxItem.objects.count() == 1


def test_facts_that_differ_by_a_not_are_never_merged(home):
    _learn(home, "The hall light is on at night.")

    negated = _learn(home, "The hall light is not on at night.")

    assert negated.verdict == "contradiction"
    assert Fact.objects.count() == 2


def test_a_contradiction_closes_the_old_fact_and_links_its_successor(home):
    old = _learn(home, "The bedroom is kept at 19 degrees at night.").fact

    new = _learn(home, "The bedroom is kept at 21 degrees at night.")

    old.refresh_from_db()
    assert new.verdict == "contradiction"
    assert new.superseded == old
    assert old.valid_to == new.fact.valid_from
    assert old.superseded_by == new.fact
    assert list(Fact.objects.live()) == [new.fact]
    assert list(Fact.objects.as_of(old.created_at)) == [old]


def test_a_restatement_with_a_different_outcome_is_stored(home):
    worked = _learn(home, "Chunking the CSV to 20MB completed validation.", outcome=True)

    failed = _learn(home, "Chunking the CSV to 20MB completed validation.", outcome=False)

    assert failed.verdict == "different_outcome"
    assert failed.fact.pk != worked.fact.pk
    assert failed.fact.valence == "failure"


def test_the_agent_may_supply_its_own_verdict(home):
    target = _learn(home, "Priya leads Education.").fact

    learned = _learn(
        home,
        "Deploy approval moved to the security team.",
        verdict="contradiction",
        target=target.pk,
    )

    target.refresh_from_db()
    assert target.superseded_by == learned.fact
    with pytest.raises(BadVerdict, match="needs the id of the fact"):
        _learn(home, "Something else.", verdict="same")


def test_subjects_are_found_by_nickname_and_unknown_ones_are_refused(home, office_lamp):
    learned = _learn(home, "The beacon flickers when the heater runs.")

    assert list(learned.fact.subjects.all()) == [office_lamp]
    with pytest.raises(UnknownSubject, match=r"has no subject 'light\.nowhere'"):
        _learn(home, "It hums.", subjects=["light.nowhere"])


@pytest.mark.parametrize(
    "secret",
    [
        "The wifi key is hunter2hunter2",
        "alarm code: 4711",
        "api key = sk-abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_a_secret_is_refused_and_nothing_is_stored(home, secret):
    with pytest.raises(ValidationError, match="brain does not keep secrets"):
        _learn(home, secret)

    assert not Fact.objects.exists()
    assert not InboxItem.objects.exists()


@pytest.mark.parametrize("text", ["", "x" * (10 * 1024 * 1024)])
def test_empty_or_enormous_texts_are_refused(home, text):
    with pytest.raises(ValidationError):
        _learn(home, text)
    assert not Fact.objects.exists()


def test_markup_and_sql_are_stored_as_plain_text(home):
    text = "Robert'); DROP TABLE knowledge_fact;-- <script>alert(1)</script>"

    learned = _learn(home, text)

    assert Fact.objects.get(pk=learned.fact.pk).text == text


@pytest.mark.django_db(transaction=True)
def test_two_identical_statements_at_the_same_moment_make_one_fact_with_support_two():
    from knowledge.models import Memory

    home = Memory.objects.default()
    barrier = threading.Barrier(2)
    errors = []

    def teach():
        try:
            barrier.wait()
            _learn(home, "The porch light stays on until midnight.")
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=teach) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    fact = Fact.objects.get()
    assert fact.support == 2
    assert InboxItem.objects.count() == 1


@pytest.mark.parametrize(
    "text",
    [
        "The hinge pin on the gate is loose.",
        "The code review is on Mondays.",
        "The password manager lives on the office laptop.",
    ],
)
def test_ordinary_sentences_that_mention_pins_or_codes_are_not_mistaken_for_secrets(home, text):
    assert _learn(home, text).verdict == "novel"


def test_teaching_a_new_statement_takes_a_fixed_number_of_queries(home, django_assert_num_queries):
    """The gate's neighbours and their rows in one statement, no search for waiting episodes
    when none wait, the fact written once with its passage (one statement, with its labels: the
    source was made for it), its citation and observation in one statement, the inbox item and
    the timeline's event (in the same transaction)."""
    _learn(home, "The hall light is on a timer.")  # the memory's labels and lines exist now
    text = "The garage freezer is off in winter."
    search.word_stats.shares(search._words(text))  # its words' statistics, read once a process

    with django_assert_num_queries(14) as captured:
        assert _learn(home, text).verdict == "novel"

    episodes = [query["sql"] for query in captured if '"knowledge_episode"' in query["sql"]]
    assert len(episodes) == 1 and episodes[0].startswith("SELECT 1 AS")  # whether any wait
