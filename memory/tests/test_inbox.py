import pytest
from django.core.exceptions import ValidationError

from memory import actions
from memory.models import ConsolidationRun, InboxItem, Origin


def test_a_queued_fact_is_labelled_with_where_it_came_from(home, alice):
    item = actions.add_to_inbox(
        memory=home, text="  The loft   is warm ", origin=Origin.VOICE, by=alice
    )

    assert item.text == "The loft is warm"
    assert item.label == "from a voice conversation"
    assert item.confidence == "medium"
    assert item.taught_by_name == "alice"
    assert list(InboxItem.objects.for_memory(home).pending()) == [item]


@pytest.mark.parametrize(
    ("text", "message"),
    [("   ", "A fact can't be empty"), ("x" * 1001, "the limit is 1,000")],
)
def test_an_empty_or_overlong_fact_is_refused_with_the_limit_named(home, text, message):
    with pytest.raises(ValidationError, match=message):
        actions.add_to_inbox(memory=home, text=text, origin=Origin.TYPED)

    assert not InboxItem.objects.exists()


def test_an_unknown_confidence_is_refused(home):
    with pytest.raises(ValidationError, match="high, medium or low"):
        actions.add_to_inbox(memory=home, text="Fine", origin=Origin.TYPED, confidence="sure")


def test_dropping_a_queued_item_takes_it_out_of_the_queue_and_starts_nothing(home):
    item = actions.add_to_inbox(memory=home, text="The loft is warm", origin=Origin.TYPED)

    assert actions.drop_inbox_item(item=item) is True

    assert not InboxItem.objects.for_memory(home).pending().exists()
    assert not ConsolidationRun.objects.exists()
    assert actions.drop_inbox_item(item=item) is False  # already gone


def test_the_twentieth_waiting_item_starts_a_pass_early(home, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(19):
            actions.add_to_inbox(memory=home, text=f"Fact number {n}", origin=Origin.TYPED)
    assert not ConsolidationRun.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        actions.add_to_inbox(memory=home, text="Fact number 19", origin=Origin.TYPED)

    run = ConsolidationRun.objects.get()
    assert run.trigger == ConsolidationRun.Trigger.EARLY
    assert run.is_running


def test_no_early_pass_when_learning_is_off(home, django_capture_on_commit_callbacks):
    home.learning = False
    home.save(update_fields=["learning"])
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(25):
            actions.add_to_inbox(memory=home, text=f"Fact number {n}", origin=Origin.TYPED)

    assert not ConsolidationRun.objects.exists()
    assert InboxItem.objects.pending().count() == 25
