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
