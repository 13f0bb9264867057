from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

MEMORY_MAX_KB_RANGE = (1, 64)


class MemoryQuerySet(models.QuerySet):
    def default(self) -> Memory:
        """The memory every surface uses when none is named: the first created ("home")."""
        return self.order_by("pk").first() or self.create(slug="home", name="Home")

    def by_slug(self, slug: str | None) -> Memory:
        """The named memory, or the default one when ``slug`` is empty. Raises DoesNotExist."""
        return self.get(slug=slug) if slug else self.default()


class Memory(models.Model):
    """One knowledge space (a home, an agent, a team). Every fact, document and queue belongs
    to exactly one."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    memory_max_kb = models.PositiveSmallIntegerField(
        default=32,
        validators=[
            MinValueValidator(MEMORY_MAX_KB_RANGE[0]),
            MaxValueValidator(MEMORY_MAX_KB_RANGE[1]),
        ],
        help_text="How much the memory document may hold, in KB (1–64). Not a speed setting: "
        "it decides how much brain can know before filing something new drops something old.",
    )
    learning = models.BooleanField(
        default=True,
        help_text="The master switch: off stops the consolidator and every learning pass. "
        "What is already known is kept and still used.",
    )
    memory_injection = models.BooleanField(
        default=True, help_text="Off keeps learning but stops memory being given to prompts."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "memories"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    memory_max_kb__gte=MEMORY_MAX_KB_RANGE[0],
                    memory_max_kb__lte=MEMORY_MAX_KB_RANGE[1],
                ),
                name="memory_max_kb_in_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def max_bytes(self) -> int:
        return self.memory_max_kb * 1024
