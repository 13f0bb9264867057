"""Workers: model calls served by a program on a machine the server cannot reach, pulled over
HTTP with a token that can do nothing else. Every surface (the ``/api/worker/`` endpoints, the
admin, ``brain worker-token``, the Knowledge tab) calls the actions here.

Tokens (``create_token``, ``revoke_token``, ``list_tokens``, ``token_for_key``): a key is
``bw_`` and 32 random bytes (URL-safe base64), shown once when it is made; only its SHA-256 is
stored. A revoked token is refused at once, in the middle of a call too.

Leasing (``take_next``, ``heartbeat``, ``answer``): a ``WaitingCall`` is leased to one worker
at a time, by ``SELECT … FOR UPDATE SKIP LOCKED`` in a short transaction, so two workers asking
at once never get the same call. The rules:

- ``LEASE_S`` (``BRAIN_WORKER_LEASE_S``, 60 s): a lease the worker does not renew with a
  heartbeat runs out, and the call is handed out again to whoever asks next. 60 s is several
  heartbeats (the worker sends one every third of it) and short next to a job's deadline
  (a consolidation pass has 480 s), so a dead worker costs one lease, not the job.
- A call past its deadline is never handed out, and no answer to it is taken: the job has
  already failed with "waiting for a worker".
- An answer is taken only on the current lease of a live token: anything else is a conflict
  (409) and changes nothing.
- An answer that does not validate (not the JSON the call's schema asks for, vectors of the
  wrong count) or a worker reporting its model failed is refused: the first time the call
  goes back to waiting and is handed out again on a new lease; the second time it fails with
  that reason, and the job reports it. ``BAD_ANSWERS_AT_MOST`` = 2: one more try catches a
  model's occasional slip without letting a model that cannot do the task burn the deadline.

Waiting without holding anything: long polls and the job waiting for its answer check the row
(the truth), then wait on PostgreSQL's LISTEN/NOTIFY for at most ``POLL_S`` (0.2 s) before
checking again. A notification only wakes them early (a call made, an answer given); one that
is lost (inside a test's transaction, say) costs at most ``POLL_S``. No transaction is open
while waiting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import secrets
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pydantic
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from brain.errors import StateConflict
from brain.llm import structured
from brain.llm.errors import LLMInvalidOutput
from brain.models import ModelRoute, WaitingCall, Worker, WorkerToken

KEY_PREFIX = "bw_"
POLL_S = 0.2
WAIT_DEFAULT_S = 20.0
WAIT_MAX_S = 25.0  # under gunicorn's 60 s timeout and any proxy's idle limit
BAD_ANSWERS_AT_MOST = 2
NAME_MAX = 120
REVOKED_MESSAGE = "This worker token was revoked."
KEPT_AFTER_DEADLINE = timedelta(days=1)
FORGET_EVERY_S = 60.0
SEEN_EVERY_S = 10  # the worker page shows "seen … ago": ten seconds is as good as now


def lease_s() -> float:
    return float(getattr(settings, "BRAIN_WORKER_LEASE_S", 60))


# Tokens ----------------------------------------------------------------------------------------


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_worker_key(key: str) -> bool:
    return key.startswith(KEY_PREFIX)


@dataclass(frozen=True)
class TokenMade:
    token: WorkerToken
    key: str  # the only time the key exists outside the worker's machine

    @property
    def message(self) -> str:
        return (
            f"Worker token “{self.token.name}” made for the memory “{self.token.memory.name}”. "
            f"Its key, shown this once: {self.key}"
        )


@dataclass(frozen=True)
class TokenRevoked:
    token: WorkerToken
    already: bool

    @property
    def message(self) -> str:
        if self.already:
            return f"Worker token “{self.token.name}” was already revoked."
        return f"Worker token “{self.token.name}” revoked: its workers can take no more calls."


def create_token(*, memory, name: str, created_by=None) -> TokenMade:
    """A new token for ``memory``; its key is in the result and nowhere else."""
    name = " ".join(name.split())
    if not name:
        raise ValidationError({"name": "Give the token a name (the machine it runs on, say)."})
    if len(name) > NAME_MAX:
        raise ValidationError({"name": f"A token's name is at most {NAME_MAX} characters."})
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = WorkerToken.objects.create(
        memory=memory,
        name=name,
        key_hash=_hash(key),
        prefix=key[: len(KEY_PREFIX) + 6],
        created_by=created_by if getattr(created_by, "pk", None) else None,
    )
    return TokenMade(token, key)


def revoke_token(token: WorkerToken) -> TokenRevoked:
    """Revoke ``token``: from now on every request with it is refused, answers included, and
    the calls its workers hold go back to waiting at once for another worker."""
    with transaction.atomic():
        updated = WorkerToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        released = WaitingCall.objects.filter(
            leased_to=token, state=WaitingCall.State.LEASED
        ).update(state=WaitingCall.State.WAITING, lease="", lease_expires_at=None)
        if released:
            notify(calls_channel(token.memory_id))
    token.refresh_from_db()
    return TokenRevoked(token, already=not updated)


def list_tokens(memory=None) -> QuerySet[WorkerToken]:
    tokens = WorkerToken.objects.select_related("memory").order_by("memory__slug", "created_at")
    return tokens.filter(memory=memory) if memory is not None else tokens


def token_for_key(key: str) -> WorkerToken | None:
    """The token whose key this is, revoked or not; None for a key never given out."""
    if not looks_like_worker_key(key):
        return None
    return WorkerToken.objects.select_related("memory").filter(key_hash=_hash(key)).first()


# Routes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteSet:
    memory: Any
    task: str
    provider: str  # "" when the task now follows the memory's default
    model: str

    @property
    def message(self) -> str:
        what = "every task" if self.task == ModelRoute.DEFAULT_TASK else f"“{self.task}”"
        if not self.provider:
            return f"Model calls for {what} follow the memory's default again."
        label = ModelRoute.Provider(self.provider).label
        model = f" (model {self.model})" if self.model else ""
        return f"Model calls for {what} now go to {label}{model}."


def set_route(*, memory, task: str, provider: str, model: str = "") -> RouteSet:
    """Send ``memory``'s calls for ``task`` ("*": every task without its own) to ``provider``;
    ``provider`` "" removes the task's own route (it follows the default again)."""
    task, model = task.strip(), " ".join(model.split())
    if not task or len(task) > 64:
        raise ValidationError({"task": "Name the task (at most 64 characters), or * for all."})
    if provider and provider not in ModelRoute.Provider.values:
        choices = ", ".join(ModelRoute.Provider.values)
        raise ValidationError({"provider": f"Choose one of {choices}, or none."})
    if len(model) > 128:
        raise ValidationError({"model": "A model's name is at most 128 characters."})
    if not provider:
        ModelRoute.objects.filter(memory=memory, task=task).delete()
        return RouteSet(memory, task, "", "")
    if provider == ModelRoute.Provider.OFFLINE:
        model = ""
    ModelRoute.objects.update_or_create(
        memory=memory, task=task, defaults={"provider": provider, "model": model}
    )
    return RouteSet(memory, task, provider, model)


