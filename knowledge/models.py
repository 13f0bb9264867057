from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Length
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from brain.words import counted
from knowledge import label_names, read_rule, runs
from knowledge.read_layer import ReadManager, ReadQuerySet

MEMORY_MAX_KB_RANGE = (1, 64)


def name_of(user) -> str:
    """The name kept beside a row a person made (``taught_by_name``, ``author_name``…), so the
    row still says who after the account is gone; "" for the system."""
    return user.get_username() if user is not None else ""


# The core is loaded first into every memory block and counted against its budget: 1,000
# characters is about 250 tokens, under half of the 600-token block a session starts with, so
# whatever the core says the larger part of the block is still left to what was learned.
CORE_MAX_CHARS = 1000


class MemoryQuerySet(models.QuerySet["Memory"]):
    def default(self) -> Memory:
        """The memory every surface uses when none is named: the first created ("home")."""
        return self.order_by("pk").first() or self.create(slug="home", name="Home")

    def by_slug(self, slug: str | None) -> Memory:
        """The named memory, or the default one when ``slug`` is empty. Raises DoesNotExist."""
        return self.get(slug=slug) if slug else self.default()


class Memory(models.Model):
    """One knowledge space (a home, an agent, a team). Every fact, document and queue belongs
    to exactly one."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    memory_max_kb = models.PositiveSmallIntegerField(
        default=32,
        validators=[
            MinValueValidator(MEMORY_MAX_KB_RANGE[0]),
            MaxValueValidator(MEMORY_MAX_KB_RANGE[1]),
        ],
        help_text="How much the memory document may hold, in KB (1–64). Not a speed setting: "
        "it decides how much brain can know before filing something new drops something old.",
    )
    learning = models.BooleanField(
        default=True,
        help_text="The master switch: off stops the consolidator and every learning pass. "
        "What is already known is kept and still used.",
    )
    memory_injection = models.BooleanField(
        default=True, help_text="Off keeps learning but stops memory being given to prompts."
    )
    core = models.TextField(
        blank=True,
        default="",
        max_length=CORE_MAX_CHARS,
        help_text="Pinned: loaded first into every memory block an agent is given, and counted "
        "against its budget. Who the agent works for and the standing rules, in a few lines "
        f"(at most {CORE_MAX_CHARS:,} characters).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "memories"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    memory_max_kb__gte=MEMORY_MAX_KB_RANGE[0],
                    memory_max_kb__lte=MEMORY_MAX_KB_RANGE[1],
                ),
                name="memory_max_kb_in_range",
            ),
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("core"), CORE_MAX_CHARS),
                name="memory_core_is_small",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def max_bytes(self) -> int:
        return self.memory_max_kb * 1024


# Subjects: what a fact is about ---------------------------------------------------------------


class SubjectQuerySet(ReadQuerySet["Subject"]):
    def present(self) -> SubjectQuerySet:
        return self.filter(present=True)

    def for_memory(self, memory: Memory) -> SubjectQuerySet:
        return self.filter(memory=memory)

    def _narrow(self, user) -> SubjectQuerySet:
        """Pages that exist for ``user``: those with at least one fact they may read (any
        status: a page of forgotten facts still exists in the history), and every subject of a
        memory they administer (a room with no fact yet included). See visibility.py."""
        if read_rule.reads_all(user):
            return self
        readable = Fact.objects.readable_by(user).filter(subjects=models.OuterRef("pk"))
        administered = read_rule.administered_by(user)
        if administered:
            return self.filter(models.Exists(readable) | models.Q(memory_id__in=administered))
        return self.filter(models.Exists(readable))

    def named(self, words: str) -> SubjectQuerySet:
        """Subjects whose name, entity id or one of whose nicknames is exactly ``words``."""
        words = words.strip()
        return self.filter(
            models.Q(name__iexact=words)
            | models.Q(entity_id__iexact=words)
            | models.Q(aliases__contains=[words.casefold()])
        )


if TYPE_CHECKING:
    # For the type checker: the manager SubjectQuerySet.as_manager() makes.
    SubjectManager = ReadManager.from_queryset(SubjectQuerySet)


class Subject(models.Model):
    """What facts are about: the house, a room, a device (a Home Assistant entity), a person, or
    any page type the memory's schema adds. In a graph memory a subject is a page: it exists for
    a reader while they can read one of its facts (``SubjectQuerySet.readable_by``)."""

    class Kind(models.TextChoices):
        HOUSE = "house"
        ROOM = "room"
        DEVICE = "device"
        PERSON = "person"
        # Page types a team's graph memory keeps (a memory's schema: PageType).
        COMPANY = "company"
        PROJECT = "project"
        TOPIC = "topic"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="subjects")
    # The page type. Every memory starts with a house's four; its schema (PageType rows,
    # editable in the admin) says which it keeps and what belongs on each.
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200, help_text="The friendly name people use.")
    entity_id = models.CharField(
        max_length=255, blank=True, help_text="The Home Assistant entity id, for a device."
    )
    room = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="devices",
        limit_choices_to={"kind": "room"},
    )
    # Lower-cased nicknames: "the beacon" for the office lamp.
    aliases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    present = models.BooleanField(
        default=True, help_text="False once the house no longer has it; its facts rest."
    )
    removed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SubjectQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "entity_id"],
                condition=~models.Q(entity_id=""),
                name="one_subject_per_entity",
            ),
            models.UniqueConstraint(
                fields=["memory", "kind", "name"], name="one_subject_per_kind_and_name"
            ),
        ]
        indexes = [GinIndex(fields=["aliases"], name="subject_aliases_gin")]

    def __str__(self) -> str:
        return self.name

    @property
    def labels(self) -> list[str]:
        """Every way a person may refer to it: its name, nicknames and entity id."""
        return [self.name, *self.aliases, *([self.entity_id] if self.entity_id else [])]


# Sources: where a belief came from ------------------------------------------------------------


class SourceQuerySet(ReadQuerySet["Source"]):
    def _narrow(self, user) -> SourceQuerySet:
        """Sources listed for ``user``: those with at least one passage they may read (the
        others are masked in its text: ``visibility.masked_text``). See visibility.py."""
        readable = Passage.objects.readable_by(user).filter(source=models.OuterRef("pk"))
        return self.filter(models.Exists(readable))


if TYPE_CHECKING:
    # For the type checker: the manager SourceQuerySet.as_manager() makes.
    SourceManager = ReadManager.from_queryset(SourceQuerySet)


class Source(models.Model):
    """Where facts came from: a conversation, a typed line, a note, document or email, an
    insight or study run, an import. Never edited: a new version is a new row (``previous``),
    cut into passages again; a passage whose text is unchanged keeps its labels."""

    class Kind(models.TextChoices):
        CONVERSATION = "conversation"
        TYPED = "typed"
        TERMINAL = "terminal"
        API = "api"
        INSIGHT = "insight"
        STUDY = "study"
        IMPORT = "import"
        NOTE = "note"
        DOCUMENT = "document"
        EMAIL = "email"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="sources")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    title = models.CharField(max_length=300)
    reference = models.CharField(
        max_length=300, blank=True, help_text="The conversation or run id where it came from."
    )
    text = models.TextField(blank=True, help_text="The conversation or document, when kept.")
    previous = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="next_versions",
        help_text="The version this one replaces: a source is never edited, a new version is a "
        "new source.",
    )
    # Label is declared below: its type is named here, as the string reference cannot say it.
    labels: models.ManyToManyField[Label, Any] = models.ManyToManyField(
        "Label",
        blank=True,
        related_name="sources",
        help_text="Set on the source by a person or a rule: its passages take them.",
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who added it (a note, document or email); empty for what brain heard.",
    )
    # A conversation (memory/conversations.py) keeps its messages one by one as well, so a fact
    # can point at the turn that taught it (Observation.turn): each is {"speaker", "person"
    # (a username, "" when not signed in), "role" ("person" or "assistant"), "text", "at"}.
    # Turns are only ever appended (a chat that grows turn by turn), never changed.
    turns = models.JSONField(default=list, blank=True)
    channel = models.CharField(
        max_length=10, blank=True, help_text="For a conversation: voice, chat or terminal."
    )
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="For a conversation: the person signed in, if anyone was.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = SourceQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["memory", "kind", "reference"])]
        constraints = [
            # Posting the same conversation twice finds the first (memory/conversations.py).
            models.UniqueConstraint(
                fields=["memory", "reference"],
                condition=models.Q(kind="conversation") & ~models.Q(reference=""),
                name="one_source_per_conversation",
            ),
        ]

    def __str__(self) -> str:
        return self.title


# Labels, roles and passages: who may read what (knowledge/visibility.py holds the rule) -------


class Label(models.Model):
    """A tag with a written meaning (Household, Private, Sales, HR…) that passages carry. A
    person reads a passage when one of their roles grants one of its labels."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=60)
    meaning = models.TextField(
        blank=True,
        help_text="What belongs under this label, in plain words: the labeller reads it, and a "
        "changed meaning relabels what it covers.",
    )
    default = models.BooleanField(
        default=False,
        help_text="Taken by the passages of a source that was added with no label chosen.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                models.functions.Lower("name"), "memory", name="one_label_per_name"
            ),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A name that reads like another label's of the memory is refused, naming that label
        (``knowledge.label_names``)."""
        self.name = label_names.clean(self.name)
        if not self.name:
            raise ValidationError({"name": "A label needs a name with something visible in it."})
        if not self.memory_id:
            return
        key = label_names.key(self.name)
        others = Label.objects.filter(memory_id=self.memory_id).exclude(pk=self.pk)
        for other in others.values_list("name", flat=True):
            if label_names.key(other) == key:
                raise ValidationError(
                    {
                        "name": f"“{self.name}” reads like the label “{other}” this memory "
                        "already has; choose another name, or use that label."
                    }
                )


class LabellingRule(models.Model):
    """A rule an administrator states for a memory's new sources: a source that matches it —
    added by this person or sent from this address, through this channel, with these words in
    its title, naming this page; every condition given must hold — takes its labels, as if a
    person had set them on the source (seed 001: "you or a rule set a label on the source").
    Relabelling keeps them like a person's (``knowledge.labeller.relabel``). Applied by
    ``knowledge.labelling_rules``."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="labelling_rules")
    name = models.CharField(max_length=120, help_text="What the rule is for, in a few words.")
    labels = models.ManyToManyField(Label, related_name="rules", help_text="Labels it sets.")
    sender = models.CharField(
        max_length=254,
        blank=True,
        help_text="Who added the source (a username), or an email's From address or name; any "
        "sender when empty.",
    )
    channel = models.CharField(
        max_length=12,
        blank=True,
        choices=Source.Kind.choices,
        help_text="Sources of this kind only; any kind when empty.",
    )
    title_words = models.CharField(
        max_length=200,
        blank=True,
        help_text="Words its title must hold, all of them (any case); any title when empty.",
    )
    page = models.ForeignKey(
        "Subject",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="labelling_rules",
        help_text="Sources that name this page; any when empty.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not (self.sender.strip() or self.channel or self.title_words.strip() or self.page_id):
            raise ValidationError(
                "A rule needs at least one condition (sender, channel, title words or page): "
                "a rule for every source is the memory's default labels."
            )
        if self.page_id and self.memory_id:
            assert self.page is not None  # page_id is set
            if self.page.memory_id != self.memory_id:
                raise ValidationError({"page": "Choose a page of the rule's own memory."})


class LabelSet(models.Model):
    """One distinct set of labels, kept once (interned): ``labels`` holds the label ids in
    order. Passages point at theirs and each fact carries the ids of its cited passages' sets
    (``Fact.label_sets``), so the read rule is one array comparison (visibility.py). Written
    only by the database (migration 0012's triggers), never edited."""

    labels = ArrayField(models.BigIntegerField(), unique=True)

    class Meta:
        indexes = [GinIndex(fields=["labels"], name="labelset_labels_gin")]

    def __str__(self) -> str:
        return ",".join(str(pk) for pk in self.labels) or "(no label)"


class Role(models.Model):
    """The labels a person may read. People get roles in the admin; a role for ``everyone``
    is held by every person who may read the memory (the default role, granting Household)."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="roles")
    name = models.CharField(max_length=60)
    labels = models.ManyToManyField(Label, blank=True, related_name="roles")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="brain_roles"
    )
    everyone = models.BooleanField(
        default=False,
        help_text="Every person who may read this memory has this role, without being named.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "name"], name="one_role_per_name"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PassageQuerySet(ReadQuerySet["Passage"]):
    def for_memory(self, memory: Memory) -> PassageQuerySet:
        return self.filter(memory=memory)

    def _narrow(self, user) -> PassageQuerySet:
        """Passages ``user`` may read: one of their roles grants one of its labels. See
        visibility.py."""
        return read_rule.readable_passages(self, user)


if TYPE_CHECKING:
    # For the type checker: the manager PassageQuerySet.as_manager() makes.
    PassageManager = ReadManager.from_queryset(PassageQuerySet)


class Passage(models.Model):
    """A piece of a source's text: a paragraph, or a sentence of one that mixed two subjects.
    Facts cite passages, and a passage's labels decide who reads it and every fact that cites
    it. ``label_set`` follows ``labels`` (a database trigger), and facts follow their passages'
    sets (another), in the transaction that changes them."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="passages")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="passages")
    ordinal = models.PositiveIntegerField(help_text="Its place in the source, from 0.")
    text = models.TextField()
    text_hash = models.CharField(
        max_length=64,
        help_text="Of the text with its spaces evened out: a new version of the source keeps "
        "the labels of a passage whose text is unchanged.",
    )
    labels = models.ManyToManyField(
        Label, through="PassageLabel", blank=True, related_name="passages"
    )
    label_set = models.ForeignKey(
        LabelSet,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.PROTECT,
        related_name="passages",
        help_text="Its labels, interned (None: no label, so only administrators read it).",
    )
    unsure = models.BooleanField(
        default=False,
        help_text="The labeller could not place it: administrators only read it until a person "
        "decides (its Review item asks).",
    )
    decided = models.BooleanField(
        default=False,
        help_text="A person chose its labels: relabelling after a new label or a changed "
        "meaning leaves it as they chose.",
    )
    compiled_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When compiling last wrote its statements onto pages (memory/compiling.py): "
        "compiling the source again skips it.",
    )
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = PassageQuerySet.as_manager()

    # Not a column: set on the passages a source's page shows (whether the person reads it).
    readable: bool

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "ordinal"], name="one_passage_per_place"),
        ]
        indexes = [
            models.Index(fields=["memory", "text_hash"], name="passage_memory_text"),
            GinIndex(fields=["search_vector"], name="passage_search_vector", fastupdate=False),
        ]
        ordering = ["source", "ordinal"]

    def __str__(self) -> str:
        return self.text[:80]


