"""JSON over HTTP with the standard library: one request, one ``Response``, or ``Unreachable``.

Every failure to get an HTTP answer at all — connection refused, reset, a timeout, a garbled
status line, DNS — becomes ``Unreachable`` with one line saying why, so callers decide on
retries by one exception. Any HTTP status is an answer (``Response``), 4xx and 5xx included:
what a status means belongs to the caller. A body that is not JSON is kept as text.
Proxies follow the usual environment variables (urllib's default), so a worker behind a
company proxy works as the rest of the machine does.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "brain-worker/1"


class Unreachable(Exception):
    """No HTTP answer came: the other end is down, unreachable or too slow."""


@dataclass(frozen=True)
class Response:
    status: int
    data: Any  # the decoded JSON body; the text when it is not JSON; None when empty

    @property
    def detail(self) -> str:
        """What the other end said about a refusal, in one line."""
        if isinstance(self.data, dict) and "detail" in self.data:
            return str(self.data["detail"])
        if isinstance(self.data, dict) and isinstance(self.data.get("error"), dict):
            return str(self.data["error"].get("message", self.data["error"]))
        if isinstance(self.data, dict) and "error" in self.data:
            return str(self.data["error"])
        text = "" if self.data is None else str(self.data)
        return " ".join(text.split())[:300] or f"HTTP {self.status}"


def request(
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float,
) -> Response:
    """Send ``body`` as JSON (when given) and return the status with the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})}
    if data is not None:
        sent["Content-Type"] = "application/json"
    prepared = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(prepared, timeout=timeout) as answer:
            return Response(answer.status, _decode(answer.read()))
    except urllib.error.HTTPError as error:  # a status >= 400: still an answer
        with error:
            try:
                raw = error.read()
            except (OSError, http.client.HTTPException):
                raw = b""
        return Response(error.code, _decode(raw))
    except urllib.error.URLError as error:
        raise Unreachable(_why(error.reason)) from error
    except (OSError, http.client.HTTPException, ValueError) as error:
        # ValueError: a URL urllib cannot even send (no scheme, bad port).
        raise Unreachable(_why(error)) from error


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _why(reason: object) -> str:
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    text = str(reason) or type(reason).__name__
    return " ".join(text.split())[:200]