@dataclass(frozen=True)
class RoutesSet:
    changed: list[RouteSet]

    @property
    def message(self) -> str:
        if not self.changed:
            return "No route changed."
        return " ".join(change.message for change in self.changed)


def set_routes(*, memory, routes: dict[str, tuple[str, str]]) -> RoutesSet:
    """Several routes at once (the settings form): ``{task: (provider, model)}``; only those
    that differ from what is stored are written, and the message names each change."""
    stored = {row.task: row for row in ModelRoute.objects.filter(memory=memory)}
    changed = []
    for task, (provider, model) in routes.items():
        row = stored.get(task)
        model = "" if provider in ("", ModelRoute.Provider.OFFLINE) else " ".join(model.split())
        current = (row.provider, row.model) if row else ("", "")
        if current == (provider, model):
            continue
        changed.append(set_route(memory=memory, task=task, provider=provider, model=model))
    return RoutesSet(changed)


# Waiting ---------------------------------------------------------------------------------------


def calls_channel(memory_id: int) -> str:
    return f"brain_calls_{memory_id}"


def call_channel(call_id: int) -> str:
    return f"brain_call_{call_id}"


def notify(channel: str) -> None:
    """Wake whoever waits on ``channel`` (delivered when the current transaction commits)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [channel])


@contextmanager
def listening(channel: str) -> Iterator[None]:
    """LISTEN on ``channel`` for the duration: entered before the row is first read, so a
    notification sent between a read and the wait is not missed (psycopg keeps what arrives
    outside ``notifies()`` for the next call)."""
    if connection.in_atomic_block:  # LISTEN would only start at the commit: wait_for sleeps
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(f'LISTEN "{channel}"')
    try:
        yield
    finally:
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute(f'UNLISTEN "{channel}"')


def wait_for(seconds: float) -> None:
    """Return when a channel this connection listens on is notified, or after ``seconds`` (at
    most ``POLL_S``). The caller reads the row again afterwards: the row is the truth."""
    seconds = max(0.0, min(seconds, POLL_S))
    if seconds == 0:
        return
    if connection.in_atomic_block:
        time.sleep(seconds)
        return
    connection.ensure_connection()
    for _ in connection.connection.notifies(timeout=seconds, stop_after=1):
        break


_forgotten_at: dict[int, float] = {}  # memory id -> when this process last forgot its old calls


def forget_old(memory_id: int) -> int:
    """Delete the memory's calls a day past their deadline: settled long ago, or left behind by
    a job whose process died while it waited (nobody else settles those). A day keeps
    yesterday's on the admin's list; each call's record stays as its ``ModelCall``. Runs at
    most every ``FORGET_EVERY_S`` per memory in a process: a statement spared on most calls."""
    now = time.monotonic()
    if now - _forgotten_at.get(memory_id, -FORGET_EVERY_S) < FORGET_EVERY_S:
        return 0
    _forgotten_at[memory_id] = now
    old = timezone.now() - KEPT_AFTER_DEADLINE
    deleted, _ = WaitingCall.objects.filter(memory_id=memory_id, deadline__lt=old).delete()
    return deleted


# Leasing ---------------------------------------------------------------------------------------


@contextmanager
def coordinating() -> Iterator[None]:
    """A transaction that only coordinates (a lease, a call written, "seen"): committed without
    waiting for the disk (``synchronous_commit off``). A crash may lose its last such commit —
    a lease the worker then loses (409), a call its dying job no longer waits for — never an
    answer taken: ``answer`` commits as usual. Inside a caller's transaction it is a savepoint
    and changes nothing of how that transaction commits."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def seen(token: WorkerToken, name: str, models: list[str] | None = None) -> None:
    """Record that the worker ``name`` holding ``token`` asked just now. Every long poll asks,
    so it writes at most every ``SEEN_EVERY_S`` unless the models it serves changed."""
    now = timezone.now()
    name = " ".join(name.split())[:NAME_MAX] or "worker"
    models = models or []
    fresh = Worker.objects.filter(
        token=token,
        name=name,
        models_served=models,
        last_seen_at__gte=now - timedelta(seconds=SEEN_EVERY_S),
    )
    if fresh.exists():
        return
    with coordinating():
        WorkerToken.objects.filter(pk=token.pk).update(last_seen_at=now)
        Worker.objects.bulk_create(
            [Worker(token=token, name=name, models_served=models, last_seen_at=now)],
            update_conflicts=True,
            unique_fields=["token", "name"],
            update_fields=["models_served", "last_seen_at"],
        )