class PassageLabel(models.Model):
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE)
    # RESTRICT: a label a passage carries cannot be deleted (deleting the whole memory can).
    label = models.ForeignKey(Label, on_delete=models.RESTRICT)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["passage", "label"], name="one_passage_label"),
        ]

    def __str__(self) -> str:
        return f"passage #{self.passage_id} is labelled #{self.label_id}"


class ReviewItemQuerySet(ReadQuerySet["ReviewItem"]):
    def open(self) -> ReviewItemQuerySet:
        return self.filter(state=ReviewItem.State.OPEN)

    def for_memory(self, memory: Memory) -> ReviewItemQuerySet:
        return self.filter(memory=memory)

    def waiting(self) -> ReviewItemQuerySet:
        """Open items still asking: a conflict's only while both its sides are still believed
        (``ConflictQuerySet.to_settle``: a side forgotten or replaced since settled it)."""
        live = Fact.objects.live().values("pk")
        return self.open().filter(
            ~models.Q(kind=ReviewItem.Kind.CONFLICT)
            | models.Q(
                conflict__state=Conflict.State.OPEN,
                conflict__old__in=live,
                conflict__new__in=live,
            )
        )

    def _narrow(self, user) -> ReviewItemQuerySet:
        """Items ``user`` may read: a conflict's when they read the conflict (both sides), any
        other when they read every passage it names (an item naming none, administrators
        only: the rule fails closed). See visibility.py."""
        if read_rule.reads_all(user):
            return self
        conflicts = Conflict.objects.readable_by(user).values("pk")
        unreadable = Passage.objects.exclude(
            pk__in=Passage.objects.readable_by(user).values("pk")
        ).filter(review_items=models.OuterRef("pk"))
        named = Passage.objects.filter(review_items=models.OuterRef("pk"))
        return self.filter(
            models.Q(kind=ReviewItem.Kind.CONFLICT, conflict__in=conflicts)
            | (
                ~models.Q(kind=ReviewItem.Kind.CONFLICT)
                & models.Exists(named)
                & ~models.Exists(unreadable)
            )
        )


