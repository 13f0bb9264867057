from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Func
from django.db.models.lookups import LessThanOrEqual, Lookup
from django.utils import timezone

from brain.words import counted
from knowledge import runs
from knowledge.models import Fact, Memory
from knowledge.read_layer import ReadManager, ReadQuerySet
from memory import document
from memory.composers.base import VOICE_MAX_BYTES


class Origin(models.TextChoices):
    INSIGHT = "insight", "an insight run"
    VOICE = "voice", "a voice conversation"
    CHAT = "chat", "the chat"
    TERMINAL = "terminal", "the terminal"
    TYPED = "typed", "something you typed"
    CORRECTION = "correction", "a correction"
    STUDY = "study", "a study session"
    IMPORT = "import", "an import"
    API = "api", "the API"


class Confidence(models.TextChoices):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class InboxQuerySet(ReadQuerySet["InboxItem"]):
    def pending(self) -> InboxQuerySet:
        return self.filter(state=InboxItem.State.PENDING)

    def for_memory(self, memory: Memory) -> InboxQuerySet:
        return self.filter(memory=memory)

    def in_filing_order(self) -> InboxQuerySet:
        return self.order_by("created_at", "pk")

    def _narrow(self, user) -> InboxQuerySet:
        """What ``user`` may see waiting: items whose fact they may read (the one read rule,
        ``Fact.objects.readable_by``), and items about no fact (a queued removal of a line the
        document, which everyone reads, already has)."""
        return self.filter(models.Q(fact__isnull=True) | Fact.objects.readable_at(user, "fact_id"))


if TYPE_CHECKING:
    # For the type checker: the manager InboxQuerySet.as_manager() makes.
    InboxManager = ReadManager.from_queryset(InboxQuerySet)


class InboxItem(models.Model):
    """A candidate fact waiting to be folded into the document. Never injected into a prompt."""

    class State(models.TextChoices):
        PENDING = "pending"
        FILED = "filed"
        DROPPED = "dropped"

    class Action(models.TextChoices):
        ADD = "add"
        FORGET = "forget"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="inbox")
    text = models.TextField()
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.ADD)
    origin = models.CharField(max_length=16, choices=Origin.choices)
    confidence = models.CharField(
        max_length=8, choices=Confidence.choices, default=Confidence.MEDIUM
    )
    taught_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    taught_by_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    run = models.ForeignKey(
        "ConsolidationRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="items"
    )
    settled_at = models.DateTimeField(null=True, blank=True)
    fact = models.OneToOneField(
        "knowledge.Fact",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="inbox_item",
        help_text="The fact row filed the moment this candidate arrived.",
    )
    outcome = models.BooleanField(
        null=True, blank=True, help_text="The outcome the teacher reported with it, if any."
    )
    valence = models.CharField(
        max_length=8, choices=Fact.Valence.choices, default=Fact.Valence.FACT
    )
    file_at_once = models.BooleanField(
        default=False,
        help_text="Taught in the Teach box: filed by a pass of its own at once (after the pass "
        "running, if one is), not left for the daily pass.",
    )

    objects = InboxQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["memory", "state", "created_at"])]

    def __str__(self) -> str:
        return self.text

    @property
    def label(self) -> str:
        """Where it came from, in words: "from a voice conversation"."""
        source = f"from {self.get_origin_display()}"
        return f"to forget, {source}" if self.action == self.Action.FORGET else source

    @property
    def outcome_label(self) -> str:
        """The outcome it was taught with, in words; "" when none was reported."""
        if self.outcome is None:
            return ""
        return "it worked" if self.outcome else "it went wrong: filed as something to avoid"


class RevisionQuerySet(models.QuerySet["DocumentRevision"]):
    def current(self, memory: Memory) -> DocumentRevision:
        """The newest revision, or an unsaved generation-0 template for a new memory."""
        latest = self.filter(memory=memory).order_by("-generation").first()
        return latest or DocumentRevision(
            memory=memory,
            generation=0,
            text=document.TEMPLATE,
            voice="",
            kind=DocumentRevision.Kind.INITIAL,
        )

    def voice_for_prompts(self, memory: Memory) -> str:
        """The distillate a voice prompt is given: empty when memory_injection is off."""
        return self.current(memory).voice if memory.memory_injection else ""


