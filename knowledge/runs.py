"""What every run row holds: a background job on one memory (a consolidation pass, a reflection,
a compile, a study session, an insight run or a Deep review) whose row is its lease.

``Run`` is the lease's fields (``brain.leases.Lease``: who holds it, until when) and the memory
it works on; ``Requested`` adds who asked for it, ``Reasoned`` why it settled as it did. A run
model declares only what is its own: its ``State`` choices and ``state`` field (``"running"``
until settled), what it reads and keeps, and, in its ``Meta``, ``default_related_name``, the
name a memory's runs of that kind go by (``memory.runs``, ``memory.compile_runs``…).

The rules of the lease, and the one body every run kind's task has (``leases.drive``: claim,
work, renew, settle), are in ``brain/leases.py``. They live there because the platform imports
no app; the run model lives here because its memory does.
"""

from __future__ import annotations

from typing import Self, TypeVar

from django.conf import settings
from django.db import models

from brain import leases

_R = TypeVar("_R", bound=models.Model)


class RunQuerySet(models.QuerySet[_R]):
    def running(self) -> Self:
        return self.filter(state=leases.RUNNING)


def one_running(*fields: str, name: str) -> models.UniqueConstraint:
    """The database's rule that at most one run of a kind is running per ``fields``."""
    return models.UniqueConstraint(
        fields=list(fields), condition=models.Q(state=leases.RUNNING), name=name
    )


class Run(leases.Lease):
    """A run row: its lease, and the memory it works on."""

    memory = models.ForeignKey("knowledge.Memory", on_delete=models.CASCADE)

    class Meta:
        abstract = True


class Requested(models.Model):
    """A run a person asked for; nobody (None) when beat, a sweep or the system did."""

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True


class Reasoned(models.Model):
    """A run settled with its reason in words."""

    reason = models.TextField(blank=True, help_text="Why it settled as it did, in words.")

    class Meta:
        abstract = True
