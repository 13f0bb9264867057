from django.conf import settings
from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a Celery worker ran the beat's heartbeat task: proof both are alive."""

    hostname = models.CharField(max_length=255, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%Y-%m-%d %H:%M:%S}"


class ModelCall(models.Model):
    """One call through the LLM gateway (brain.llm.complete), written whatever its outcome.

    The row is the answer to "what did the model cost, how long did it take, why did that pass
    fail": the raw answer is kept even when it was invalid, so a refusal can be read later.
    The prompt itself is not kept (it holds the household's whole memory); its size is.
    """

    class State(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"
        TIMEOUT = "timeout", "timed out"
        INVALID = "invalid", "invalid answer"

    task = models.CharField(max_length=64)  # the caller's name for the work: "consolidate"
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=128)
    input_bytes = models.PositiveIntegerField()
    output = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    attempts = models.PositiveSmallIntegerField(default=0)  # 0: the deadline had already passed
    state = models.CharField(max_length=16, choices=State.choices)
    error = models.TextField(blank=True)
    timeout_s = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["task", "created_at"], name="modelcall_task_created")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["ok", "error", "timeout", "invalid"]),
                name="modelcall_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} via {self.provider}/{self.model}: {self.state}"


class ModelRoute(models.Model):
    """Who serves a memory's model calls for one task: Anthropic, a worker, or nobody (offline).

    ``task`` is the gateway's task name ("reflect", "consolidate"…) or ``"*"``, the memory's
    default for every task without a row of its own. No row at all: Anthropic when
    ``ANTHROPIC_API_KEY`` is set, offline otherwise — what brain did before routes existed.
    ``model`` is the name a worker's local model answers to ("llama3.2"); blank for a worker
    route means any model the memory's workers serve, and for Anthropic the settings' model.
    """

    class Provider(models.TextChoices):
        ANTHROPIC = "anthropic", "Anthropic"
        WORKER = "worker", "a worker"
        OFFLINE = "offline", "offline (no model)"

    DEFAULT_TASK = "*"

    memory = models.ForeignKey(
        "knowledge.Memory", on_delete=models.CASCADE, related_name="model_routes"
    )
    task = models.CharField(max_length=64)
    provider = models.CharField(max_length=16, choices=Provider.choices)
    model = models.CharField(max_length=128, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "task"], name="modelroute_one_per_task"),
            models.CheckConstraint(
                condition=models.Q(provider__in=["anthropic", "worker", "offline"]),
                name="modelroute_provider_valid",
            ),
        ]

    def __str__(self) -> str:
        model = f" ({self.model})" if self.model else ""
        return f"{self.task} → {self.get_provider_display()}{model}"


class WorkerToken(models.Model):
    """The key a worker program presents: it takes its memory's waiting calls and answers them,
    nothing else (``brain.middleware.WorkerTokenOnlyMiddleware`` refuses it everywhere else).

    Only a SHA-256 of the key is stored: the key is shown once, when it is made, like a
    GitHub token. The key is 32 random bytes, so an unsalted hash is as strong as the key.
    ``prefix`` (the first characters) is kept to tell tokens apart in lists.
    """

    memory = models.ForeignKey(
        "knowledge.Memory", on_delete=models.CASCADE, related_name="worker_tokens"
    )
    name = models.CharField(max_length=120)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        revoked = " (revoked)" if self.revoked_at else ""
        return f"{self.name} ({self.prefix}…){revoked}"


class Worker(models.Model):
    """A worker program seen by the server: a token and the name the program gave itself.
    Several programs may share a token (one per machine, say); each is its own row."""

    token = models.ForeignKey(WorkerToken, on_delete=models.CASCADE, related_name="workers")
    name = models.CharField(max_length=120)
    models_served = models.JSONField(default=list, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField()
    served = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)  # answers that failed validation or errors
    last_call_at = models.DateTimeField(null=True, blank=True)
    last_task = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["token", "name"], name="worker_one_per_token_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.token.name})"


class WaitingCall(models.Model):
    """One model call waiting for a worker, leased to one worker at a time (``brain.workers``).

    The row carries exactly what the worker sees (the system text, the prompt, the schema of
    the answer, the texts to embed) and nothing else of the memory. ``deadline`` is the job's:
    past it the call is ``expired`` and no answer is used. A lease runs ``lease_expires_at``;
    a worker that dies holding one lets it run out, and the call is handed out again.
    ``bad_answers`` counts answers refused (wrong shape or the worker's model failing): the
    first sends the call back to waiting, the second fails it with its reason.

    It is not a run (``brain.leases``): a run is held by a process of ours, named by its
    ``executor`` (host:pid), settled once, and taken over when that process is gone; a waiting
    call is held by a worker program on another machine over HTTP, named by a secret ``lease``
    it must show with every heartbeat and answer, handed out again (``attempts``) rather than
    taken over, and never settled by the process that asked for it — which only waits for the
    answer. Its conditional UPDATEs (``brain.workers``) check that secret as the leases module's
    check the executor.
    """

    class Kind(models.TextChoices):
        CHAT = "chat", "chat"
        EMBED = "embed", "embed"

    class State(models.TextChoices):
        WAITING = "waiting", "waiting"
        LEASED = "leased", "leased"
        ANSWERED = "answered", "answered"
        FAILED = "failed", "failed"
        EXPIRED = "expired", "expired"

    memory = models.ForeignKey(
        "knowledge.Memory", on_delete=models.CASCADE, related_name="waiting_calls"
    )
    model_call = models.ForeignKey(
        ModelCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="waiting"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CHAT)
    task = models.CharField(max_length=64)
    model = models.CharField(max_length=128, blank=True)  # blank: any model a worker serves
    system = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    max_tokens = models.PositiveIntegerField(default=0)
    schema = models.JSONField(null=True, blank=True)
    output_class = models.CharField(max_length=255, blank=True)  # dotted path, for validation
    texts = models.JSONField(default=list, blank=True)
    deadline = models.DateTimeField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.WAITING)
    lease = models.CharField(max_length=64, blank=True)
    leased_to = models.ForeignKey(
        WorkerToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    worker_name = models.CharField(max_length=120, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)  # leases handed out
    bad_answers = models.PositiveSmallIntegerField(default=0)
    text = models.TextField(blank=True)
    vectors = models.JSONField(null=True, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The next call for a memory: waiting (or leased, for a lease run out), oldest first.
            models.Index(
                fields=["memory", "created_at"],
                name="waitingcall_open",
                condition=models.Q(state__in=["waiting", "leased"]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    state__in=["waiting", "leased", "answered", "failed", "expired"]
                ),
                name="waitingcall_state_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=["chat", "embed"]), name="waitingcall_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} #{self.pk}: {self.state}"
