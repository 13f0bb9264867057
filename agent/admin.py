"""Episodes and procedures in the admin, read-only (knowledge's models, registered here beside
the actions that write them): an episode is never edited (the log is append-only) and a
procedure's score comes only from the outcomes reported for it. The core is edited on the
memory's own page (``Memory.core``) and on the Knowledge tab. Who sees which rows: the rules in
``knowledge/admin.py``."""

from django.contrib import admin

from knowledge.admin import MemoryScopedAdmin
from knowledge.models import Episode, Procedure


class ReadOnlyAdmin(MemoryScopedAdmin):
    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdmin):
    list_display = ["text", "outcome", "occurred_at", "recorded_by_name", "distilled_at", "memory"]
    list_filter = ["outcome"]
    list_select_related = ["memory"]
    search_fields = ["text", "recorded_by_name"]
    date_hierarchy = "occurred_at"
    fields = [
        "memory",
        "text",
        "outcome",
        "occurred_at",
        "recorded_by_name",
        "restates",
        "distilled_at",
        "embedder",
        "created_at",
    ]


@admin.register(Procedure)
class ProcedureAdmin(ReadOnlyAdmin):
    list_display = ["task", "successes", "failures", "confidence", "last_run_at", "memory"]
    list_select_related = ["memory"]
    search_fields = ["task", "text"]
    date_hierarchy = "last_run_at"
    fields = [
        "memory",
        "task",
        "steps",
        "successes",
        "failures",
        "confidence",
        "recorded_by_name",
        "created_at",
        "last_run_at",
    ]
