"""The consolidation pass: the one writer that folds the inbox into the memory document.

A pass is a ``ConsolidationRun`` row, created by ``request_consolidation`` (the Knowledge tab,
the API, the CLI, early filing, the sweep and the daily pass all ask here); a Celery message,
sent by the task's name, only starts it. The worker claims the row with a conditional UPDATE,
reads the document and the pending items, asks the composer (no transaction or lock held while
it thinks), checks the answer in code, and commits in one transaction — the revision, the
change rows, exactly the items it read marked filed — only if the document is still at the
generation it read (``revisions.write_document``). Any failure leaves the document untouched and
the queue pending, and the run row names the reason.

Safe to run twice: a second delivery of the same message finds the row claimed and exits.

A pass that did not finish its work always leads to another while items wait:

- lost (its process died, or its lease ran out): whoever notices — the redelivered message, a
  request, the sweep — marks it failed, and the redelivery and the sweep ask for a new pass;
- beaten by a person's write or a lock race: it asks for a new pass itself (``_retry_later``);
- failed or timed out in its own work (a model outage, a bug): the sweep asks again.

The sweep (every 2 minutes on beat) asks whenever a learning memory has items waiting, no pass
running, and its last pass failed — once the pause for the failures in a row has passed
(``retry_pause``): none after one failure (a lost worker or a race is a one-off), then 2, 4, 8
… minutes up to an hour, because a failure that repeats is an outage, and every try may cost a
model call. A pass that did its work (filed, kept the queue, refused an answer) leaves the rest
for the daily pass or early filing, which the sweep also re-checks in case its request was lost.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass, replace
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from brain import leases
from brain.celery import send_on_commit
from brain.db import retry
from brain.words import counted
from knowledge import actions as knowledge_actions
from knowledge import visibility
from knowledge.actions import reconcile_with_document
from knowledge.models import Fact, Memory
from knowledge.statements import compare
from memory import document, revisions, switches
from memory.composers import get_composer
from memory.composers.base import (
    AVOID_PREFIX,
    FAILURES_HEADING,
    VOICE_MAX_BYTES,
    Candidate,
    Composer,
    ComposerError,
    ComposerTimeout,
    Composition,
    Request,
    failure_lines,
    failure_statement,
    is_avoid_line,
    says_the_same,
    statement_of,
)
from memory.composers.offline import distil_voice
from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem
from memory.switches import LearningOff

logger = logging.getLogger(__name__)

EARLY_FILING_AT = 20  # pending items that start a pass without waiting for the daily one
MAX_DROP_SHARE = 0.6  # a pass that would drop more of the document's content lines is refused
UNCHANGED_ANSWER = re.compile(
    r"^\W*(unchanged|no changes?( needed)?|nothing to (add|change))\W*$", re.IGNORECASE
)
RESEND_AFTER = timedelta(seconds=60)  # an unclaimed run's start message is sent again after this
REASON_MAX_CHARS = 400  # a failure reason is read on the runs list: the message and where, no dump
FIRST_RETRY_PAUSE = timedelta(minutes=2)  # the sweep's interval: the second try is the next sweep
MAX_RETRY_PAUSE = timedelta(hours=1)  # an outage is still retried hourly, a few calls a day at most
UNFINISHED = (ConsolidationRun.State.FAILED, ConsolidationRun.State.TIMED_OUT)
LEARNING_OFF = "Learning was switched off; nothing was filed and the queue is unchanged."


class OverCap(ComposerError):
    pass


def deadline_seconds() -> int:
    return settings.BRAIN_CONSOLIDATION_DEADLINE_S


def lease_length() -> timedelta:
    """How long a claimed run may go without finishing before another process calls it lost."""
    return timedelta(seconds=deadline_seconds() + 60)


def send_start(run: ConsolidationRun) -> None:
    """The message that starts ``run`` on a worker, sent once the run row is committed."""
    send_on_commit("memory.tasks.consolidate", run.pk)


# Asking for a pass ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PassRequest:
    run: ConsolidationRun
    started: bool  # False: one was already running, and this is it

    @property
    def message(self) -> str:
        if self.started:
            return "Filing started: the pass runs in the background."
        return "A pass is already running; it was not started twice."


def request_consolidation(
    *, memory: Memory, trigger: str, by=None, send: bool = True
) -> PassRequest:
    """Start a pass unless one is running. The run row is the lease; the Celery message sent
    after commit only starts it, so a lost message is re-sent by the sweep. With
    ``send=False`` the caller runs the pass itself (the CLI does, then prints the outcome)."""
    if not memory.learning:
        raise LearningOff(memory)
    settle_lost_runs(memory=memory)
    running = ConsolidationRun.objects.running().filter(memory=memory).first()
    if running:
        return PassRequest(running, started=False)
    run = leases.start(
        ConsolidationRun, lease=lease_length(), memory=memory, trigger=trigger, requested_by=by
    )
    if run is None:  # another request won the partial unique index
        return PassRequest(ConsolidationRun.objects.running().get(memory=memory), started=False)
    if send:
        send_start(run)
    return PassRequest(run, started=True)


@dataclass(frozen=True)
class AtOnce:
    """What became of a line taught to be filed at once (``file_at_once``)."""

    request: PassRequest | None  # None: learning is off, and it waits in the queue

    @property
    def message(self) -> str:
        if self.request is None:
            return "Learning is switched off, so it waits in the queue until it is back on."
        if self.request.started:
            return "Filing it into the document now."
        return (
            "A pass is filing the queue right now; this line is filed into the document as "
            "soon as it finishes."
        )


def file_at_once(*, item: InboxItem, by=None) -> AtOnce:
    """Teach it something merges straight in: ``item`` is filed into the document by a pass of
    its own now, not left for the daily pass. One writer still: when a pass is running, the
    item waits its turn, and a pass for it is asked for when that one ends (``execute``)."""
    InboxItem.objects.filter(pk=item.pk).update(file_at_once=True)
    try:
        request = request_consolidation(
            memory=item.memory, trigger=ConsolidationRun.Trigger.TEACH, by=by
        )
    except LearningOff:
        return AtOnce(None)
    return AtOnce(request)


def _file_taught_next(run: ConsolidationRun) -> None:
    """After a pass: lines taught to be filed at once that it did not file get a pass of their
    own — unless this was that pass and it did not file (the sweep retries failures, with
    pauses, so an outage is not asked again in a loop)."""
    run.refresh_from_db(fields=["state", "trigger"])
    if run.trigger == ConsolidationRun.Trigger.TEACH and run.state != ConsolidationRun.State.FILED:
        return
    waiting = (
        InboxItem.objects.as_system("the pass files what waits")
        .for_memory(run.memory)
        .pending()
        .filter(file_at_once=True)
    )
    if waiting.exists():
        request_if_learning(run.memory, ConsolidationRun.Trigger.TEACH)


def request_if_learning(memory: Memory, trigger: str) -> None:
    """Ask for a pass from background work: a memory that is not learning is simply skipped."""
    with contextlib.suppress(LearningOff):
        request_consolidation(memory=memory, trigger=trigger)


# Running one pass ----------------------------------------------------------------------------


def execute(run_id: int) -> None:
    """Run the pass behind ``run_id`` (``leases.drive``). Exits quietly when the row is gone,
    settled or claimed; a claimed one whose worker is gone is settled as lost and another pass
    asked for."""
    run = leases.drive(PASSES, run_id)
    if run is not None:
        _file_taught_next(run)


def _work(run: ConsolidationRun) -> None:
    """One pass within its deadline; running out of time, or the composer failing, settles it
    with its own words."""
    try:
        _pass(run, time.monotonic() + deadline_seconds())
    except (ComposerTimeout, SoftTimeLimitExceeded) as error:
        _finish(run, ConsolidationRun.State.TIMED_OUT, _timeout_reason(error))
    except ComposerError as error:  # the model is out or said no: its own words are the reason
        logger.warning("consolidation pass %s failed: %s", run.pk, _failure_reason(error))
        _finish(run, ConsolidationRun.State.FAILED, _failure_reason(error))


def _failed(run: ConsolidationRun, error: Exception) -> None:
    if retry.is_retryable(error):  # a lock race: nothing was written, the next pass may win
        _retry_later(run, _lost_race_reason(error))
    else:
        _finish(run, ConsolidationRun.State.FAILED, _failure_reason(error))


def _not_claimed(run: ConsolidationRun) -> None:
    """A redelivery after its worker process died: settle the pass, and start another."""
    if settle_lost_runs(memory=run.memory):
        restart_if_due(run.memory)


PASSES = leases.Kind(
    rows=lambda: ConsolidationRun.objects.select_related("memory"),
    lease=lease_length,
    work=_work,
    failed=_failed,
    not_claimed=_not_claimed,
)


def _pass(run: ConsolidationRun, deadline: float) -> None:
    memory = run.memory
    revision = DocumentRevision.objects.current(memory)
    if not switches.learning_on(memory):  # switched off since the pass was asked for
        _finish(run, ConsolidationRun.State.KEPT, LEARNING_OFF)
        return
    waiting = InboxItem.objects.as_system("the pass files what waits").for_memory(memory).pending()
    if run.trigger == ConsolidationRun.Trigger.TEACH:  # a one-item pass: only what was taught
        waiting = waiting.filter(file_at_once=True)
    items = list(waiting.in_filing_order().select_related("taught_by"))
    run.generation_read, run.items_read = revision.generation, len(items)
    run.save(update_fields=["generation_read", "items_read"])
    if not items:
        _finish(run, ConsolidationRun.State.FILED, "Nothing was waiting to be filed.")
        return
    private = kept_out(memory, items)
    candidates = [_candidate(item) for item in items if item.pk not in private]
    if not candidates:  # only what not everyone may read: filed, and kept out of the document
        unchanged = Composition(document=revision.text, voice=revision.voice)
        _commit(run, revision, items, unchanged, kept=len(private))
        return
    composer = get_composer(memory)
    run.composer = composer.name
    run.save(update_fields=["composer"])
    request = Request(document=revision.text, candidates=candidates, max_bytes=memory.max_bytes)
    started = time.monotonic()
    try:
        composition = _compose(composer, request, memory, deadline)
    except OverCap as over:
        _finish(run, ConsolidationRun.State.FAILED, str(over))
        return
    run.compose_seconds = round(time.monotonic() - started, 3)
    run.notes = composition.notes[:200]
    run.save(update_fields=["compose_seconds", "notes"])
    if time.monotonic() > deadline:
        raise ComposerTimeout("the composer answered after the deadline")
    if composition.kept_reason:
        _finish(
            run,
            ConsolidationRun.State.KEPT,
            f"{composition.kept_reason} The {len(items)} waiting stay queued.",
        )
        return
    refusal = refusal_reason(revision.text, composition.document, candidates)
    if refusal:
        _finish(run, ConsolidationRun.State.REFUSED, refusal)
        return
    _commit(run, revision, items, composition, kept=len(private))


def kept_out(memory: Memory, items: list[InboxItem]) -> set[int]:
    """The items whose fact not every member of ``memory`` may read (visibility.household):
    the document and its voice distillate are read by everyone, so the composer is never shown
    them. They are filed with the rest; their facts stay live, recallable by those who may read
    them, and out of the document."""
    facts = {item.fact_id: item.pk for item in items if item.fact_id}
    if not facts:
        return set()
    everyone = Fact.objects.filter(pk__in=facts).readable_by(visibility.household(memory))
    readable = set(everyone.values_list("pk", flat=True))
    return {item for fact, item in facts.items() if fact not in readable}


def _kept_out_reason(kept: int) -> str:
    if not kept:
        return ""
    return (
        f" {counted(kept, 'fact')} kept out of the document: not everyone in the memory may read "
        f"{'it' if kept == 1 else 'them'}."
    )


def _candidate(item: InboxItem) -> Candidate:
    return Candidate(
        id=item.pk,
        text=item.text,
        origin=item.origin,
        confidence=item.confidence,
        created_at=item.created_at,
        taught_by=item.taught_by_name,
        action=item.action,
        valence=item.valence,
        outcome=item.outcome,
    )


def _time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise ComposerTimeout("no time left in the pass")
    return left


def _compose(composer: Composer, request: Request, memory: Memory, deadline: float) -> Composition:
    """Ask once; if the answer is over the cap, ask once more: the same request, with feedback
    naming the measured excess."""
    answer = composer.compose(request, timeout=_time_left(deadline))
    excess = document.size_bytes(answer.document) - request.max_bytes
    if excess <= 0:
        return answer
    feedback = (
        f"drop the oldest and lowest-value facts until it fits — {excess:,} bytes over "
        f"memory_max_kb={memory.memory_max_kb}"
    )
    answer = composer.compose(replace(request, feedback=feedback), timeout=_time_left(deadline))
    excess = document.size_bytes(answer.document) - request.max_bytes
    if excess > 0:
        raise OverCap(
            f"The new document was still {excess:,} bytes over its limit of "
            f"{memory.memory_max_kb} KB after one retry; nothing was written and the queue is "
            "unchanged."
        )
    return answer


def refusal_reason(old: str, new: str, candidates: list[Candidate]) -> str | None:
    """Why an answer must not be written, or None. Enforced in code, whatever the composer.

    An empty document (headings only) is refused unless it is exactly what was asked for:
    nothing waiting to be added, and every line the document had withdrawn by a forget — so
    forgetting the last line works. A failure must be filed as something to avoid, never as
    advice (``_failure_as_advice``).
    """
    if UNCHANGED_ANSWER.match(new.strip()):
        return "The composer answered “unchanged” instead of a document; nothing was written."
    adds = [c for c in candidates if c.action == InboxItem.Action.ADD]
    forgotten = [statement_of(c.text) for c in candidates if c.action == InboxItem.Action.FORGET]
    old_lines = document.content_lines(old)
    if document.is_effectively_empty(new) and (adds or old_lines):
        asked_for = not adds and all(_withdrawn(line, forgotten) for line in old_lines)
        if not asked_for:
            return (
                "The composer answered with an empty document (headings only); nothing was written."
            )
    advice = _failure_as_advice(new, candidates)
    if advice:
        return (
            f"The composer wrote a failure as plain advice (“{document.quote(advice)}”); what "
            f"went wrong belongs under “## {FAILURES_HEADING}” as “{AVOID_PREFIX}…”. Nothing "
            "was written."
        )
    lines = document.content_lines(new)
    doubled = next((line for line in lines if _DOUBLE_AVOID.search(line)), None)
    if doubled:
        return (
            f"The composer wrote “{AVOID_PREFIX}” twice (“{document.quote(doubled)}”); nothing "
            "was written."
        )
    if not old_lines:
        return None
    dropped = [line for line in _dropped_lines(old, new) if not _withdrawn(line, forgotten)]
    share = len(dropped) / len(old_lines)
    if share > MAX_DROP_SHARE:
        return (
            f"The new document would drop {len(dropped)} of the {len(old_lines)} content "
            f"lines ({share:.0%}), more than the {MAX_DROP_SHARE:.0%} a pass may drop; "
            "nothing was written."
        )
    return None


_DOUBLE_AVOID = re.compile(r"avoid\s*:\s*avoid\s*:", re.IGNORECASE)


def _withdrawn(line: str, forgotten: list[str]) -> bool:
    """A forget candidate asked for this line to go."""
    said = statement_of(line)
    return any(compare(text, said).verdict in {"same", "refinement"} for text in forgotten)


def _failure_as_advice(new: str, candidates: list[Candidate]) -> str | None:
    """The first line of ``new`` that states a failure candidate other than as "Avoid: …", or
    None. A failure that a newer candidate of this pass says plainly again (it worked after
    all) is no longer the latest word, and is not checked."""
    adds = sorted(
        (c for c in candidates if c.action == InboxItem.Action.ADD),
        key=lambda c: (c.created_at, c.id),
    )
    failures = [
        failure_statement(c.text)
        for at, c in enumerate(adds)
        if c.is_failure
        and not any(
            not later.is_failure
            and says_the_same(statement_of(later.text), failure_statement(c.text))
            for later in adds[at + 1 :]
        )
    ]
    if not failures:
        return None
    for line in document.content_lines(new):
        if is_avoid_line(line):
            continue
        said = statement_of(line)
        if any(says_the_same(said, failure) for failure in failures):
            return line
    return None


def _states_a_failure(voice: str, text: str, items: list[InboxItem]) -> bool:
    """The composer's voice says something that went wrong (with or without "Avoid:"), which
    the voice distillate leaves out (see ``offline.distil_voice`` for why)."""
    failures = [statement_of(line) for line in failure_lines(text)]
    failures += [
        failure_statement(item.text)
        for item in items
        if item.valence == Fact.Valence.FAILURE and item.action == InboxItem.Action.ADD
    ]
    if not failures:
        return False
    said = [statement_of(line) for line in voice.splitlines() if line.strip()]
    return any(says_the_same(line, failure) for line in said for failure in failures)


def _dropped_lines(old: str, new: str) -> list[str]:
    """Content lines of ``old`` whose fact is gone from ``new``: removed outright, or "replaced"
    by a line about something else (the diff pairs lines by position, not by meaning)."""
    dropped = []
    for group in document.diff(old, new):
        removes = [
            op.line for op in group if op.op == "remove" and not document.is_heading(op.line)
        ]
        adds = [op.line for op in group if op.op == "add" and not document.is_heading(op.line)]
        if removes and adds and compare(removes[0], adds[0]).verdict != "novel":
            continue
        dropped.extend(removes)
    return dropped


def _commit(
    run: ConsolidationRun,
    revision: DocumentRevision,
    items: list[InboxItem],
    composition: Composition,
    kept: int = 0,
) -> None:
    if not switches.learning_on(run.memory):  # switched off while the composer thought
        _finish(run, ConsolidationRun.State.KEPT, LEARNING_OFF)
        return
    voice = composition.voice
    if (
        not voice.strip()
        or document.size_bytes(voice) > VOICE_MAX_BYTES
        or _states_a_failure(voice, composition.document, items)
    ):
        voice = distil_voice(composition.document)
    try:
        _write(run, revision, items, composition, voice, kept)
    except DatabaseError as error:
        if not retry.is_retryable(error):
            raise
        # Every attempt lost a lock race and was rolled back whole: nothing of the pass is
        # written, the items stay pending, and a new pass files them.
        _retry_later(run, _lost_race_reason(error))


@retry.retry_transaction
def _write(
    run: ConsolidationRun,
    revision: DocumentRevision,
    items: list[InboxItem],
    composition: Composition,
    voice: str,
    kept: int = 0,
) -> None:
    """The pass's one transaction: all of it, or (on any error) nothing. Runs again when it
    loses a lock race to a person's write. ``kept``: items kept out of the document."""
    memory = run.memory
    ids = [item.pk for item in items]
    with transaction.atomic():
        if (
            InboxItem.objects.as_system("the pass files what waits")
            .filter(pk__in=ids, state=InboxItem.State.DROPPED)
            .exists()
        ):
            _retry_later(
                run,
                "An item was dropped from the queue while the pass ran; nothing "
                "was written, and a new pass has been asked for without it.",
            )
            return
        changes: list[Change] = []
        filed = [item.fact_id for item in items if item.fact_id]
        # What a person asked to go is forgotten with its line, never left out for space.
        asked_to_go = knowledge_actions.withdrawn_by(
            memory=memory,
            texts=[item.text for item in items if item.action == InboxItem.Action.FORGET],
            document=composition.document,
        )
        if composition.document != revision.text:
            try:
                _, changes = revisions.write_document(
                    memory=memory,
                    expected_generation=revision.generation,
                    text=composition.document,
                    voice=voice,
                    kind=DocumentRevision.Kind.PASS,
                    run=run,
                    filed=filed,
                )
            except revisions.DocumentChanged:
                _retry_later(
                    run,
                    "The document was edited while the pass ran (an edit, an undo or a "
                    "clear); nothing was written, and a new pass has been asked for.",
                )
                return
        else:
            reconcile_with_document(memory=memory, text=revision.text, filed=filed)
        knowledge_actions.forget_withdrawn(facts=asked_to_go)
        InboxItem.objects.filter(pk__in=ids, state=InboxItem.State.PENDING).update(
            state=InboxItem.State.FILED, run=run, settled_at=timezone.now()
        )
        counts = _count(changes)
        reason = (
            _filed_reason(counts)
            if changes
            else (
                "Everything waiting was already in the document."
                if kept < len(items)
                else "Nothing waiting was for everyone."
            )
        )
        if kept:
            logger.info("Pass %s kept %s facts out of the document", run.pk, kept)
        _finish(run, ConsolidationRun.State.FILED, reason + _kept_out_reason(kept), **counts)


