"""How every API answers a failure (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``): one body,
``{"detail": "..."}``, whichever app's view raised it, so views catch nothing to say it.

- ``ValidationError`` (Django's: an action refused its input) → 400, every message in one line.
- ``brain.errors.StateConflict`` (the state of things refuses it) → 409, the message and what it
  carries: ``{"detail": ..., **extra}``.
- A write that lost its lock race on every attempt (``brain.db.retry``) → 503 "busy, nothing
  saved, send it again" with ``Retry-After``, in the words the pages and the agent use too: the
  actions retry a deadlock or a serialisation failure, and one that still reaches a view is
  never a 500.
- Everything else as DRF answers it: a serializer's refusal names each field (400), a missing
  permission (``knowledge.access.NotPermitted``) is a 403 naming what is needed, a missing row a
  404, a body over the limit a 413 (``brain.inputs``). Anything unexpected stays an error.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from brain.db import retry
from brain.errors import StateConflict


def bad_request(message: str) -> Response:
    """A 400 for input a view checks itself (an unknown subject, a bad filter)."""
    return Response({"detail": message}, status=status.HTTP_400_BAD_REQUEST)


def busy() -> Response:
    """A 503: the write lost a lock race on every attempt. Nothing was saved; sending it again
    in a moment works. The pages and the agent say the same (``brain.db.retry.BUSY_MESSAGE``)."""
    return Response(
        {"detail": retry.BUSY_MESSAGE},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(retry.BUSY_RETRY_AFTER_S)},
    )


def exception_handler(error: Exception, context: dict) -> Response | None:
    if retry.is_retryable(error):
        response = busy()
    elif isinstance(error, ValidationError):
        response = bad_request(" ".join(error.messages))
    elif isinstance(error, StateConflict):
        response = Response(
            {"detail": error.message, **error.extra}, status=status.HTTP_409_CONFLICT
        )
    else:
        return drf_exception_handler(error, context)
    set_rollback()
    return response
