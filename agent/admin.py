"""Episodes and procedures in the admin, read-only: an episode is never edited (the log is
append-only) and a procedure's score comes only from the outcomes reported for it. The core is
edited on the memory's own page (``Memory.core``) and on the Knowledge tab."""

from django.contrib import admin

from knowledge.models import Episode, Procedure


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdmin):
    list_display = ["text", "memory", "outcome", "occurred_at", "recorded_by_name", "distilled_at"]
    list_filter = ["outcome", "memory"]
    search_fields = ["text"]
    exclude = ["embedding"]


@admin.register(Procedure)
class ProcedureAdmin(ReadOnlyAdmin):
    list_display = ["task", "memory", "successes", "failures", "confidence", "last_run_at"]
    list_filter = ["memory"]
    search_fields = ["task", "text"]
