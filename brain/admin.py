"""The platform's rows in the admin, read-only: model calls (what the model cost, how long it
took, why a pass failed) and worker heartbeats. They belong to no memory, so only people whose
Django permissions allow it (superusers) see them; the memory rows' admin is per memory
(``knowledge/admin.py``)."""

from django.contrib import admin

from brain.models import ModelCall, WorkerHeartbeat


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
