from django.contrib import admin

from brain.models import ModelCall, WorkerHeartbeat

admin.site.register(WorkerHeartbeat)


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
