from celery import shared_task
from django.conf import settings

from memory import brief, compiling, consolidator, reflection
from memory import study as study_sessions


@shared_task(
    acks_late=True,
    ignore_result=True,
    # Backstops above the pass's own deadline, which normally settles the run first.
    soft_time_limit=settings.BRAIN_CONSOLIDATION_DEADLINE_S + 30,
    time_limit=settings.BRAIN_CONSOLIDATION_DEADLINE_S + 60,
)
def consolidate(run_id: int) -> None:
    consolidator.execute(run_id)


@shared_task(ignore_result=True)
def sweep_consolidations() -> None:
    consolidator.sweep()


@shared_task(ignore_result=True)
def consolidate_daily() -> None:
    consolidator.daily()


@shared_task(ignore_result=True)
def write_briefs() -> None:
    brief.write_all()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=240, time_limit=270)
def reflect(run_id: int) -> None:
    """One reflection over a conversation (memory/reflection.py); safe to deliver twice."""
    reflection.execute(run_id)


@shared_task(acks_late=True, ignore_result=True)
def study(session_id: int) -> None:
    """One study session (memory/study.py); safe to deliver twice."""
    study_sessions.execute(session_id)


@shared_task(ignore_result=True)
def sweep_reflections() -> None:
    reflection.sweep()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=540, time_limit=600)
def compile_source(run_id: int) -> None:
    """Compile a note, document or email into facts on pages (memory/compiling.py); safe to
    deliver twice."""
    compiling.execute(run_id)


@shared_task(ignore_result=True)
def sweep_compiles() -> None:
    compiling.sweep()
