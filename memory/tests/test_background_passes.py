"""The beat's entries: the daily pass, and the sweep that restarts lost passes."""

from datetime import timedelta

from django.utils import timezone

from memory import actions, consolidator, revisions
from memory.models import ConsolidationRun, DocumentRevision, Origin


def test_the_daily_pass_starts_one_pass_per_learning_memory_with_something_waiting(
    home, django_capture_on_commit_callbacks
):
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.TYPED)

    with django_capture_on_commit_callbacks():
        consolidator.daily()
        consolidator.daily()

    run = ConsolidationRun.objects.get()
    assert run.trigger == ConsolidationRun.Trigger.DAILY


def test_the_daily_pass_skips_a_memory_with_nothing_waiting_or_learning_off(home):
    consolidator.daily()
    home.learning = False
    home.save(update_fields=["learning"])
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.TYPED)

    consolidator.daily()

    assert not ConsolidationRun.objects.exists()


def test_the_sweep_fails_a_pass_whose_lease_ran_out_and_starts_a_new_one(
    home, django_capture_on_commit_callbacks
):
    actions.add_to_inbox(memory=home, text="The loft is warm.", origin=Origin.TYPED)
    lost = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    ConsolidationRun.objects.filter(pk=lost.pk).update(
        claimed_at=timezone.now() - timedelta(minutes=20),
        executor="another-host:1",
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    )

    with django_capture_on_commit_callbacks():
        consolidator.sweep()

    lost.refresh_from_db()
    assert lost.state == "failed"
    assert lost.reason.startswith("The pass was lost: the worker running it stopped")
    restarted = ConsolidationRun.objects.running().get()
    assert restarted.trigger == ConsolidationRun.Trigger.SWEEP


def test_the_sweep_resends_a_start_message_nobody_picked_up(
    home, django_capture_on_commit_callbacks
):
    waiting = consolidator.request_consolidation(memory=home, trigger="manual", send=False).run
    ConsolidationRun.objects.filter(pk=waiting.pk).update(
        started_at=timezone.now() - timedelta(minutes=5)
    )

    with django_capture_on_commit_callbacks() as sent:
        consolidator.sweep()

    assert len(sent) == 1  # the consolidate message, sent again after commit
    assert ConsolidationRun.objects.get(pk=waiting.pk).is_running


def test_voice_prompts_get_the_distillate_only_while_memory_injection_is_on(home, admin_client):
    revisions.save_user_edit(
        memory=home, text="# Memory\n\n## Rules\n\n- Never wake Sarah.\n", base_generation=0
    )
    assert "Never wake Sarah." in admin_client.get("/api/memory/voice").json()["voice"]

    home.memory_injection = False
    home.save(update_fields=["memory_injection"])

    body = admin_client.get("/api/memory/voice").json()
    assert body == {"memory": "home", "memory_injection": False, "voice": ""}
    assert "Never wake Sarah." in DocumentRevision.objects.current(home).voice