def _count(changes) -> dict:
    counts = {"lines_added": 0, "lines_removed": 0, "lines_replaced": 0}
    for change in changes:
        ops = {op["op"] for op in change.operations}
        key = {frozenset({"add"}): "lines_added", frozenset({"remove"}): "lines_removed"}.get(
            frozenset(ops), "lines_replaced"
        )
        counts[key] += 1
    return counts


def _filed_reason(counts: dict) -> str:
    parts = [
        f"{n} {label}"
        for label, n in (
            ("added", counts["lines_added"]),
            ("replaced", counts["lines_replaced"]),
            ("removed", counts["lines_removed"]),
        )
        if n
    ]
    return f"Lines {', '.join(parts)}." if parts else ""


def _retry_later(run: ConsolidationRun, reason: str) -> None:
    _finish(run, ConsolidationRun.State.FAILED, reason)
    memory = run.memory
    transaction.on_commit(lambda: request_if_learning(memory, ConsolidationRun.Trigger.RETRY))


def _finish(run: ConsolidationRun, state: str, reason: str, **counts) -> None:
    """Settle the run unless something else already did (a sweep, a deleted row)."""
    leases.finish(run, state, reason=reason, **counts)


def _timeout_reason(error: BaseException | None = None) -> str:
    if error is not None and "waiting for a worker" in str(error):  # the worker's own words
        return f"{error} Nothing was written and the queue is unchanged."
    return (
        f"Timed out after {deadline_seconds()} s; nothing was written and the queue is unchanged."
    )


