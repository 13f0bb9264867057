"""Background work on the facts store: expiry, keeping the entity registry in step, vectors, and
the search indexes of the smaller memories."""

import logging

from celery import shared_task

from knowledge import actions, memory_indexes, reembedding, registry

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def apply_expiry() -> None:
    """Hourly: health notes past their date stop being used; facts about long-gone entities go."""
    actions.expire_facts()
    actions.purge_removed_subject_facts()


@shared_task(ignore_result=True)
def sync_home_assistant() -> None:
    """Every 15 minutes when HA_URL and HA_TOKEN are set. An unreachable Home Assistant is one
    warning, not a traceback: the next beat simply tries again."""
    try:
        registry.sync_configured_home_assistant()
    except registry.RegistryError as error:
        logger.warning("Home Assistant sync skipped: %s", error)


@shared_task(ignore_result=True)
def reembed_facts() -> None:
    """Bring every fact's vector to its memory's embedder, a batch at a time: after
    BRAIN_EMBEDDER or a memory's "embed" route changes, and for facts stored without one (a
    bulk add, an import, a write its memory's worker did not answer)."""
    reembedding.reembed_stale()


@shared_task(ignore_result=True)
def keep_memory_indexes() -> None:
    """Every ten minutes: search indexes of its own for each memory that holds a small share of
    the facts (knowledge/memory_indexes.py), one memory a call; what it did goes to the log."""
    kept = memory_indexes.keep()
    if kept.built or kept.dropped:
        logger.info("%s", kept.message)