if TYPE_CHECKING:
    # For the type checker: the manager ReviewItemQuerySet.as_manager() makes.
    ReviewItemManager = ReadManager.from_queryset(ReviewItemQuerySet)


class ReviewItem(models.Model):
    """Where brain asks a person, one queue for all of it (the Review page):

    - a labelling doubt: the labeller was unsure about part of a source (its passages wait,
      readable by administrators only) or thinks a label is wrong for a part;
    - a conflict: two statements from different sources disagree (``conflict``; both stay
      live until a person settles it);
    - an unplaced passage: compiling placed it on no page.

    One open item per source and kind, and one per conflict. An item is readable by whoever
    may read what it is about: a conflict's item when the conflict is (both sides), any other
    when every passage it names is (``ReviewItemQuerySet.readable_by``)."""

    class Kind(models.TextChoices):
        LABELLING = "labelling", "labelling doubt"
        CONFLICT = "conflict", "conflict"
        UNPLACED = "unplaced", "a passage placed on no page"

    class State(models.TextChoices):
        OPEN = "open"
        SETTLED = "settled"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="review_items")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.CASCADE, related_name="review_items"
    )
    passages = models.ManyToManyField(Passage, blank=True, related_name="review_items")
    conflict = models.ForeignKey(
        "Conflict",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="review_items",
        help_text="For a conflict: the two statements to settle.",
    )
    question = models.TextField(help_text="What brain asks, in plain words.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    settled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    settled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ReviewItemQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "kind"],
                condition=models.Q(state="open"),
                name="one_open_review_item_per_source",
            ),
            models.UniqueConstraint(
                fields=["conflict"],
                condition=models.Q(state="open"),
                name="one_open_review_item_per_conflict",
            ),
        ]
        indexes = [models.Index(fields=["memory", "state", "-created_at"], name="review_open")]

    def __str__(self) -> str:
        return self.question[:80]


