"""How every API answers a failure (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``): one body,
``{"detail": "..."}``, whichever app's view raised it, so views catch nothing to say it.

- ``ValidationError`` (Django's: an action refused its input) → 400, every message in one line.
- ``brain.errors.StateConflict`` (the state of things refuses it) → 409, the message and what it
  carries: ``{"detail": ..., **extra}``.
- A write that lost its lock race on every attempt (``brain.db.retry``) → 503 "busy, nothing
  saved, send it again" with ``Retry-After``, in the words the pages and the agent use too: the
  actions retry a deadlock or a serialisation failure, and one that still reaches a view is
  never a 500.
- The database or the broker not answering (stopped, restarting, unreachable) → 503 "brain is
  restarting" with ``Retry-After``: ``unavailable`` is the one place that tells these from
  every other error, for the API here, the pages and htmx (``brain.middleware``) and what fails
  before a view runs (``brain.views.server_error``).
- Everything else as DRF answers it: a serializer's refusal names each field (400), a missing
  permission (``knowledge.access.NotPermitted``) is a 403 naming what is needed, a missing row a
  404, a body over the limit a 413 (``brain.inputs``). Anything unexpected stays an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from brain.db import retry
from brain.embedded import EmbeddedServiceError
from brain.errors import StateConflict, in_words

# SQLSTATEs of a server that is going away or not there yet: class 08 (the connection), and
# 57P01-57P03 (an administrator's shutdown, a crash's, "the database system is starting up").
_SERVER_AWAY = ("08", "57P01", "57P02", "57P03")
RESTARTING_RETRY_AFTER_S = 5  # an embedded server stops or starts in a second or two
DATABASE_AWAY = (
    "brain is restarting: its database did not answer, so what you sent may not have been "
    "saved. Send it again in a few seconds."
)
BROKER_AWAY = "brain is restarting: its task queue did not answer. Try again in a few seconds."


@dataclass(frozen=True)
class Unavailable:
    """Why a request is answered 503 rather than done: the words, the page's heading, and how
    many seconds ``Retry-After`` says."""

    message: str
    heading: str
    retry_after: int


def unavailable(error: BaseException | None) -> Unavailable | None:
    """The 503 ``error`` is, or None for any other error: a write that lost its lock race on
    every attempt (busy), or the database or the broker not answering (restarting). Django wraps
    the driver's errors; what the server said is on the error they were raised from."""
    if error is None:
        return None
    if retry.is_retryable(error):
        return Unavailable(retry.BUSY_MESSAGE, "Busy for a moment", retry.BUSY_RETRY_AFTER_S)
    if _database_away(error):
        return Unavailable(DATABASE_AWAY, "brain is restarting", RESTARTING_RETRY_AFTER_S)
    if _broker_away(error):
        return Unavailable(BROKER_AWAY, "brain is restarting", RESTARTING_RETRY_AFTER_S)
    return None


def _database_away(error: BaseException) -> bool:
    if isinstance(error, EmbeddedServiceError | InterfaceError):
        return True
    driver = error.__cause__
    if not isinstance(error, OperationalError) or not isinstance(driver, psycopg.Error):
        return False
    # No SQLSTATE: the server never answered (refused, gone mid-way, no such socket).
    return driver.sqlstate is None or driver.sqlstate.startswith(_SERVER_AWAY)


def _broker_away(error: BaseException) -> bool:
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    return isinstance(error, BrokerError | RedisConnectionError | RedisTimeout)


def bad_request(message: str) -> Response:
    """A 400 for input a view checks itself (an unknown subject, a bad filter)."""
    return Response({"detail": message}, status=status.HTTP_400_BAD_REQUEST)


def busy() -> Response:
    """A 503: the write lost a lock race on every attempt. Nothing was saved; sending it again
    in a moment works. The pages and the agent say the same (``brain.db.retry.BUSY_MESSAGE``)."""
    return unavailable_response(
        Unavailable(retry.BUSY_MESSAGE, "Busy for a moment", retry.BUSY_RETRY_AFTER_S)
    )


def unavailable_response(answer: Unavailable) -> Response:
    return Response(
        {"detail": answer.message},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(answer.retry_after)},
    )


def exception_handler(error: Exception, context: dict) -> Response | None:
    answer = unavailable(error)
    if answer is not None:
        response = unavailable_response(answer)
    elif isinstance(error, ValidationError):
        response = bad_request(in_words(error))
    elif isinstance(error, StateConflict):
        response = Response(
            {"detail": error.message, **error.extra}, status=status.HTTP_409_CONFLICT
        )
    else:
        return drf_exception_handler(error, context)
    set_rollback()
    return response