def _open_calls(token: WorkerToken, models: list[str]) -> QuerySet[WaitingCall]:
    now = timezone.now()
    calls = WaitingCall.objects.filter(memory_id=token.memory_id, deadline__gt=now).filter(
        Q(state=WaitingCall.State.WAITING)
        | Q(state=WaitingCall.State.LEASED, lease_expires_at__lt=now)
    )
    if models:
        calls = calls.filter(Q(model="") | Q(model__in=models))
    return calls


def _lease_one(token: WorkerToken, worker_name: str, models: list[str]) -> WaitingCall | None:
    with coordinating():
        call = (
            _open_calls(token, models)
            .select_for_update(skip_locked=True)
            .order_by("created_at", "pk")
            .first()
        )
        if call is None:
            return None
        call.state = WaitingCall.State.LEASED
        call.lease = secrets.token_urlsafe(24)
        call.leased_to = token
        call.worker_name = worker_name
        call.lease_expires_at = timezone.now() + timedelta(seconds=lease_s())
        call.attempts += 1
        call.save(
            update_fields=[
                "state",
                "lease",
                "leased_to",
                "worker_name",
                "lease_expires_at",
                "attempts",
            ]
        )
        notify(call_channel(call.pk))  # its job says a worker is answering
        return call


def take_next(
    token: WorkerToken, *, worker_name: str, models: list[str], wait: float
) -> WaitingCall | None:
    """The oldest call for the token's memory a worker serving ``models`` may take, leased to
    it; waits up to ``wait`` seconds for one to come; None when none came."""
    worker_name = " ".join(worker_name.split())[:NAME_MAX] or "worker"
    seen(token, worker_name, models)
    ends = time.monotonic() + max(0.0, min(wait, WAIT_MAX_S))
    call = _lease_one(token, worker_name, models)  # the token was checked by its request
    if call is not None or wait <= 0:
        return call
    with listening(calls_channel(token.memory_id)):  # then read again: nothing is missed
        while True:
            call = _lease_one(token, worker_name, models)
            if call is not None:
                return call
            left = ends - time.monotonic()
            if left <= 0:
                return None
            wait_for(left)
            if not is_live(token):
                raise TokenRevokedError(REVOKED_MESSAGE)


