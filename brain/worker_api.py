"""The worker protocol over HTTP: ``/api/worker/calls/next``, ``…/<id>/heartbeat``,
``…/<id>/answer`` (docs/API.md, Workers). Thin views over ``brain.workers``.

Only a worker token (``Authorization: Bearer bw_…``) is accepted here: no session, no person's
token. No token, or a key never given out, is a 401; a revoked token a 403 naming it, on every
endpoint, so an answer posted after a revocation is refused. The worker is told only what a
call carries (``workers.as_sent``).
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from brain import workers
from brain.models import WorkerToken


class WorkerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <key>`` with a worker token's key; ``request.auth`` is the token.
    No person is signed in: ``request.user`` stays anonymous."""

    keyword = "Bearer"

    def authenticate(self, request: Request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send one worker token after Bearer.")
        try:
            key = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("That is not a worker token.") from None
        token = workers.token_for_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed("That is not a worker token.")
        if token.revoked_at is not None:
            raise exceptions.PermissionDenied(workers.REVOKED_MESSAGE)
        return (_NoPerson(), token)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class _NoPerson:
    """A worker is nobody: it may not read as anyone."""

    is_authenticated = True  # authenticated as a worker, which IsWorker checks
    is_active = False
    is_superuser = False
    is_staff = False
    pk = None
    id = None
    username = ""

    def __str__(self) -> str:
        return "a worker"


class IsWorker(BasePermission):
    message = "Only a worker token may take and answer model calls."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, WorkerToken)


class _WorkerView(APIView):
    authentication_classes = [WorkerTokenAuthentication]
    permission_classes = [IsWorker]
    schema = None  # the worker protocol is documented in docs/API.md, not the person's API

    @property
    def token(self) -> WorkerToken:
        token = self.request.auth
        assert isinstance(token, WorkerToken)  # IsWorker let the request in
        return token


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise exceptions.ParseError("Send a JSON object.")
    return request.data


def _lease(body: dict[str, Any]) -> str:
    lease = body.get("lease")
    if not isinstance(lease, str) or not lease:
        raise exceptions.ValidationError({"lease": "The lease the call came with."})
    return lease


class NextCall(_WorkerView):
    """Long-poll for the next call: 200 with it, or 204 when none came within ``wait``."""

    def post(self, request: Request) -> Response:
        body = _body(request)
        name = body.get("worker", "")
        models = body.get("models", [])
        wait = body.get("wait", workers.WAIT_DEFAULT_S)
        if not isinstance(name, str):
            raise exceptions.ValidationError({"worker": "The name the worker gives itself."})
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise exceptions.ValidationError({"models": "A list of model names."})
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 25:
            raise exceptions.ValidationError({"wait": "Seconds to wait, 0 to 25."})
        try:
            call = workers.take_next(
                self.token,
                worker_name=name,
                models=[m.strip() for m in models if m.strip()],
                wait=float(wait),
            )
        except workers.TokenRevokedError as revoked:
            raise exceptions.PermissionDenied(str(revoked)) from None
        if call is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(workers.as_sent(call))


class Heartbeat(_WorkerView):
    """Keep a lease: 200 with the seconds it now runs, 409 when it is no longer current."""

    def post(self, request: Request, pk: int) -> Response:
        seconds = workers.heartbeat(self.token, call_id=pk, lease=_lease(_body(request)))
        return Response({"lease_expires_in": round(seconds, 1)})


class Answer(_WorkerView):
    """Answer a call on its lease: 200 taken, 409 not current, 422 not the shape asked for."""

    def post(self, request: Request, pk: int) -> Response:
        body = _body(request)
        lease = _lease(body)
        try:
            workers.answer(self.token, call_id=pk, lease=lease, body=body)
        except workers.BadAnswer as refused:
            then = (
                "The call has failed with this reason."
                if refused.failed
                else "The call will be handed out again."
            )
            return Response(
                {"detail": f"{refused.message} {then}", "failed": refused.failed},
                status=status.HTTP_422_UNPROCESSABLE_ENTITY,
            )
        return Response({"accepted": True})