class PageType(models.Model):
    """A kind of page a memory keeps (person, company, project, room, device, topic…), with
    written guidance on what belongs on one. Subjects name theirs by ``key``."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="page_types")
    key = models.CharField(max_length=16, choices=Subject.Kind.choices)
    name = models.CharField(max_length=60)
    guidance = models.TextField(
        blank=True, help_text="What a page of this type holds, and what it leaves to others."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "key"], name="one_page_type_per_key"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CompileRunQuerySet(runs.RunQuerySet["CompileRun"]):
    def for_source(self, source: Source) -> CompileRunQuerySet:
        return self.filter(source=source)


class CompileRun(runs.Run, runs.Requested, runs.Reasoned):
    """One compile of a note, document or email into facts on pages (memory/compiling.py):
    asked for when the source is added or by "Compile again", claimed by a worker, and settled
    with what it filed or why it filed nothing.

    The row is the lease, as a reflection's is: at most one runs per source (a partial unique
    index), created unclaimed, claimed by a conditional UPDATE; one whose worker died is taken
    over by the redelivered message or the sweep. ``passages_done`` of ``passages_total`` is the
    progress the source view shows."""

    class State(models.TextChoices):
        RUNNING = "running"
        COMPILED = "compiled"
        NOTHING = "nothing", "compiled nothing"
        FAILED = "failed"

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="compile_runs")
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    compiler = models.CharField(max_length=16, blank=True, help_text="offline or model")
    passages_total = models.PositiveIntegerField(default=0)
    passages_done = models.PositiveIntegerField(default=0)
    # What the compiler read from each passage, kept before anything is filed, so a run taken
    # over after its worker died files the same statements without asking the model again:
    # [{"passage": id, "text": ..., "pages": [[name, type], ...], "cites": [ids]}].
    statements = models.JSONField(default=list, blank=True)
    extracted = models.BooleanField(default=False)
    facts_filed = models.PositiveIntegerField(default=0)
    facts_known = models.PositiveIntegerField(
        default=0, help_text="Statements the gate found already known: they strengthened a fact."
    )
    unplaced = models.PositiveIntegerField(default=0, help_text="Passages placed on no page.")
    notes = models.JSONField(default=list, blank=True)

    objects = CompileRunQuerySet.as_manager()

    class Meta:
        default_related_name = "compile_runs"
        constraints = [runs.one_running("source", name="one_compile_running_per_source")]
        indexes = [models.Index(fields=["source", "-started_at"], name="compile_run_newest")]

    def __str__(self) -> str:
        return f"compile #{self.pk} of source #{self.source_id} ({self.state})"

    @property
    def message(self) -> str:
        """What the run did or is doing, in words, as the source view says it."""
        if self.state == self.State.RUNNING:
            if not self.passages_total:
                return "Compiling: reading the passages…"
            return f"Compiling: {self.passages_done} of {self.passages_total} passages"
        if self.state == self.State.FAILED:
            return f"Compiling failed: {self.reason}"
        if self.state == self.State.NOTHING:
            return f"Compiled nothing: {self.reason}"
        filed = counted(self.facts_filed, "new fact")
        known = f", {self.facts_known} already known" if self.facts_known else ""
        unplaced = ""
        if self.unplaced:
            unplaced = (
                f"; {self.unplaced} passage{' was' if self.unplaced == 1 else 's were'} placed "
                "on no page (see Review)"
            )
        read = counted(self.passages_done, "passage")
        return f"Compiled {read}: {filed}{known}{unplaced}."


# Facts --------------------------------------------------------------------------------------


# A fact's row may be used: queued or filed, still valid, not about an entity the house no
# longer has. ``live()`` adds expiry (it moves with the clock); the partial indexes of live
# facts (``fact_live``, ``fact_words``) are over these rows.
LIVE_ROWS = models.Q(status__in=["queued", "filed"], valid_to__isnull=True, subject_removed=False)


class FactQuerySet(ReadQuerySet["Fact"]):
    def for_memory(self, memory: Memory) -> FactQuerySet:
        return self.filter(memory=memory)

    def live(self, *, now=None) -> FactQuerySet:
        """What a run may be told: queued or filed, still valid, not expired, not about an
        entity the house no longer has."""
        now = now or timezone.now()
        return self.filter(LIVE_ROWS).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )

    def without_vectors(self) -> FactQuerySet:
        """Rows to read and show: the embedding and the search vector stay in the database."""
        return self.defer("embedding", "search_vector")

    def _narrow(self, user) -> FactQuerySet:
        """The one read rule every surface uses: a fact is readable when ``user`` may read
        every passage it cites (administrators and the system, ``user=None``, read all). One
        predicate on the fact's own row, so raw SQL takes it as it is (search.readable_where).
        See visibility.py for the rule and why it is built this way."""
        return read_rule.readable_facts(self, user)

    def readable_at(self, user, key: str) -> models.Exists:
        """Whether the fact the outer row names by ``key`` (its foreign key, or an annotation
        holding a fact's id) is one ``user`` may read: ``readable_by`` looked up by that key,
        an index lookup a row. ``fact IN (every readable fact)`` hashed every fact of the
        table first: 22 ms for the Knowledge tab's queue of 110 items beside 100k facts."""
        return models.Exists(self.readable_by(user).filter(pk=models.OuterRef(key)))

    def as_of(self, when) -> FactQuerySet:
        """What was believed at ``when``: taught by then, not yet superseded, forgotten or
        expired."""
        return self.filter(created_at__lte=when).filter(
            models.Q(valid_to__isnull=True) | models.Q(valid_to__gt=when),
            models.Q(forgotten_at__isnull=True) | models.Q(forgotten_at__gt=when),
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=when),
        )

    def about(self, subjects) -> FactQuerySet:
        return self.filter(subjects__in=subjects).distinct()

    def matching(self, words: str) -> FactQuerySet:
        """Facts whose text contains ``words``, or about a subject whose name, nickname or
        entity id contains them (so a device's friendly name finds its facts)."""
        subjects = Subject.objects.filter(
            models.Q(name__icontains=words)
            | models.Q(entity_id__icontains=words)
            | models.Q(aliases__icontains=words)
        )
        about = self.model.subjects.through.objects.filter(subject__in=subjects).values("fact")
        return self.filter(models.Q(text__icontains=words) | models.Q(pk__in=about))


