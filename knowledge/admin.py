from django.contrib import admin

from knowledge.models import Membership, Memory


class MembershipInline(admin.TabularInline):
    """Who may do what in this memory (the rule: knowledge/access.py). Superusers administer
    every memory without a row; a person without a row gets BRAIN_DEFAULT_PERMISSION."""

    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "memory_max_kb", "learning", "memory_injection"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