class DocumentRevision(models.Model):
    """One version of the memory document and its voice distillate, written together."""

    class Kind(models.TextChoices):
        INITIAL = "initial"
        PASS = "pass", "a consolidation pass"
        EDIT = "edit", "your edit"
        UNDO = "undo"
        CLEAR = "clear"
        IMPORT = "import"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="revisions")
    generation = models.PositiveIntegerField()
    text = models.TextField()
    voice = models.TextField(blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run = models.ForeignKey(
        "ConsolidationRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "generation"], name="one_revision_per_generation"
            ),
            models.CheckConstraint(
                condition=LessThanOrEqual(
                    Func("voice", function="OCTET_LENGTH", output_field=models.IntegerField()),
                    VOICE_MAX_BYTES,
                ),
                name="voice_at_most_2kb",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.memory} generation {self.generation}"

    @property
    def size_bytes(self) -> int:
        return document.size_bytes(self.text)


class RunQuerySet(runs.RunQuerySet["ConsolidationRun"]):
    def latest_for(self, memory: Memory) -> ConsolidationRun | None:
        return self.filter(memory=memory).order_by("-started_at", "-pk").first()


class ConsolidationRun(runs.Run, runs.Requested, runs.Reasoned):
    """One consolidation pass: requested, claimed by a worker, and settled with a named reason.

    At most one runs per memory (a partial unique index): the row itself is the lease.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        FILED = "filed"
        KEPT = "kept"
        REFUSED = "refused"
        FAILED = "failed"
        TIMED_OUT = "timed_out", "timed out"

    class Trigger(models.TextChoices):
        MANUAL = "manual", "File into memory now"
        DAILY = "daily", "the daily pass"
        EARLY = "early", "20 or more waiting"
        CLI = "cli", "the command line"
        API = "api", "the API"
        SWEEP = "sweep", "a restart after a lost pass"
        RETRY = "retry", "a retry after the document changed"
        TEACH = "teach", "Teach it something"

    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    trigger = models.CharField(max_length=8, choices=Trigger.choices)
    composer = models.CharField(max_length=32, blank=True)
    generation_read = models.PositiveIntegerField(null=True, blank=True)
    items_read = models.PositiveIntegerField(default=0)
    lines_added = models.PositiveIntegerField(default=0)
    lines_removed = models.PositiveIntegerField(default=0)
    lines_replaced = models.PositiveIntegerField(default=0)
    compose_seconds = models.FloatField(null=True, blank=True)
    notes = models.JSONField(default=list, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        default_related_name = "runs"
        constraints = [runs.one_running("memory", name="one_running_pass_per_memory")]
        indexes = [models.Index(fields=["memory", "-started_at"])]

    def __str__(self) -> str:
        return f"pass #{self.pk} ({self.state})"

    @property
    def outcome(self) -> str:
        """The pass's result in words, as the banner and the CLI say it."""
        if self.state == self.State.RUNNING:
            return "Filing…"
        if self.state == self.State.FILED:
            return f"Filed {counted(self.items_read, 'item')}. {self.reason}".strip()
        label = {
            "kept": "Kept the queue",
            "refused": "Refused",
            "failed": "Failed",
            "timed_out": "Timed out",
        }[self.state]
        return f"{label}: {self.reason}" if self.reason else label


class ChangeQuerySet(models.QuerySet["Change"]):
    def for_memory(self, memory: Memory) -> ChangeQuerySet:
        return self.filter(memory=memory)

    def newest_first(self) -> ChangeQuerySet:
        return self.order_by("-number")


class Change(models.Model):
    """One change to the document, in plain English, with the line operations that undo it — or
    one curating action on pages and facts, with what undoing it needs (``curation``)."""

    class Source(models.TextChoices):
        PASS = "pass", "a consolidation pass"
        EDIT = "edit", "your edit"
        UNDO = "undo"
        CLEAR = "clear"
        IMPORT = "import"
        CURATION = "curation", "your curation"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="changes")
    number = models.PositiveIntegerField()
    source = models.CharField(max_length=8, choices=Source.choices)
    summary = models.TextField()
    operations = models.JSONField(default=list)
    # A curating action (merging or splitting pages, editing a fact with no line in the
    # document: memory/curation.py) changes rows, not lines: what undoing it needs, as JSON.
    curation = models.JSONField(default=dict, blank=True)
    revision = models.ForeignKey(
        DocumentRevision, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    run = models.ForeignKey(
        ConsolidationRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150, blank=True)
    reverts = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    undone_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ChangeQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "number"], name="one_change_per_number"),
        ]

    def __str__(self) -> str:
        return f"#{self.number} {self.summary}"

    @property
    def line_operations(self) -> list[document.Operation]:
        return [document.Operation.from_json(data) for data in self.operations]


class BriefQuerySet(models.QuerySet["Brief"]):
    def latest_for(self, memory: Memory) -> Brief | None:
        return self.filter(memory=memory).order_by("-written_at").first()


