"""The kill switches of a memory, read in one place.

- ``learning`` (the master switch). Off stops everything that would add to memory on its own or
  from what people say in passing: the reflection pass over conversations, what the chat and
  the ask bar teach, study sessions, insight runs and the consolidator. What is already known is
  kept and still used: recall, the document, the facts list and answers are untouched.
- ``memory_injection``. Off keeps learning but stops memory being given to prompts
  (``knowledge.retrieval.context`` and the voice distillate read it).

Every learning path asks ``require_learning`` (or ``learning_on`` in background work, which
skips quietly), which reads the switch from the database, so a switch turned off a moment ago
stops a worker that loaded the memory before it.
"""

from __future__ import annotations

from brain.errors import StateConflict
from knowledge.models import Memory


class LearningOff(StateConflict):
    """Learning is switched off for this memory: nothing new is learned or filed."""

    def __init__(self, memory: Memory):
        super().__init__(
            f"Learning is switched off for {memory.name}: nothing is filed until it is back on."
        )


def learning_on(memory: Memory) -> bool:
    """The master switch as it is now in the database (False for a memory that is gone)."""
    return Memory.objects.filter(pk=memory.pk, learning=True).exists()


def require_learning(memory: Memory) -> None:
    """Raise LearningOff (a StateConflict: a 409, a toast, one line) when learning is off."""
    if not learning_on(memory):
        raise LearningOff(memory)
