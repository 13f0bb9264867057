"""What waits on a person: findings from house checks, the rules they set, and yes/no guesses."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KT
from django.utils import timezone
from pgvector.django import VectorField

from brain.words import counted
from knowledge import read_rule, runs
from knowledge.models import Fact, Memory, Subject
from knowledge.read_layer import ReadManager, ReadQuerySet

SUPPRESSION_LAPSES_AFTER = timedelta(days=90)
GUESS_LIFETIME = timedelta(days=14)
OPEN_GUESSES_AT_MOST = 3
MAX_TEXT = 1000  # a finding or a guess is a sentence or two
MAX_REASON = 300  # why a rule was set, or what a "no" to a guess said


class Severity(models.TextChoices):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class FindingQuerySet(models.QuerySet):
    def for_memory(self, memory: Memory) -> FindingQuerySet:
        return self.filter(memory=memory)

    def open(self) -> FindingQuerySet:
        return self.filter(state=Finding.State.OPEN)

    def in_review_order(self) -> FindingQuerySet:
        """High-stakes first, then the rest, newest raise first within each."""
        order = models.Case(
            models.When(severity=Severity.HIGH, then=0),
            models.When(severity=Severity.MEDIUM, then=1),
            default=2,
        )
        return self.annotate(severity_rank=order).order_by("severity_rank", "-last_raised_at")


class Finding(models.Model):
    """A house check's result: raised, perhaps raised again, and settled by a person."""

    class State(models.TextChoices):
        OPEN = "open", "waiting on you"
        NOT_A_PROBLEM = "not_a_problem", "not a problem"
        SUPPRESSED = "suppressed", "fixed, while it stays fixed"
        LAPSED = "lapsed", "closed"

    class Settled(models.TextChoices):
        FIXED = "fixed", "I've already fixed it"
        GOT_IT = "got_it", "Got it"
        DONE = "done", "Done"

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="findings")
    check_id = models.CharField(max_length=100, help_text="Which house check raised it.")
    subject = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.SET_NULL, related_name="findings"
    )
    entity_id = models.CharField(max_length=255, blank=True)
    severity = models.CharField(max_length=6, choices=Severity.choices)
    text = models.TextField()
    is_todo = models.BooleanField(default=False, help_text="A to-do rather than a problem.")
    protected = models.BooleanField(
        default=False, help_text="Leak, smoke, gas, freeze or marked protected: never quieter."
    )
    state = models.CharField(max_length=14, choices=State.choices, default=State.OPEN)
    settled_how = models.CharField(max_length=8, choices=Settled.choices, blank=True)
    first_raised_at = models.DateTimeField(default=timezone.now)
    last_raised_at = models.DateTimeField(default=timezone.now)
    times_raised = models.PositiveIntegerField(default=1)
    settled_at = models.DateTimeField(null=True, blank=True)
    settled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    suppressed_until = models.DateTimeField(null=True, blank=True)
    stayed_away = models.DurationField(
        null=True, blank=True, help_text="How long it stayed away before it was raised again."
    )
    reason = models.CharField(max_length=300, blank=True)

    objects = FindingQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["memory", "state", "severity"]),
            models.Index(fields=["memory", "check_id", "entity_id"]),
        ]

    def __str__(self) -> str:
        return self.text

    @property
    def returned_after(self) -> str:
        """“Back after 12 days” in words, when it came back after being fixed."""
        if self.stayed_away is None:
            return ""
        days = self.stayed_away.days
        if days >= 1:
            return f"back after {counted(days, 'day')}"
        hours = int(self.stayed_away.total_seconds() // 3600)
        return f"back after {counted(hours, 'hour')}"


class RuleQuerySet(models.QuerySet):
    def for_memory(self, memory: Memory) -> RuleQuerySet:
        return self.filter(memory=memory)

    def active(self, *, now=None) -> RuleQuerySet:
        now = now or timezone.now()
        return self.filter(removed_at__isnull=True).filter(
            models.Q(until__isnull=True) | models.Q(until__gt=now)
        )


class Rule(models.Model):
    """A check told "not here": what it covers, how far, and for how long.

    Scopes, narrowest first: this check on this sensor ("not a problem"); every check on this
    device; this check anywhere in the room; this check everywhere. Wider ones are confirmed
    before they are made.
    """

    class Scope(models.TextChoices):
        SENSOR = "sensor", "this check on this sensor"
        DEVICE = "device", "every check on this device"
        ROOM = "room", "this check anywhere in the room"
        EVERYWHERE = "everywhere", "this check everywhere"

    class Origin(models.TextChoices):
        NOT_A_PROBLEM = "not_a_problem", "Not a problem"
        CORRECTION = "correction", "a correction"
        IMPORT = "import", "an import"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="rules")
    check_id = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.SENSOR)
    subject = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.SET_NULL, related_name="rules"
    )
    entity_id = models.CharField(max_length=255, blank=True)
    room = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.SET_NULL, related_name="room_rules"
    )
    until = models.DateTimeField(null=True, blank=True, help_text="Empty: for good.")
    reason = models.CharField(max_length=300, blank=True)
    origin = models.CharField(max_length=14, choices=Origin.choices)
    finding = models.ForeignKey(
        Finding, null=True, blank=True, on_delete=models.SET_NULL, related_name="rules"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    removed_at = models.DateTimeField(null=True, blank=True)
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    objects = RuleQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["memory", "check_id"])]

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        wheres: dict[str, str] = {
            self.Scope.SENSOR: f"“{self.check_id}” on {self._name()}",
            self.Scope.DEVICE: f"every check on {self._name()}",
            self.Scope.ROOM: f"“{self.check_id}” anywhere in {self.room or 'the room'}",
            self.Scope.EVERYWHERE: f"“{self.check_id}” everywhere",
        }
        where = wheres[self.scope]
        lasting = f" until {timezone.localtime(self.until):%-d %b %Y}" if self.until else ""
        return f"Not raised: {where}{lasting}"

    def _name(self) -> str:
        return str(self.subject) if self.subject else (self.entity_id or "this sensor")

    def covers(self, *, check_id: str, subject: Subject | None, entity_id: str) -> bool:
        # Compared by id: reading self.subject would cost a query per rule on every raise.
        same_thing = (subject is not None and subject.pk == self.subject_id) or (
            bool(entity_id) and entity_id == self.entity_id
        )
        # A house-wide finding (no device) has no sensor: its rule is about nothing in particular.
        house_wide = (
            subject is None and not entity_id and self.subject_id is None and not self.entity_id
        )
        if self.scope == self.Scope.SENSOR:
            return check_id == self.check_id and (same_thing or house_wide)
        if self.scope == self.Scope.DEVICE:
            return same_thing
        if self.scope == self.Scope.ROOM:
            in_room = (
                subject is not None
                and self.room_id is not None
                and (subject.room_id == self.room_id or subject.pk == self.room_id)
            )
            return check_id == self.check_id and in_room
        return check_id == self.check_id


