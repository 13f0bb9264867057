"""The platform's rows in the admin: model calls (what the model cost, how long it took, why a
pass failed) and Celery worker heartbeats, read-only; worker tokens (made and revoked here),
model routes, and the worker programs and calls waiting for them. brain imports no app, so
these use Django's own permissions (superusers); a memory's routes and workers are also on its
Knowledge tab, under the per-memory rule (``knowledge.access``)."""

from django.contrib import admin, messages

from brain import workers
from brain.models import ModelCall, ModelRoute, WaitingCall, Worker, WorkerHeartbeat, WorkerToken


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = ["hostname", "seen_at"]


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "task",
        "provider",
        "model",
        "state",
        "latency_ms",
        "input_tokens",
        "output_tokens",
    ]
    list_filter = ["task", "state", "provider"]
    search_fields = ["task", "model", "error", "output"]
    date_hierarchy = "created_at"


TOKEN_SHOWN = ("memory", "name", "prefix", "created_by", "created_at", "last_seen_at", "revoked_at")


@admin.register(WorkerToken)
class WorkerTokenAdmin(admin.ModelAdmin):
    """Worker tokens: made here (the key is shown once, in the message after saving), listed
    with when each was last seen, revoked with the action. Nothing else about one changes."""

    list_display = ["name", "memory", "prefix", "created_at", "last_seen_at", "revoked_at"]
    list_filter = ["memory", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    actions = ["revoke"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["memory", "name"]
        return [
            "memory",
            "name",
            "prefix",
            "created_by",
            "created_at",
            "last_seen_at",
            "revoked_at",
        ]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.get_fields(request, obj)

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return
        made = workers.create_token(memory=obj.memory, name=obj.name, created_by=request.user)
        obj.pk, obj.prefix, obj.key_hash = made.token.pk, made.token.prefix, made.token.key_hash
        obj._state.adding = False
        self.message_user(request, made.message, messages.WARNING)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset:
            self.message_user(request, workers.revoke_token(token).message)


@admin.register(ModelRoute)
class ModelRouteAdmin(admin.ModelAdmin):
    """Who serves a memory's model calls per task (the Knowledge tab shows the same)."""

    list_display = ["memory", "task", "provider", "model", "updated_at"]
    list_filter = ["memory", "provider"]
    fields = ["memory", "task", "provider", "model"]

    def get_readonly_fields(self, request, obj=None):
        return ["memory", "task"] if obj is not None else []

    def save_model(self, request, obj, form, change) -> None:
        workers.set_route(memory=obj.memory, task=obj.task, provider=obj.provider, model=obj.model)
        obj.pk = ModelRoute.objects.get(memory=obj.memory, task=obj.task).pk


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "token",
        "last_seen_at",
        "served",
        "refused",
        "last_task",
        "last_call_at",
    ]
    list_filter = ["token__memory"]


@admin.register(WaitingCall)
class WaitingCallAdmin(ReadOnlyAdmin):
    """Calls for workers: what each carried, who took it, what came back. The prompt is kept
    only while the call lives here (the ModelCall row keeps its size, not its words)."""

    list_display = ["created_at", "memory", "task", "model", "state", "worker_name", "attempts"]
    list_filter = ["state", "task", "memory"]
    date_hierarchy = "created_at"