if TYPE_CHECKING:
    # For the type checker: the manager FactQuerySet.as_manager() makes.
    FactManager = ReadManager.from_queryset(FactQuerySet)


class Fact(models.Model):
    """One statement, with who taught it, when, from where, and whether it is still believed.

    Nothing is overwritten: a contradiction closes ``valid_to`` and links ``superseded_by``;
    forgetting and expiry set a status and keep the row.
    """

    class Kind(models.TextChoices):
        NOTE = "note"
        PREFERENCE = "preference"
        NICKNAME = "nickname"
        CORRECTION = "correction"
        QUIRK = "quirk"
        HEALTH_NOTE = "health_note", "health note"
        ROUTINE = "routine"
        RULE = "rule"
        JUDGEMENT = "judgement"

    class Valence(models.TextChoices):
        FACT = "fact"
        FAILURE = "failure"

    class Channel(models.TextChoices):
        VOICE = "voice"
        CHAT = "chat"
        TERMINAL = "terminal"
        TYPED = "typed"
        INSIGHT = "insight"
        STUDY = "study"
        IMPORT = "import"
        API = "api"

    class Status(models.TextChoices):
        QUEUED = "queued", "waiting to be filed"
        FILED = "filed"
        FORGOTTEN = "forgotten"
        EXPIRED = "expired"
        # Decay or pruning took it out of use (agent/forgetting.py), the reason in
        # forgotten_reason; its validity is closed, so what was believed before then is still
        # answerable.
        RETIRED = "retired"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="facts")
    # Names the fact across installs: an export's entries and links are matched by it.
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    text = models.TextField()
    normalized = models.TextField(help_text="The text as statements.normalise() reads it.")
    subjects = models.ManyToManyField(Subject, blank=True, related_name="facts")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.NOTE)
    valence = models.CharField(max_length=8, choices=Valence.choices, default=Valence.FACT)
    outcome = models.BooleanField(
        null=True, blank=True, help_text="The outcome the teacher reported with it, if any."
    )
    channel = models.CharField(max_length=10, choices=Channel.choices)
    taught_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    taught_by_name = models.CharField(max_length=150, blank=True)
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, related_name="facts"
    )
    passages = models.ManyToManyField(Passage, through="Citation", blank=True, related_name="facts")
    # The ids of the label sets of the passages it cites, distinct and in order (0 for a
    # passage with no label), kept by the database in the transaction that cites or relabels
    # (migration 0012). Empty only while it cites nothing: then administrators alone read it.
    label_sets = ArrayField(models.BigIntegerField(), default=list, blank=True, editable=False)
    # Two numbers the read rule tests before it looks at the array (knowledge/read_rule.py):
    # each set's bit (its id modulo 64) and the newest set; worked out by the database from
    # ``label_sets`` whenever it changes (migration 0020).
    set_mask = models.GeneratedField(
        expression=models.Func(
            "label_sets", function="knowledge_set_mask", output_field=models.BigIntegerField()
        ),
        output_field=models.BigIntegerField(),
        db_persist=True,
    )
    newest_set = models.GeneratedField(
        expression=models.Func(
            "label_sets", function="knowledge_newest_set", output_field=models.BigIntegerField()
        ),
        output_field=models.BigIntegerField(),
        db_persist=True,
    )
    confidence = models.FloatField(default=0.6)
    prior = models.FloatField(default=0.6, help_text="The confidence it was taught with.")
    support = models.PositiveIntegerField(default=1)
    successes = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    used_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The last time acting on it was reported, worked or not (record_outcome).",
    )
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    forgotten_at = models.DateTimeField(null=True, blank=True)
    forgotten_reason = models.CharField(max_length=300, blank=True)
    subject_removed = models.BooleanField(
        default=False, help_text="About an entity the house no longer has: resting, not used."
    )
    in_document = models.BooleanField(
        default=False, help_text="Its line is in the memory document (set when filed)."
    )
    embedding = VectorField(dimensions=384, null=True, blank=True)
    embedder = models.CharField(max_length=40, blank=True)
    # The words full-text search reads, kept beside the text so ranking does not re-derive them.
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = FactQuerySet.as_manager()

    # Not columns: set on the facts a page or a conflict's sides show (review.with_sides and
    # the page view of surfaces.views.pages): the passages it cites and the pages it is about.
    cited: list[Passage]
    pages: list[Subject]

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1),
                name="fact_confidence_is_a_probability",
            ),
        ]
        indexes = [
            models.Index(fields=["memory", "status", "-created_at"], name="fact_memory_status"),
            models.Index(fields=["memory", "normalized"], name="fact_memory_normalized"),
            models.Index(fields=["memory", "-created_at"], name="fact_memory_newest"),
            models.Index(fields=["memory", "-confidence"], name="fact_memory_certain"),
            # The newest full-text matches of one memory, without walking other memories' rows
            # (knowledge/search.py).
            models.Index(fields=["memory", "-id"], name="fact_memory_id"),
            # How many facts a memory knows, and how many a reader may read, and whether any
            # vector is stale, counted from indexes alone (migrations 0015 and 0020 say why).
            models.Index(
                fields=["memory", "expires_at"],
                include=["newest_set", "set_mask", "label_sets"],
                name="fact_live",
                condition=LIVE_ROWS,
            ),
            # How many facts a memory knows, from narrow entries (migration 0023): counting
            # ``fact_live`` reads its read-rule columns too.
            models.Index(
                fields=["memory", "expires_at"], name="fact_live_count", condition=LIVE_ROWS
            ),
            # A memory's newest live facts with their words and what the read rule reads, for
            # a full-text tier of common words to walk without reading the table
            # (knowledge/search.py, migration 0022).
            models.Index(
                fields=["memory", "-id"],
                include=[
                    "search_vector",
                    "expires_at",
                    "status",
                    "valid_to",
                    "subject_removed",
                    "newest_set",
                    "set_mask",
                    "label_sets",
                ],
                name="fact_words",
                condition=LIVE_ROWS,
            ),
            models.Index(fields=["memory", "embedder"], name="fact_memory_embedder"),
            models.Index(
                fields=["memory"], name="fact_without_vector", condition=models.Q(embedding=None)
            ),
            # No pending list (migration 0011 says why): every search reads only the index.
            GinIndex(fields=["search_vector"], name="fact_search_vector", fastupdate=False),
            # Substring search of the facts list ("beacon", "hall sens") stays indexed.
            GinIndex(
                fields=["text"],
                opclasses=["gin_trgm_ops"],
                name="fact_text_trgm",
                fastupdate=False,
            ),
            # A denser graph than pgvector's default (ef_construction 64): recall@10 at 100k
            # was 0.947-0.989 from one build to the next, 0.978-0.996 with 128 (migration 0024).
            HnswIndex(
                name="fact_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=128,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.text

    @property
    def is_live(self) -> bool:
        return (
            self.status in (self.Status.QUEUED, self.Status.FILED)
            and self.valid_to is None
            and not self.subject_removed
            and (self.expires_at is None or self.expires_at > timezone.now())
        )


class Citation(models.Model):
    """A fact cites a passage it came from. Only passages of the fact's own memory (a database
    check). RESTRICT: a cited passage is never deleted on its own, since a fact that lost a
    citation could become readable by more people."""

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE)
    passage = models.ForeignKey(Passage, on_delete=models.RESTRICT)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fact", "passage"], name="one_citation_per_passage"),
        ]

    def __str__(self) -> str:
        return f"fact #{self.fact_id} cites passage #{self.passage_id}"


