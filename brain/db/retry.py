"""Running a unit of work again when PostgreSQL ended its transaction to settle a lock race.

PostgreSQL breaks a deadlock (SQLSTATE 40P01) by rolling back one of the transactions in it,
and under stricter isolation it rolls back one that cannot be serialised (40001). Nothing of
that transaction was written, and the other one goes on to commit, so running the whole unit
again almost always succeeds. A person should never see these as an error.

Rules:

- Only the outermost unit retries. Called inside an outer ``transaction.atomic`` block, the
  function runs once and the error is re-raised: the outer transaction is aborted (or still
  holds the locks the race was about), and only the code that opened it can start it again.
- The decorated function is the whole unit of work: its writes are in its own
  ``transaction.atomic`` block(s), so a failed attempt leaves nothing behind, and it may read
  and decide again on each attempt. It must not hold a transaction across a model call (the
  house rule), so a retry never repeats a call while holding locks.
- ``ATTEMPTS`` = 4: one race rarely repeats, and two in a row already means heavy contention.
  Each attempt can wait up to PostgreSQL's ``deadlock_timeout`` (1 s by default) before the
  race is detected, so four attempts and their pauses stay well inside a web request.
- Pauses grow from ``FIRST_PAUSE_S`` (50 ms) by doubling to at most ``MAX_PAUSE_S`` (1 s), with
  full jitter (a random share of the pause), so the two sides of a race do not meet again at
  the same moment.

tenacity runs the attempts; this module says which errors, how many attempts and which pauses,
and that an inner unit never retries.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable

import tenacity
from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

DEADLOCK_DETECTED = "40P01"
SERIALIZATION_FAILURE = "40001"
RETRYABLE_SQLSTATES = frozenset({DEADLOCK_DETECTED, SERIALIZATION_FAILURE})

ATTEMPTS = 4
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0

# What every surface answers when a write lost on every attempt: the API's 503, the pages' 503
# and toast (``brain.middleware.BusyWriteMiddleware``), the agent's tool error.
BUSY_MESSAGE = (
    "Other writes were saving at the same moment and this one could not get its turn; nothing "
    "was saved. Send it again in a moment."
)
BUSY_RETRY_AFTER_S = 1  # the race's winner commits within milliseconds of the loser's rollback


def is_retryable(error: BaseException | None) -> bool:
    """True for a deadlock or a serialisation failure. Django wraps the driver's error; the
    SQLSTATE is on the psycopg error it was raised from."""
    while error is not None:
        if getattr(error, "sqlstate", None) in RETRYABLE_SQLSTATES:
            return True
        error = error.__cause__
    return False


def pause_before(attempt: int) -> float:
    """Seconds to wait before attempt number ``attempt`` (2, 3, …): jittered, bounded."""
    ceiling = min(MAX_PAUSE_S, FIRST_PAUSE_S * 2 ** (attempt - 2))
    return random.uniform(0, ceiling)


def _lost_a_race(error: BaseException) -> bool:
    return isinstance(error, DatabaseError) and is_retryable(error)


def _pause(state: tenacity.RetryCallState) -> float:
    return pause_before(state.attempt_number + 1)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at each pause, so a test can stand in for time.sleep


def _log_attempt(state: tenacity.RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    logger.info(
        "%s lost a lock race (%s); attempt %d of %d",
        getattr(state.fn, "__qualname__", state.fn),
        str(error).split("\n", 1)[0],
        state.attempt_number + 1,
        ATTEMPTS,
    )


def retry_transaction[**P, R](func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` again (up to ATTEMPTS in all) when its transaction lost a lock race.

    Re-raises the last error when every attempt lost, and at once when called inside an outer
    atomic block. Any other error is raised as it is.
    """
    attempts = tenacity.retry(
        retry=tenacity.retry_if_exception(_lost_a_race),
        stop=tenacity.stop_after_attempt(ATTEMPTS),
        wait=_pause,
        sleep=_sleep,
        before_sleep=_log_attempt,
        reraise=True,
    )(func)

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            return func(*args, **kwargs)
        return attempts(*args, **kwargs)

    return run