class TokenRevokedError(Exception):
    """The token was revoked while its worker waited or worked (a 403)."""


class BadAnswer(Exception):
    """The answer does not validate against what the call asked for (a 422)."""

    def __init__(self, message: str, *, failed: bool):
        super().__init__(message)
        self.message = message
        self.failed = failed  # True: that was the last try, the call failed with it


def is_live(token: WorkerToken) -> bool:
    return WorkerToken.objects.filter(pk=token.pk, revoked_at__isnull=True).exists()


def heartbeat(token: WorkerToken, *, call_id: int, lease: str) -> float:
    """Renew the lease; the seconds it now runs. StateConflict when it is not current."""
    now = timezone.now()
    renewed = WaitingCall.objects.filter(
        pk=call_id,
        state=WaitingCall.State.LEASED,
        lease=lease,
        leased_to=token,
        leased_to__revoked_at__isnull=True,
        lease_expires_at__gte=now,
        deadline__gt=now,
    ).update(lease_expires_at=now + timedelta(seconds=lease_s()))
    if not renewed:
        raise StateConflict(_why_not_current(call_id, lease))
    return lease_s()


def _why_not_current(call_id: int, lease: str) -> str:
    call = WaitingCall.objects.filter(pk=call_id).first()
    if call is None:
        return "There is no such call."
    if call.state == WaitingCall.State.ANSWERED:
        return "This call was already answered."
    if call.state == WaitingCall.State.EXPIRED or call.deadline <= timezone.now():
        return "This call is past its deadline: the job has given up waiting for it."
    if call.state == WaitingCall.State.FAILED:
        return f"This call has failed: {call.error}"
    if call.lease != lease:
        return "This lease is no longer current: the call was handed to another worker."
    return "This lease ran out: the call is being handed out again."


def answer(token: WorkerToken, *, call_id: int, lease: str, body: dict[str, Any]) -> WaitingCall:
    """Take a worker's answer on its current lease.

    Raises StateConflict (409) when the lease is not current, BadAnswer (422) when the answer
    does not validate (the call goes back to waiting once, then fails), ValidationError (400)
    when the body is not an answer at all.
    """
    text, vectors, error = body.get("text"), body.get("vectors"), body.get("error")
    if sum(value is not None for value in (text, vectors, error)) != 1:
        raise ValidationError("An answer carries exactly one of text, vectors or error.")
    tokens = {}
    for field in ("input_tokens", "output_tokens"):
        value = body.get(field)
        if value is not None and (not isinstance(value, int) or value < 0 or value > 2**31 - 1):
            raise ValidationError({field: "A count of tokens: a whole number, or null."})
        tokens[field] = value
    refused: BadAnswer | None = None
    with transaction.atomic():
        call = WaitingCall.objects.select_for_update().filter(pk=call_id).first()
        now = timezone.now()
        if (
            call is None
            or call.state != WaitingCall.State.LEASED
            or call.lease != lease
            or call.leased_to_id != token.pk
            or call.lease_expires_at is None
            or call.lease_expires_at < now
            or call.deadline <= now
        ):
            raise StateConflict(_why_not_current(call_id, lease))
        worker = Worker.objects.filter(token=token, name=call.worker_name)
        try:
            if error is not None:
                raise BadAnswer(f"The worker's model failed: {_line(str(error))}", failed=False)
            if call.kind == WaitingCall.Kind.EMBED:
                call.vectors = _valid_vectors(call, vectors)
            else:
                call.text = _valid_text(call, text)
        except BadAnswer as bad:
            call.bad_answers += 1
            final = call.bad_answers >= BAD_ANSWERS_AT_MOST
            call.state = WaitingCall.State.FAILED if final else WaitingCall.State.WAITING
            call.error = bad.message
            call.lease, call.lease_expires_at = "", None
            call.save(update_fields=["state", "error", "lease", "lease_expires_at", "bad_answers"])
            worker.update(refused=F("refused") + 1, last_call_at=now, last_task=call.task)
            notify(call_channel(call.pk) if final else calls_channel(call.memory_id))
            if error is None:  # a worker that says its model failed has nothing refused
                refused = BadAnswer(bad.message, failed=final)
        else:
            call.state = WaitingCall.State.ANSWERED
            call.input_tokens = tokens["input_tokens"]
            call.output_tokens = tokens["output_tokens"]
            call.answered_at = now
            call.error = ""
            call.save(
                update_fields=[
                    "state",
                    "text",
                    "vectors",
                    "input_tokens",
                    "output_tokens",
                    "answered_at",
                    "error",
                ]
            )
            worker.update(served=F("served") + 1, last_call_at=now, last_task=call.task)
            notify(call_channel(call.pk))
    if refused is not None:  # raised after the commit: the refusal itself is kept
        raise refused
    return call