class Brief(models.Model):
    """This morning's brief: what was learned, what waits, what changed — a few sentences."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="briefs")
    text = models.TextField()
    composer = models.CharField(max_length=32)
    written_at = models.DateTimeField(default=timezone.now)

    objects = BriefQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["memory", "-written_at"])]

    def __str__(self) -> str:
        return f"Brief for {self.memory} at {self.written_at:%Y-%m-%d %H:%M}"


class ReflectionRunQuerySet(runs.RunQuerySet["ReflectionRun"]):
    def for_source(self, source) -> ReflectionRunQuerySet:
        return self.filter(source=source)


class ReflectionRun(runs.Run, runs.Reasoned):
    """One reflection over a conversation (memory/reflection.py): the turns it read, what it
    filed through ``learn``, and why it filed nothing when it did.

    The row is the lease, as a consolidation pass's is: created running and unclaimed, claimed
    by a conditional UPDATE, and unique per conversation and first turn read, so posting the
    same conversation twice, or delivering its message twice, reflects it once.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        FILED = "filed"
        NOTHING = "nothing", "filed nothing"
        FAILED = "failed"

    source = models.ForeignKey(
        "knowledge.Source", on_delete=models.CASCADE, related_name="reflections"
    )
    since_turn = models.PositiveIntegerField(
        default=0, help_text="The first turn it reads: what was said before it was read before."
    )
    read_to = models.PositiveIntegerField(
        null=True, blank=True, help_text="The turn after the last one it read."
    )
    turns_read = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    extractor = models.CharField(max_length=32, blank=True)
    # What the extractor said, kept before anything is filed, so a run taken over after its
    # worker died files the same statements without asking the model again.
    statements = models.JSONField(default=list, blank=True)
    filed = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)

    objects = ReflectionRunQuerySet.as_manager()

    class Meta:
        default_related_name = "reflections"
        constraints = [
            models.UniqueConstraint(
                fields=["source", "since_turn"], name="one_reflection_per_reading"
            ),
        ]
        indexes = [models.Index(fields=["memory", "-started_at"], name="reflection_newest")]

    def __str__(self) -> str:
        return f"reflection #{self.pk} ({self.state})"

    @property
    def message(self) -> str:
        """What the run did, in words, as the Sources page and the CLI say it."""
        if self.state == self.State.RUNNING:
            return "Reflecting on the conversation…"
        if self.state == self.State.FILED:
            texts = "; ".join(f"“{entry['text']}”" for entry in self.filed)
            return f"Learned {counted(len(self.filed), 'fact')} from the conversation: {texts}."
        if self.state == self.State.NOTHING:
            return f"Filed nothing: {self.reason}"
        return f"Failed: {self.reason}"


class OneOf(Lookup):
    """``value = ANY(array)``: the left side is one of the array's elements."""

    lookup_name = "one_of"

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]


# ReadQuerySet's as_manager (a ReadManager, which asks for whom it reads) is the one it takes.
class StudySessionQuerySet(ReadQuerySet["StudySession"], runs.RunQuerySet["StudySession"]):  # type: ignore[misc]
    def _narrow(self, user) -> StudySessionQuerySet:
        """A session's report speaks of the facts it read: it is read by those who may read
        every one of them (a session that read none, by everyone who reads the memory)."""
        unread = Fact.objects.exclude(pk__in=Fact.objects.readable_by(user).values("pk")).filter(
            OneOf(models.F("pk"), models.OuterRef("read_facts"))
        )
        return self.filter(~models.Exists(unread))

    def for_memory(self, memory: Memory) -> StudySessionQuerySet:
        return self.filter(memory=memory)


if TYPE_CHECKING:
    # For the type checker: the manager StudySessionQuerySet.as_manager() makes.
    StudySessionManager = ReadManager.from_queryset(StudySessionQuerySet)


class StudySession(runs.Run, runs.Requested):
    """One study session on one subject (memory/study.py): asked for, claimed by a worker, and
    settled with its report kept.

    The row is the lease (``brain/leases.py``), as a consolidation pass's is: at most one
    studies a memory at a time (a partial unique index), claimed by a conditional UPDATE, and a
    session whose worker is gone is settled as lost by the next request.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    topic = models.CharField(max_length=200, help_text="What was studied, as it was asked.")
    subject = models.ForeignKey(
        "knowledge.Subject",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="study_sessions",
    )
    chosen = models.BooleanField(
        default=False, help_text="No topic was given: brain chose the stalest subject."
    )
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    step = models.CharField(max_length=200, blank=True, help_text="What it is doing now.")
    facts_read = models.PositiveIntegerField(default=0)
    read_facts = ArrayField(
        models.BigIntegerField(),
        default=list,
        blank=True,
        help_text="The facts it read: its report is read by those who may read all of them.",
    )
    stale = models.PositiveIntegerField(default=0)
    thin = models.PositiveIntegerField(default=0)
    contradictions = models.PositiveIntegerField(default=0)
    filed = models.PositiveIntegerField(default=0)
    report = models.TextField(blank=True)
    lines = models.JSONField(default=list, blank=True)

    objects = StudySessionQuerySet.as_manager()

    class Meta:
        default_related_name = "study_sessions"
        constraints = [runs.one_running("memory", name="one_study_session_at_a_time")]
        indexes = [models.Index(fields=["memory", "-started_at"], name="study_session_newest")]

    def __str__(self) -> str:
        return f"study of {self.topic} #{self.pk} ({self.state})"

    @property
    def outcome(self) -> str:
        """What the session did, in words, as the banner and the CLI say it."""
        if self.is_running:
            return f"Studying {self.topic}… {self.step}".strip()
        if self.state == self.State.FAILED:
            return f"The study of {self.topic} failed: {self.report}"
        return self.report
