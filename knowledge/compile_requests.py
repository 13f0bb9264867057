"""Asking for a source to be compiled into facts on pages, and how far a compile has got.

The compiling itself — statements read from each passage and filed through the write gate, each
fact citing its passages — is ``memory.compiling`` (it files through ``memory.actions.learn``,
which this layer may not import); this module holds what the lower layer needs to ask for one
and to show it: the ``CompileRun`` row (the lease) and its start message, sent by name once the
row is committed.

- ``request_compile(source)``: a run for a note, document or email, unless one is already
  running for it (that one is returned: asking twice compiles once). Refused quietly (None) when
  learning is off; ``compile_again`` says so in words for a person who pressed the button.
- ``latest(source)``: the newest run, for the source view ("Compiling: 12 of 40 passages").
- ``learning_off(memory)``: the master switch, read from the database as
  ``memory.switches.learning_on`` reads it (that module is the rule; a lower layer cannot ask it).
"""

from __future__ import annotations

from datetime import timedelta

from brain import leases
from brain.celery import send_on_commit
from brain.errors import StateConflict
from knowledge.models import CompileRun, Memory, Source

TASK = "memory.tasks.compile_source"
COMPILED_KINDS = frozenset({Source.Kind.NOTE, Source.Kind.DOCUMENT, Source.Kind.EMAIL})
# A claimed run renews its lease after every passage; one not renewed for this long has lost its
# worker (a passage is a few model calls' worth of work at most: MODEL_TIMEOUT_S each).
LEASE = timedelta(minutes=5)


class NotCompiled(StateConflict):
    """A source that cannot be compiled now; the message says why."""


def learning_off(memory: Memory) -> bool:
    return not Memory.objects.filter(pk=memory.pk, learning=True).exists()


def compiles(source: Source) -> bool:
    """Whether ``source`` is the kind that is compiled: a note, a document or an email (a
    conversation is reflected on instead; a taught line is its own fact)."""
    return source.kind in COMPILED_KINDS


def request_compile(source: Source, *, by=None) -> CompileRun | None:
    """A run compiling ``source`` on a worker, its message sent once the row is committed; the
    run already going when there is one; None when the source is not compiled or learning is
    off."""
    if not compiles(source) or learning_off(source.memory):
        return None
    running = CompileRun.objects.running().filter(source=source).first()
    if running is not None:
        return running
    run = leases.start(
        CompileRun, lease=LEASE, memory_id=source.memory_id, source=source, requested_by=by
    )
    if run is None:  # asked for twice at the same moment: one run
        return CompileRun.objects.running().filter(source=source).first()
    send_on_commit(TASK, run.pk)
    return run


def compile_again(source: Source, *, by=None) -> CompileRun:
    """ "Compile again" on the source view: a run, or NotCompiled saying why there is none."""
    if not compiles(source):
        raise NotCompiled(
            f"“{source.title}” is not a note, document or email: only those are compiled."
        )
    if learning_off(source.memory):
        raise NotCompiled(
            f"Learning is switched off for {source.memory.name}: nothing is compiled until it "
            "is back on."
        )
    run = request_compile(source, by=by)
    assert run is not None  # a compiled kind with learning on always gets one
    return run


def latest(source: Source) -> CompileRun | None:
    return CompileRun.objects.for_source(source).order_by("-started_at", "-pk").first()
