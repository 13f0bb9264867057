"""brain.db.copying.copy_create: rows written with COPY come back as bulk_create leaves them."""

from brain.db.copying import copy_create
from knowledge.models import Citation, Fact, Source
from knowledge.passages import add


def test_copied_facts_get_their_ids_defaults_and_the_columns_the_database_works_out(home):
    facts = [
        Fact(memory=home, text="The loft hatch sticks.", normalized="the loft hatch sticks"),
        Fact(memory=home, text="The boiler is serviced in May.", normalized="boiler may"),
    ]

    copy_create(facts)

    assert all(fact.pk for fact in facts) and facts[0].pk != facts[1].pk
    stored = Fact.objects.in_bulk([fact.pk for fact in facts])
    assert stored[facts[0].pk].text == "The loft hatch sticks."
    assert stored[facts[1].pk].uid == facts[1].uid  # the default made in Python is the one kept
    assert Fact.objects.filter(pk=facts[0].pk, search_vector="loft").exists()
    assert stored[facts[0].pk].newest_set == 0 and stored[facts[0].pk].set_mask == 0


def test_copied_rows_can_be_cited_at_once_and_the_trigger_follows(home):
    (fact,) = copy_create([Fact(memory=home, text="The gate code changed.", normalized="gate")])
    source = Source.objects.create(memory=home, kind=Source.Kind.NOTE, title="n", text="x")
    (passage,) = add(source, ["The gate code changed."])

    Citation.objects.create(fact=fact, passage=passage)

    fact.refresh_from_db()
    passage.refresh_from_db()  # its set is worked out by the database
    assert passage.label_set_id and fact.label_sets == [passage.label_set_id]
    assert fact.newest_set == passage.label_set_id


def test_nothing_to_copy_writes_nothing(home, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert copy_create([]) == []
