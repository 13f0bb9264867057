"""The kill switches of a memory, read in one place.

- ``learning`` (the master switch). Off stops everything that would add to memory on its own or
  from what people say in passing: the reflection pass over conversations, what the chat and
  the ask bar teach, compiling sources, study sessions, insight runs, bulk adds and the
  consolidator, and every path of an agent's memory — ``memory_write``, episodes, its own
  distillation (``memory_distil``) and the sleep pass with its decay and pruning (``learn``
  refuses a statement distilled from episodes; ``agent.actions`` asks before recording or
  distilling). A line a person types or adds at the terminal waits in the queue, unfiled. What
  is already known is kept and still used: recall, the document, the facts list and answers
  are untouched.
- ``memory_injection``. Off keeps learning but stops memory being given to prompts
  (``knowledge.retrieval.context`` and the voice distillate read it).

Both are set on the Knowledge tab (``set_switches``, administer: a memory's settings) and in the
admin. Every learning path asks ``require_learning`` (or ``learning_on`` in background work, which
skips quietly), which reads the switch from the database, so a switch turned off a moment ago
stops a worker that loaded the memory before it.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Switched:
    """The switches as they are now, and what that means, in words."""

    memory: Memory
    changed: tuple[str, ...]

    @property
    def message(self) -> str:
        if not self.changed:
            return "Nothing changed."
        learning = (
            "Learning is on: brain learns from conversations, the chat, study and insight runs, "
            "and files the queue."
            if self.memory.learning
            else "Learning is off: nothing new is learned or filed (no reflection, chat teaching, "
            "study, insight runs or filing); what is already known is still used."
        )
        injection = (
            "Memory is given to prompts."
            if self.memory.memory_injection
            else "Memory is not given to prompts (recall and the voice distillate are empty); "
            "learning goes on as the other switch says."
        )
        said = [learning] if "learning" in self.changed else []
        said += [injection] if "memory_injection" in self.changed else []
        return " ".join(said)


def set_switches(*, memory: Memory, learning: bool, memory_injection: bool, by=None) -> Switched:
    """Set both kill switches of ``memory`` (administer, as every memory setting). Only what
    changed is written; a pass or a run already going stops at its next look at the switch."""
    changed = tuple(
        name
        for name, value in (("learning", learning), ("memory_injection", memory_injection))
        if getattr(memory, name) != value
    )
    if changed:
        memory.learning, memory.memory_injection = learning, memory_injection
        memory.save(update_fields=list(changed))
    return Switched(memory, changed)