class GuessQuerySet(models.QuerySet):
    def for_memory(self, memory: Memory) -> GuessQuerySet:
        return self.filter(memory=memory)

    def open(self) -> GuessQuerySet:
        """Waiting on a yes/no now: counted against the limit and shown."""
        return self.filter(state=Guess.State.OPEN)

    def settled(self) -> GuessQuerySet:
        return self.filter(state__in=[Guess.State.CONFIRMED, Guess.State.REJECTED])


class Guess(models.Model):
    """A belief phrased for a yes/no ("The garage fridge is meant to run 24/7 — right?")."""

    class State(models.TextChoices):
        WAITING = "waiting", "worked out, waiting for a free slot"
        OPEN = "open"
        SLEEPING = "sleeping", "dismissed for now"
        CONFIRMED = "confirmed"
        REJECTED = "rejected"
        EXPIRED = "expired"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="guesses")
    text = models.TextField(help_text="The statement, without the question tag.")
    normalized = models.TextField()
    embedding = VectorField(dimensions=384, null=True, blank=True)
    embedder = models.CharField(max_length=40, blank=True)
    subject = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.SET_NULL, related_name="guesses"
    )
    why = models.CharField(max_length=300, blank=True, help_text="What made brain wonder.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    created_at = models.DateTimeField(default=timezone.now)
    offered_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    slept_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.CharField(max_length=300, blank=True)
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)

    objects = GuessQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "guesses"
        indexes = [models.Index(fields=["memory", "state", "created_at"])]

    def __str__(self) -> str:
        return self.question

    @property
    def question(self) -> str:
        return f"{self.text.rstrip('.?! ')} — right?"


class EventQuerySet(ReadQuerySet["Event"]):
    def for_memory(self, memory: Memory) -> EventQuerySet:
        return self.filter(memory=memory)

    def _narrow(self, user) -> EventQuerySet:
        """The timeline as ``user`` may read it: an event of what brain learned carries the
        fact's words, so it is theirs when the fact is (the one read rule,
        ``Fact.objects.readable_by``); findings and guesses are the house's, read by every
        reader of the memory. Whoever reads everything (the system, a superuser) reads every
        event, those naming no fact (made before events named theirs) included."""
        if read_rule.reads_all(user):
            return self
        named = models.functions.Cast(KT("data__fact"), models.BigIntegerField())
        return self.annotate(named_fact=named).filter(
            ~models.Q(kind=Event.Kind.LEARNED) | Fact.objects.readable_at(user, "named_fact")
        )


if TYPE_CHECKING:
    # For the type checker: the manager EventQuerySet.as_manager() makes.
    EventManager = ReadManager.from_queryset(EventQuerySet)