# Observations: every time a statement was made ------------------------------------------------


class ObservationQuerySet(ReadQuerySet["Observation"]):
    def _narrow(self, user) -> ObservationQuerySet:
        """One time a fact was said, for a reader of the fact who may read where it was said
        (a source listed for them, or none): explain never names a source they may not read."""
        listed = Source.objects.readable_by(user).filter(pk=models.OuterRef("source_id"))
        return self.filter(Fact.objects.readable_at(user, "fact_id")).filter(
            models.Q(source__isnull=True) | models.Exists(listed)
        )


if TYPE_CHECKING:
    # For the type checker: the manager ObservationQuerySet.as_manager() makes.
    ObservationManager = ReadManager.from_queryset(ObservationQuerySet)


class Observation(models.Model):
    """One time a fact was said: who said it, when, through what, from which source, and the
    outcome they reported. The first is the teaching; a restatement by someone else or in
    another conversation adds one (support counts them) instead of overwriting who taught it.
    """

    class Kind(models.TextChoices):
        TAUGHT = "taught"
        RESTATED = "restated"

    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="observations")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    text = models.TextField(help_text="The words as they were said this time.")
    said_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    said_by_name = models.CharField(max_length=150, blank=True)
    channel = models.CharField(max_length=10, choices=Fact.Channel.choices)
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, related_name="observations"
    )
    outcome = models.BooleanField(null=True, blank=True)
    episode = models.ForeignKey(
        "Episode",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="observations",
        help_text="The episode this observation was distilled from, when it came from one.",
    )
    turn = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The turn of its source's conversation that said it (0 is the first).",
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ObservationQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["fact", "created_at"], name="observation_fact_time")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} by {self.said_by_name or 'brain'}: {self.text}"


