"""Read-mostly admin views: the document changes only through its actions, never by hand here."""

from django.contrib import admin

from memory.models import Change, ConsolidationRun, DocumentRevision, InboxItem


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(InboxItem)
class InboxItemAdmin(ReadOnlyAdmin):
    list_display = ["text", "memory", "origin", "action", "confidence", "state", "created_at"]
    list_filter = ["state", "origin", "memory"]
    search_fields = ["text"]


@admin.register(DocumentRevision)
class DocumentRevisionAdmin(ReadOnlyAdmin):
    list_display = ["memory", "generation", "kind", "author", "created_at"]
    list_filter = ["kind", "memory"]


@admin.register(ConsolidationRun)
class ConsolidationRunAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "memory",
        "state",
        "trigger",
        "composer",
        "items_read",
        "started_at",
        "finished_at",
    ]
    list_filter = ["state", "trigger", "memory"]


@admin.register(Change)
class ChangeAdmin(ReadOnlyAdmin):
    list_display = ["number", "memory", "source", "summary", "author_name", "created_at"]
    list_filter = ["source", "memory"]
    search_fields = ["summary"]