def _line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _loaded_model(name: str) -> type[pydantic.BaseModel] | None:
    """The pydantic model named ``name`` (``module.QualName``, as the gateway stores it) if this
    process has loaded its module, else None; nothing is imported. The web process loads every
    module whose model calls ask for one (surfaces/worker_urls.py)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        found: Any = sys.modules.get(".".join(parts[:cut]))
        if found is None:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute, None)
        if isinstance(found, type) and issubclass(found, pydantic.BaseModel):
            return found
        return None
    return None


def _valid_text(call: WaitingCall, text: Any) -> str:
    if not isinstance(text, str):
        raise BadAnswer("A chat answer's text must be a string.", failed=False)
    if call.output_class:  # the gateway's own check, so both agree
        output = _loaded_model(call.output_class)
        if output is not None:
            try:
                structured.parse(text, output, stop_reason=None)
            except LLMInvalidOutput as error:
                raise BadAnswer(str(error), failed=False) from None
            return text
    if call.schema is not None:
        try:
            value = json.loads(structured.unfence(text.strip()))
        except ValueError:
            raise BadAnswer("The answer is not the JSON object asked for.", failed=False) from None
        if not isinstance(value, dict):
            raise BadAnswer("The answer is not the JSON object asked for.", failed=False)
    return text


def _valid_vectors(call: WaitingCall, vectors: Any) -> list[list[float]]:
    count = len(call.texts or [])
    if not isinstance(vectors, list) or len(vectors) != count:
        raise BadAnswer(f"An embed answer is a list of {count} vectors.", failed=False)
    dimensions = (call.schema or {}).get("dimensions") if isinstance(call.schema, dict) else None
    size = None
    for vector in vectors:
        if not isinstance(vector, list) or not vector:
            raise BadAnswer("Each vector is a non-empty list of numbers.", failed=False)
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in vector
        ):
            raise BadAnswer("Each vector is a list of finite numbers.", failed=False)
        size = size or len(vector)
        if len(vector) != size or (dimensions and len(vector) != dimensions):
            wanted = dimensions or size
            raise BadAnswer(f"Every vector must have {wanted} numbers.", failed=False)
    return vectors


# What a call carries ---------------------------------------------------------------------------


def as_sent(call: WaitingCall) -> dict[str, Any]:
    """The call as the worker receives it: what it needs to ask its model, nothing more."""
    now = timezone.now()
    body: dict[str, Any] = {
        "id": call.pk,
        "lease": call.lease,
        "lease_expires_in": round(lease_s(), 1),
        "kind": call.kind,
        "task": call.task,
        "model": call.model,
        "system": call.system,
        "prompt": call.prompt,
        "max_tokens": call.max_tokens,
        "schema": call.schema,
        "deadline_in": round(max(0.0, (call.deadline - now).total_seconds()), 1),
    }
    if call.kind == WaitingCall.Kind.EMBED:
        body["texts"] = call.texts
    return body