_SERVER_FIELD = re.compile(r"^(DETAIL|HINT|CONTEXT|QUERY|LOCATION|STATEMENT):\s*(.*)$")


def _failure_reason(error: BaseException) -> str:
    """What went wrong, in at most REASON_MAX_CHARS.

    A database error reads "message / DETAIL: / HINT: / CONTEXT:" (continued on following
    lines): keep the message and where it happened ("deadlock detected — CONTEXT: while updating
    tuple (0,12) in relation …"); the DETAIL of a deadlock is process numbers nobody can use.
    Anything else (a traceback, a composer's complaint) ends with what went wrong: keep the
    last line.
    """
    lines = [" ".join(line.split()) for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    fields: dict[str, list[str]] = {}
    field = None
    for line in lines[1:]:
        if match := _SERVER_FIELD.match(line):
            field = match[1]
            fields.setdefault(field, []).append(match[2])
        elif field is not None:
            fields[field].append(line)
    if not fields:
        reason = lines[-1]
    elif "CONTEXT" in fields:
        reason = f"{lines[0]} — CONTEXT: {'; '.join(fields['CONTEXT'])}"
    else:
        reason = lines[0]
    if len(reason) > REASON_MAX_CHARS:
        reason = reason[: REASON_MAX_CHARS - 1].rstrip() + "…"
    return reason


def _lost_race_reason(error: BaseException) -> str:
    return (
        f"The pass lost a race for the database to other writes ({_failure_reason(error)}); "
        "nothing was written, and a new pass has been asked for."
    )


# Lost passes, the sweep and the daily pass ---------------------------------------------------


def settle_lost_runs(*, memory: Memory | None = None) -> list[ConsolidationRun]:
    """Mark failed every running pass whose worker is gone; the queue it read stays pending."""
    running = ConsolidationRun.objects.running().select_related("memory")
    if memory is not None:
        running = running.filter(memory=memory)
    lost = []
    for run in running:
        why = (
            "no worker picked it up"
            if not run.claimed_at
            else "the worker running it stopped before it finished"
        )
        reason = f"The pass was lost: {why}. Nothing was written and the queue is unchanged."
        if leases.settle_lost(run, ConsolidationRun.State.FAILED, reason=reason):
            lost.append(run)
    return lost


def retry_pause(failures: int) -> timedelta:
    """How long after the last of ``failures`` unfinished passes in a row to try again."""
    if failures <= 1:
        return timedelta(0)
    return min(FIRST_RETRY_PAUSE * 2 ** (failures - 2), MAX_RETRY_PAUSE)


def _failures_in_a_row(memory: Memory) -> tuple[int, ConsolidationRun | None]:
    """The unfinished passes at the head of the memory's history, and the newest pass."""
    # Enough rows to reach MAX_RETRY_PAUSE; a longer run of failures waits as long.
    recent = list(ConsolidationRun.objects.filter(memory=memory).order_by("-started_at", "-pk")[:9])
    failures = 0
    for run in recent:
        if run.state not in UNFINISHED:
            break
        failures += 1
    return failures, (recent[0] if recent else None)


def restart_if_due(memory: Memory) -> None:
    """Ask for a pass when items wait, none runs, and the last one did not finish its work (after
    the pause its failures in a row call for), or when enough wait for early filing."""
    if not memory.learning:
        return
    waiting = (
        InboxItem.objects.as_system("the pass files what waits")
        .for_memory(memory)
        .pending()
        .count()
    )
    if not waiting or ConsolidationRun.objects.running().filter(memory=memory).exists():
        return
    failures, last = _failures_in_a_row(memory)
    if failures:
        assert last is not None  # the newest of the failures counted
        finished = last.finished_at or last.started_at
        if timezone.now() - finished >= retry_pause(failures):
            request_if_learning(memory, ConsolidationRun.Trigger.SWEEP)
    elif waiting >= EARLY_FILING_AT:
        request_if_learning(memory, ConsolidationRun.Trigger.EARLY)


def sweep() -> None:
    """Settle passes that died, ask again for every pass that did not finish its work, and
    re-send start messages nobody picked up."""
    settle_lost_runs()
    waiting = InboxItem.objects.as_system("the pass files what waits").pending().values("memory_id")
    for memory in Memory.objects.filter(learning=True, pk__in=waiting):
        restart_if_due(memory)
    stale = timezone.now() - RESEND_AFTER
    for run in ConsolidationRun.objects.running().filter(
        claimed_at__isnull=True, started_at__lt=stale
    ):
        send_start(run)


def daily() -> None:
    """The daily pass for every memory that is learning and has something waiting."""
    for memory in Memory.objects.filter(learning=True):
        if (
            InboxItem.objects.as_system("the pass files what waits")
            .for_memory(memory)
            .pending()
            .exists()
        ):
            request_if_learning(memory, ConsolidationRun.Trigger.DAILY)