# Conflicts: two statements a person settles ---------------------------------------------------


class ConflictQuerySet(ReadQuerySet["Conflict"]):
    def open(self) -> ConflictQuerySet:
        return self.filter(state=Conflict.State.OPEN)

    def for_memory(self, memory: Memory) -> ConflictQuerySet:
        return self.filter(memory=memory)

    def to_settle(self) -> ConflictQuerySet:
        """Open conflicts whose two sides are both still believed (a side forgotten, expired
        or replaced since has settled it by other means), newest first."""
        live = Fact.objects.live().values("pk")
        return (
            self.open()
            .filter(old__in=live, new__in=live)
            .select_related("old", "new")
            .order_by("-created_at", "-pk")
        )

    def _narrow(self, user) -> ConflictQuerySet:
        """A conflict is readable when both of its sides are (the one read rule on facts)."""
        readable = Fact.objects.readable_by(user).values("pk")
        return self.filter(old__in=readable, new__in=readable)


if TYPE_CHECKING:
    # For the type checker: the manager ConflictQuerySet.as_manager() makes.
    ConflictManager = ReadManager.from_queryset(ConflictQuerySet)


class Conflict(models.Model):
    """A new statement that may replace an older one, where the gate was not sure. Both stay
    live until a person keeps the new one, the old one, or both."""

    class State(models.TextChoices):
        OPEN = "open"
        SETTLED = "settled"

    class Resolution(models.TextChoices):
        KEEP_NEW = "new", "kept the new one"
        KEEP_OLD = "old", "kept the old one"
        KEEP_BOTH = "both", "kept both"
        # Both stay, each true for its own time: the old one until the new one's date.
        DATED = "dated", "kept both, each with its dates"
        # A person wrote one statement in place of both; it cites both sides' passages.
        MERGED = "merged", "merged them"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="conflicts")
    old = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_as_old")
    new = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="conflicts_as_new")
    reason = models.CharField(max_length=300)
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    resolution = models.CharField(max_length=8, choices=Resolution.choices, blank=True)
    merged_into = models.ForeignKey(
        Fact,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="For a merge: the statement a person wrote in place of both sides.",
    )
    settled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    settled_by_name = models.CharField(max_length=150, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ConflictQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["old", "new"],
                condition=models.Q(state="open"),
                name="one_open_conflict_per_pair",
            ),
            models.CheckConstraint(
                condition=~models.Q(old=models.F("new")), name="conflict_between_two_facts"
            ),
        ]
        indexes = [models.Index(fields=["memory", "state", "-created_at"], name="conflict_open")]

    def __str__(self) -> str:
        return f"“{self.old.text}” or “{self.new.text}”"


