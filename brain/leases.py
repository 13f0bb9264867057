"""A job's run row is its lease: the one way every background job here (a consolidation pass,
a reflection, a compile, a study session, an insight run) knows who runs it and when nobody
does any more.

The row has ``state`` (``"running"`` until settled) and ``reason`` of its own, and the lease's
fields from ``Lease``: ``started_at``, ``claimed_at``, ``executor`` (``host:pid`` of the process
that claimed it), ``lease_expires_at`` and ``finished_at``. The rules, each a conditional
UPDATE so two processes never both win:

- ``start``: a new running row, its lease counted from now for a worker to claim it; none when
  the database refuses a second one (a unique index: one running at a time, or one a reading).
- ``claim``: a running row nobody has claimed becomes this process's, for ``lease``.
- ``take_over``: a running row whose process is gone (``is_lost``: its lease ran out, or its
  pid is dead on this very host, which a restarted worker sees at once instead of waiting out
  the lease) becomes this process's — only if it is still held by the claim that was seen, so
  of two processes taking over one, one wins. ``claim_running`` is how a task's body begins:
  the row by id, claimed (or taken over), or nothing to do.
- ``renew``: the holder pushes its lease on while it works; only the holder: a process whose
  run was taken over (its lease ran out while it was still working) is told so and stops.
- ``finish``: the holder settles its running row, once; a sweep or a late writer never
  overwrites an outcome already given, and a process whose run was taken over never settles
  it under the process that holds it now.
- ``settle_lost``: a running row whose process is gone is settled by whoever notices (the
  next request, a sweep) — only if it is still held by the claim that was seen, so a run taken
  over in the meantime is left to its new process.
- ``to_send_again``: what beat's sweep starts again — runs nobody claimed within
  ``unclaimed_after`` (their message was lost) and claimed runs whose lease ran out (their
  worker died without the message coming back).

Each of ``start``, ``claim``, ``take_over``, ``renew``, ``finish`` and ``settle_lost`` says
whether it won: a caller that lost leaves the row alone.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from brain.embedded import pid_alive

RUNNING = "running"


class Lease(models.Model):
    """The fields every run row holds as a lease (see the module docstring), and what they say
    of it; the row declares its own ``state``."""

    state: str  # a run row's own field, "running" until settled

    started_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    executor = models.CharField(max_length=255, blank=True)  # host:pid of the worker process
    lease_expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_running(self) -> bool:
        return self.state == RUNNING

    @property
    def elapsed_seconds(self) -> float:
        """How long it has run, or ran."""
        end = self.finished_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())


def executor() -> str:
    """This process, as a run row names the one holding it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def start(model: type[models.Model], *, lease: timedelta, **fields) -> Any:
    """A new running row of ``model`` with ``fields``, or None when the database refused it
    because one is there already (its unique index); the caller decides what then."""
    try:
        with transaction.atomic():
            return model._default_manager.create(lease_expires_at=timezone.now() + lease, **fields)
    except IntegrityError:
        return None


def _hold(rows: models.QuerySet, run: Any, lease: timedelta, fields: dict) -> bool:
    """Make ``run`` this process's if it is still among ``rows``: the claim is written on the
    row and, once won, on ``run`` too."""
    now = timezone.now()
    held = {"claimed_at": now, "executor": executor(), "lease_expires_at": now + lease, **fields}
    if rows.filter(pk=run.pk, state=RUNNING).update(**held) != 1:
        return False
    for name, value in held.items():
        setattr(run, name, value)
    return True


def claim(run: Any, *, lease: timedelta, **fields) -> bool:
    """Claim ``run`` (running, unclaimed) for this process; ``fields`` are set with it."""
    return _hold(type(run)._default_manager.filter(claimed_at__isnull=True), run, lease, fields)


def claim_running(
    rows: models.QuerySet, run_id: int, *, lease: timedelta, or_take_over: bool = False, **fields
) -> Any:
    """The running row ``run_id`` of ``rows`` (with what they select), claimed for this process
    with ``fields`` — or, ``or_take_over``, taken over from a process that is gone; None when
    it is gone, settled or held by another. How a task's body begins."""
    run = rows.filter(pk=run_id, state=RUNNING).first()
    if run is None:
        return None
    if claim(run, lease=lease, **fields) or (or_take_over and take_over(run, lease=lease)):
        return run
    return None


def is_lost(run: Any, *, now=None) -> bool:
    """Whether the process holding ``run`` is gone: its lease ran out, or it ran on this host
    and its pid is dead."""
    if run.lease_expires_at < (now or timezone.now()):
        return True
    host, _, pid = (run.executor or "").rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid))


def take_over(run: Any, *, lease: timedelta) -> bool:
    """Claim a running ``run`` whose process is gone, as it was seen: this process finishes
    what the other started."""
    if run.claimed_at is None or not is_lost(run):
        return False
    seen = type(run)._default_manager.filter(claimed_at=run.claimed_at, executor=run.executor)
    return _hold(seen, run, lease, {})


def _held(run: Any) -> models.QuerySet:
    """``run``, while it is running and this process holds it."""
    return type(run)._default_manager.filter(pk=run.pk, state=RUNNING, executor=executor())


def renew(run: Any, *, lease: timedelta) -> bool:
    """Push the lease on ``run`` to ``lease`` from now, if this process still holds it. False:
    it was settled or taken over, and the caller stops working on it."""
    return _held(run).update(lease_expires_at=timezone.now() + lease) == 1


def finish(run: Any, state: str, **fields) -> bool:
    """Settle ``run`` as ``state`` (``fields``, such as ``reason``, set with it) if this process
    still holds it. False: something else settled it (a sweep, a deleted row) or took it
    over, and the outcome is not this process's to give."""
    return _held(run).update(state=state, finished_at=timezone.now(), **fields) == 1


def settle_lost(run: Any, state: str, **fields) -> bool:
    """Settle ``run``, seen running, as ``state`` when its process is gone (``is_lost``) and
    nobody has claimed or taken it over since it was seen."""
    if not is_lost(run):
        return False
    settled = (
        type(run)
        ._default_manager.filter(
            pk=run.pk, state=RUNNING, claimed_at=run.claimed_at, executor=run.executor
        )
        .update(state=state, finished_at=timezone.now(), **fields)
    )
    return settled == 1


def to_send_again(model: type[models.Model], *, unclaimed_after: timedelta) -> list[int]:
    """The running rows of ``model`` whose start message should be sent again."""
    now = timezone.now()
    running = model._default_manager.filter(state=RUNNING)
    unclaimed = running.filter(claimed_at__isnull=True, started_at__lt=now - unclaimed_after)
    lost = running.filter(claimed_at__isnull=False, lease_expires_at__lt=now)
    return [*unclaimed.values_list("pk", flat=True), *lost.values_list("pk", flat=True)]
