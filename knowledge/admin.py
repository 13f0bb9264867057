from django.contrib import admin

from knowledge.models import Memory


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "memory_max_kb", "learning", "memory_injection"]
    prepopulated_fields = {"slug": ["name"]}
