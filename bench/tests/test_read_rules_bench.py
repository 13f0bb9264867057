"""The read-rules benchmark's memory: made whole, and gone whole, another memory untouched."""

from bench import visibility
from knowledge.models import Citation, Fact, Memory, Passage, PassageLabel


def test_deleting_the_benchmarks_memory_leaves_nothing_of_it_and_touches_no_other(
    transactional_db,
):
    other = Memory.objects.create(slug="kept", name="Kept")
    kept = Fact.objects.create(memory=other, text="The kettle is in the kitchen.")
    memory, _reader = visibility.generate(count=200)
    assert Citation.objects.filter(fact__memory=memory).count() == 200 * visibility.CITED

    visibility.delete()

    assert not Memory.objects.filter(slug=visibility.SLUG).exists()
    assert not Fact.objects.filter(memory_id=memory.pk).exists()
    assert not Passage.objects.filter(memory_id=memory.pk).exists()
    assert not Citation.objects.exclude(fact__in=Fact.objects.all()).exists()
    assert not PassageLabel.objects.exclude(passage__in=Passage.objects.all()).exists()
    assert Fact.objects.filter(pk=kept.pk).exists()