# Who may do what in a memory (knowledge/access.py holds the rule) -----------------------------


class Permission(models.IntegerChoices):
    """What a person may do in one memory; each level includes the ones below it."""

    NONE = 0, "none"
    READ = 1, "read"
    TEACH = 2, "teach"
    CURATE = 3, "curate"
    ADMINISTER = 4, "administer"


class Membership(models.Model):
    """One person's permission in one memory. A person with no row gets the default
    (``settings.BRAIN_DEFAULT_PERMISSION``); superusers administer every memory."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    permission = models.PositiveSmallIntegerField(
        choices=Permission.choices,
        default=Permission.READ,
        help_text="read: see everything in this memory; teach: also tell it things and report "
        "outcomes; curate: also edit the document, undo, forget, settle, start passes and "
        "export; administer: also import, change its settings and who may do what.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "user"], name="one_membership_per_person"),
        ]

    def __str__(self) -> str:
        return f"{self.user} may {self.get_permission_display()} {self.memory}"


# Agent memory: episodes and procedures -------------------------------------------------------
# They live here, beside the facts, because the layers that read them are here: the write gate
# compares a new statement with the episodes still waiting to be distilled, explain cites the
# episodes a belief came from, and context() shows procedures. The actions that write them are
# in the agent app (agent/actions.py), above memory, because distilling goes through
# memory.actions.learn.


class EpisodeQuerySet(models.QuerySet["Episode"]):
    def for_memory(self, memory: Memory) -> EpisodeQuerySet:
        return self.filter(memory=memory)

    def pending(self) -> EpisodeQuerySet:
        """Waiting for the sleep pass: not yet distilled (a restatement of a waiting episode is
        distilled with it, so it never waits on its own)."""
        return self.filter(distilled_at__isnull=True)

    def in_time_order(self) -> EpisodeQuerySet:
        return self.order_by("occurred_at", "pk")


class Episode(models.Model):
    """One thing an agent saw happen, as it told it, with its outcome and when it happened.

    Append-only and immutable: nothing changes its words, outcome or time, and nothing deletes
    it. The sleep pass distils waiting episodes into beliefs through the write gate; each
    belief's observations point back at the episodes it came from. ``distilled_at`` is set once,
    by a conditional update, when that happened.
    """

    class Outcome(models.TextChoices):
        OK = "ok"
        FAIL = "fail"
        UNKNOWN = "unknown"

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="episodes")
    text = models.TextField()
    normalized = models.TextField(help_text="The text as statements.normalise() reads it.")
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    occurred_at = models.DateTimeField(default=timezone.now)
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_name = models.CharField(max_length=150, blank=True)
    restates = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="restatements",
        help_text="A waiting episode that already said this; it is distilled with that one.",
    )
    distilled_at = models.DateTimeField(null=True, blank=True)
    embedding = VectorField(dimensions=384, null=True, blank=True)
    embedder = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = EpisodeQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=["ok", "fail", "unknown"]),
                name="episode_outcome_is_ok_fail_or_unknown",
            ),
        ]
        indexes = [
            models.Index(fields=["memory", "occurred_at"], name="episode_memory_time"),
            models.Index(
                fields=["memory", "occurred_at"],
                condition=models.Q(distilled_at__isnull=True),
                name="episode_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.text} ({self.outcome})"

    @staticmethod
    def as_bool(outcome: str) -> bool | None:
        """An episode's outcome word as facts carry it: True worked, False failed, None not
        known."""
        known: dict[str, bool] = {Episode.Outcome.OK: True, Episode.Outcome.FAIL: False}
        return known.get(outcome)

    @property
    def outcome_as_bool(self) -> bool | None:
        return self.as_bool(self.outcome)


class ProcedureQuerySet(models.QuerySet["Procedure"]):
    def for_memory(self, memory: Memory) -> ProcedureQuerySet:
        return self.filter(memory=memory)


class Procedure(models.Model):
    """A sequence of actions that achieved a task, scored by how often it worked: confidence is
    the success rate, Laplace-smoothed as a fact's is (knowledge.actions.record_outcome)."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="procedures")
    task = models.CharField(max_length=300, help_text="What it achieves.")
    steps = ArrayField(models.CharField(max_length=500))
    normalized = models.TextField(help_text="Task and steps as statements.normalise() reads them.")
    text = models.TextField(help_text="Task and steps in one line, as context() shows it.")
    successes = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    confidence = models.FloatField(default=0.5)
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_name = models.CharField(max_length=150, blank=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_run_at = models.DateTimeField(default=timezone.now)

    objects = ProcedureQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "normalized"], name="one_procedure_per_way"),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1),
                name="procedure_confidence_is_a_probability",
            ),
            models.CheckConstraint(
                condition=models.Q(steps__len__gte=1), name="procedure_has_steps"
            ),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="procedure_search_vector", fastupdate=False)
        ]

    def __str__(self) -> str:
        return self.text
