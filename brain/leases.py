"""A job's run row is its lease: the one way every background job here (a consolidation pass,
a reflection, a compile, a study session, an insight run, a Deep review) knows who runs it and
when nobody does any more.

The row (``knowledge.runs.Run``) has ``state`` (``"running"`` until settled) of its own, and
the lease's fields from ``Lease``: ``started_at``, ``claimed_at``, ``executor`` (``host:pid``
of the process that claimed it), ``lease_expires_at`` and ``finished_at``. The rules, each a
conditional UPDATE so two processes never both win:

- ``start``: a new running row, its lease counted from now for a worker to claim it; none when
  the database refuses a second one (a unique index: one running at a time, or one a reading).
- ``claim``: a running row nobody has claimed becomes this process's, for ``lease``.
- ``take_over``: a running row whose process is gone (``is_lost``: its lease ran out, or its
  pid is dead on this very host, which a restarted worker sees at once instead of waiting out
  the lease) becomes this process's — only if it is still held by the claim that was seen, so
  of two processes taking over one, one wins.
- ``renew``: the holder pushes its lease on while it works (``run.renew()`` between steps, for
  as long as it was claimed for); only the holder: a process whose run was taken over (its lease
  ran out while it was still working) is told so and stops.
- ``release``: the holder lets go of a run it will go on with later (a compile works in turns):
  unclaimed again, for the next message to claim.
- ``finish``: the holder settles its running row, once; a sweep or a late writer never
  overwrites an outcome already given, and a process whose run was taken over never settles
  it under the process that holds it now.
- ``settle_lost``: a running row whose process is gone is settled by whoever notices (the
  next request, a sweep) — only if it is still held by the claim that was seen, so a run taken
  over in the meantime is left to its new process; ``settle_lost_among``, every such row of a
  query (a memory's running sessions, say).
- ``to_send_again``: what beat's sweep starts again — runs nobody claimed within
  ``unclaimed_after`` (their message was lost) and claimed runs whose lease ran out (their
  worker died without the message coming back).

Each of ``start``, ``claim``, ``take_over``, ``renew``, ``release``, ``finish`` and
``settle_lost`` says whether it won: a caller that lost leaves the row alone.

``drive`` is the body of every run kind's task, the same for all: the row by id, claimed (or,
for a kind that ``takes_over``, taken over from a process that is gone), its kind's ``work``
(which settles it with ``finish``, renewing between steps), and, when the work raises, the
kind's ``failed`` (which settles it as failed with the error's reason). Nothing to do when the
row is gone, settled or held by a living process. A run kind is its model (on
``knowledge.runs.Run``), its ``Kind`` and its work; nothing else.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, models, transaction
from django.utils import timezone

from brain.embedded import pid_alive

RUNNING = "running"

logger = logging.getLogger(__name__)


class Lease(models.Model):
    """The fields every run row holds as a lease (see the module docstring), and what they say
    of it; the row declares its own ``state``."""

    state: str  # a run row's own field, "running" until settled
    held_for: timedelta  # how long this process's claim holds it, once claimed (not a column)

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

    def renew(self, **fields) -> bool:
        """Push the lease on for as long as this process claimed it for, with ``fields`` (what
        it is doing now) written with it, if this process still holds it. False: it was settled
        or taken over, and the work stops (or goes on knowing it cannot settle it)."""
        return renew(self, lease=self.held_for, **fields)


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
    run.held_for = lease
    return True


def claim(run: Any, *, lease: timedelta, **fields) -> bool:
    """Claim ``run`` (running, unclaimed) for this process; ``fields`` are set with it."""
    return _hold(type(run)._default_manager.filter(claimed_at__isnull=True), run, lease, fields)


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


def renew(run: Any, *, lease: timedelta, **fields) -> bool:
    """Push the lease on ``run`` to ``lease`` from now (``fields`` set with it), if this process
    still holds it. False: it was settled or taken over, and the caller stops working on it."""
    return _held(run).update(lease_expires_at=timezone.now() + lease, **fields) == 1


def release(run: Any, *, lease: timedelta) -> bool:
    """Let go of ``run`` while it is still running: unclaimed again, for the next message to
    claim within ``lease``, if this process holds it (a run that works in turns)."""
    unclaimed = {"claimed_at": None, "executor": "", "lease_expires_at": timezone.now() + lease}
    return _held(run).update(**unclaimed) == 1


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


def settle_lost_among(rows: models.QuerySet, state: str, **fields) -> list[Any]:
    """Settle as ``state`` every running row of ``rows`` whose process is gone (``settle_lost``,
    each as it was seen); the rows it settled."""
    return [run for run in rows.filter(state=RUNNING) if settle_lost(run, state, **fields)]


def to_send_again(model: type[models.Model], *, unclaimed_after: timedelta) -> list[int]:
    """The running rows of ``model`` whose start message should be sent again."""
    now = timezone.now()
    running = model._default_manager.filter(state=RUNNING)
    unclaimed = running.filter(claimed_at__isnull=True, started_at__lt=now - unclaimed_after)
    lost = running.filter(claimed_at__isnull=False, lease_expires_at__lt=now)
    return [*unclaimed.values_list("pk", flat=True), *lost.values_list("pk", flat=True)]


@dataclass(frozen=True)
class Kind:
    """A run kind, as ``drive`` runs its task.

    ``rows``: its run rows, selecting what its work reads. ``lease``: how long a claim holds a
    run (renewed for as long). ``work(run)``: the run's work, which settles it (``finish``)
    and renews it between steps. ``failed(run, error)``: settles a run whose work raised, as
    failed with the error's reason. ``takes_over``: a run whose process is gone is taken over
    by the redelivered message (otherwise it is left to be settled as lost). ``claimed``:
    fields written with the claim. ``not_claimed(run)``: what a message for a running row it
    could not claim does instead.
    """

    rows: Callable[[], models.QuerySet]
    lease: Callable[[], timedelta]
    work: Callable[[Any], object]
    failed: Callable[[Any, Exception], object]
    takes_over: bool = False
    claimed: dict[str, Any] = field(default_factory=dict)
    not_claimed: Callable[[Any], object] | None = None


def drive(kind: Kind, run_id: int) -> Any:
    """The body of every run kind's task: the running row ``run_id``, claimed for this process
    (or taken over), worked on and settled; the run, or None when there was nothing to do (it
    is gone, settled or held by another). An error in the work is logged and settles the run
    as failed, if this process still holds it. Safe to run twice."""
    run = kind.rows().filter(pk=run_id, state=RUNNING).first()
    if run is None:
        return None
    lease = kind.lease()
    if not (
        claim(run, lease=lease, **kind.claimed) or (kind.takes_over and take_over(run, lease=lease))
    ):
        if kind.not_claimed is not None:
            kind.not_claimed(run)
        return None
    try:
        kind.work(run)
    except Exception as error:
        logger.exception("%s failed", run)
        kind.failed(run, error)
    return run
