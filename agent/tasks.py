"""The sleep pass in the background: for one memory (a session's end asks for it), and for
every memory on the beat. Safe to run twice and at once: an episode is claimed by one pass."""

from __future__ import annotations

from celery import shared_task

from agent import actions
from knowledge.models import Memory


@shared_task(acks_late=True)
def sleep(memory_id: int) -> None:
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is not None:  # gone since it was asked for: nothing to do
        actions.sleep(memory=memory)


@shared_task
def sleep_every_memory() -> int:
    memory_ids = list(Memory.objects.values_list("pk", flat=True))
    for memory_id in memory_ids:
        sleep.delay(memory_id)
    return len(memory_ids)
