"""The brain server's side of the conversation: the wire protocol of ``/api/worker/``.

``POST calls/next`` long-polls for a call (204: nothing came in ``wait`` seconds), ``POST
calls/<id>/heartbeat`` keeps its lease, ``POST calls/<id>/answer`` posts the text, the vectors
or the error. Every request carries ``Authorization: Bearer <worker token>``.

What a status means, once, here: 401 and 403 are the token (unknown, or revoked: the worker
stops, ``TokenRefused``); 409 is a lease that is no longer ours (``LeaseLost``: expired,
handed to another worker, the call settled or past its deadline); 422 an answer the server
refused against the call's schema (``Refused``: it hands the call out once more on another
lease), as is any other 4xx (a request this worker should not have made: retrying it would not
help); 5xx, 429 and no answer at all are the server being away (``ServerAway``: try again
later, with backoff).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from brain.worker import transport

# The longest long-poll the protocol allows; the socket waits this much longer for the answer.
MAX_WAIT_S = 25
SLACK_S = 10.0
REQUEST_TIMEOUT_S = 30.0


class ServerAway(Exception):
    """The server did not answer, or answered with a failure of its own (5xx, 429)."""


class TokenRefused(Exception):
    """401 or 403: this token cannot take calls (unknown, or revoked)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        super().__init__(detail)


class LeaseLost(Exception):
    """409: the lease is not current; whatever we were doing for this call is no longer wanted."""


class Refused(Exception):
    """422 (the answer failed the call's schema) or another 4xx: sending it again will not help."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {detail}")


@dataclass(frozen=True)
class Call:
    """One model call as the server hands it out: exactly what the worker may see."""

    id: int
    lease: str
    lease_expires_in: float
    kind: str  # "chat" or "embed"
    task: str
    deadline_in: float
    system: str = ""
    prompt: str = ""
    max_tokens: int = 1024
    schema: dict[str, Any] | None = None
    texts: list[str] = field(default_factory=list)

    @classmethod
    def from_wire(cls, data: Any) -> Call:
        """The call in a 200 from ``next``; ServerAway when it is not one (a proxy's page...)."""
        try:
            return cls(
                id=int(data["id"]),
                lease=str(data["lease"]),
                lease_expires_in=float(data.get("lease_expires_in") or 60),
                kind=str(data.get("kind") or "chat"),
                task=str(data.get("task") or "?"),
                deadline_in=float(data.get("deadline_in") or 0),
                system=str(data.get("system") or ""),
                prompt=str(data.get("prompt") or ""),
                max_tokens=int(data.get("max_tokens") or 1024),
                schema=data.get("schema") if isinstance(data.get("schema"), dict) else None,
                texts=[str(text) for text in data.get("texts") or []],
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ServerAway(
                f"the server's call is not in the expected shape ({error!r})"
            ) from error


class BrainServer:
    """The calls endpoints of one brain server, for one token."""

    def __init__(self, url: str, token: str) -> None:
        self.base = url.rstrip("/") + "/api/worker/calls"
        self._headers = {"Authorization": f"Bearer {token}"}

    def next_call(self, *, worker: str, models: list[str], wait: float) -> Call | None:
        """The next call leased to us, or None when none came within ``wait`` seconds."""
        wait = max(0.0, min(wait, MAX_WAIT_S))
        response = self._post(
            "/next", {"worker": worker, "models": models, "wait": wait}, timeout=wait + SLACK_S
        )
        if response.status == 204:
            return None
        self._check(response)
        return Call.from_wire(response.data)

    def heartbeat(self, call: Call) -> float:
        """Keep ``call``'s lease; the seconds it now has left."""
        response = self._post(f"/{call.id}/heartbeat", {"lease": call.lease})
        self._check(response)
        data = response.data if isinstance(response.data, dict) else {}
        return float(data.get("lease_expires_in") or call.lease_expires_in)

    def answer(self, call: Call, answer: dict[str, Any]) -> None:
        """Post ``answer`` (``text`` with token counts, ``vectors``, or ``error``) for ``call``."""
        self._check(self._post(f"/{call.id}/answer", {"lease": call.lease, **answer}))

    def _post(
        self, path: str, body: dict[str, Any], *, timeout: float = REQUEST_TIMEOUT_S
    ) -> transport.Response:
        try:
            return transport.request(
                "POST", self.base + path, body=body, headers=self._headers, timeout=timeout
            )
        except transport.Unreachable as error:
            raise ServerAway(str(error)) from error

    @staticmethod
    def _check(response: transport.Response) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        if status in (401, 403):
            raise TokenRefused(status, response.detail)
        if status == 409:
            raise LeaseLost(response.detail)
        if 400 <= status < 500 and status != 429:
            raise Refused(status, response.detail)
        raise ServerAway(f"HTTP {status}: {response.detail}")