class Event(models.Model):
    """The timeline: brain_learned, brain_finding and brain_waiting_on_you (a guess opened, was
    answered, slept, woke or expired), as a logbook would show them."""

    class Kind(models.TextChoices):
        LEARNED = "brain_learned", "learned"
        FINDING = "brain_finding", "finding"
        WAITING = "brain_waiting_on_you", "waiting on you"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    text = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    pushed_at = models.DateTimeField(null=True, blank=True, help_text="Sent to Home Assistant.")

    objects = EventQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["memory", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


class Judgement(models.Model):
    """brain's own arithmetic about one check on one thing, kept as a fact (kind judgement).

    The counts come from the findings, never from a model.
    """

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="judgements")
    check_id = models.CharField(max_length=100)
    subject = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.CASCADE, related_name="judgements"
    )
    raised = models.PositiveIntegerField()
    marked_not_a_problem = models.PositiveIntegerField()
    fact = models.ForeignKey(
        Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    renewed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "check_id", "subject"], name="one_judgement_per_check_and_subject"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.check_id}: {self.marked_not_a_problem} of {self.raised}"


class HouseEventQuerySet(models.QuerySet):
    def for_memory(self, memory: Memory) -> HouseEventQuerySet:
        return self.filter(memory=memory)

    def by_hand(self) -> HouseEventQuerySet:
        return self.filter(cause=HouseEvent.Cause.BY_HAND)


class HouseEvent(models.Model):
    """Something in the house changed state (a light switched on, a door locked), by hand or by
    an automation, when, and who: what an insight run reads (``review/insight.py``).

    Posted by Home Assistant (``POST /api/events/``), checked and bounded there
    (``review/house_events.py``); kept for ``house_events.KEPT_FOR``, then removed.
    """

    class Cause(models.TextChoices):
        BY_HAND = "by_hand", "by hand"
        AUTOMATION = "automation", "by an automation"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="house_events")
    entity_id = models.CharField(max_length=255)
    subject = models.ForeignKey(
        Subject, null=True, blank=True, on_delete=models.SET_NULL, related_name="house_events"
    )
    state = models.CharField(max_length=100)
    from_state = models.CharField(max_length=100, blank=True)
    cause = models.CharField(max_length=10, choices=Cause.choices)
    who = models.CharField(
        max_length=150, blank=True, help_text="The person, or the automation, that changed it."
    )
    at = models.DateTimeField(help_text="When it changed.")
    reference = models.CharField(
        max_length=100, blank=True, help_text="The sender's id for it: sent twice, kept once."
    )
    received_at = models.DateTimeField(default=timezone.now)

    objects = HouseEventQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["memory", "-at"], name="house_event_newest"),
            models.Index(fields=["memory", "cause", "at"], name="house_event_cause_at"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "reference"],
                condition=~models.Q(reference=""),
                name="one_house_event_per_reference",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entity_id} → {self.state} {self.get_cause_display()}"


class _RunsOfOneKind(models.Manager.from_queryset(runs.RunQuerySet)):  # type: ignore[misc]
    """The insight runs of one ``kind``: every read is narrowed to it, every row made is of it."""

    kind = "insight"

    def get_queryset(self) -> runs.RunQuerySet[InsightRun]:
        return super().get_queryset().filter(kind=self.kind)

    def create(self, **fields) -> InsightRun:
        return super().create(**{**fields, "kind": self.kind})


class _DeepReviews(_RunsOfOneKind):
    kind = "deep_review"


class InsightRun(runs.Run, runs.Requested):
    """One insight run over a memory's recent house events and facts (``review/insight.py``),
    or, of kind ``deep_review``, one Deep review (``DeepReview``, ``review/deep_review.py``).

    The row is the lease (``brain/leases.py``): at most one of each kind runs per memory (a
    partial unique index), claimed by a conditional UPDATE, and a run whose worker is gone is
    settled as lost by the next start. ``InsightRun.objects`` reads and makes insight runs
    only, ``DeepReview.objects`` Deep reviews only.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        SKIPPED = "skipped"
        FAILED = "failed"

    class Kind(models.TextChoices):
        INSIGHT = "insight", "insight run"
        DEEP_REVIEW = "deep_review", "Deep review"

    kind = models.CharField(max_length=11, choices=Kind.choices, default=Kind.INSIGHT)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    events_read = models.PositiveIntegerField(default=0)
    read_to_event = models.BigIntegerField(
        null=True, blank=True, help_text="The newest house event it read (by id)."
    )
    report = models.TextField(blank=True)
    lines = models.JSONField(default=list, blank=True)

    objects = _RunsOfOneKind()

    class Meta:
        default_related_name = "insight_runs"
        constraints = [
            runs.one_running("memory", "kind", name="one_running_insight_run_of_a_kind_per_memory")
        ]
        indexes = [models.Index(fields=["memory", "-started_at"], name="insight_run_newest")]

    def __str__(self) -> str:
        return f"Insight run #{self.pk} ({self.state})"


class DeepReview(InsightRun):
    """One Deep review: started from the Knowledge tab or weekly on beat, settled with its report
    in words. An insight run of kind ``deep_review``, with its row and lease."""

    objects: ClassVar[_DeepReviews] = _DeepReviews()

    class Meta:
        proxy = True

    def __str__(self) -> str:
        return f"Deep review #{self.pk} ({self.state})"
