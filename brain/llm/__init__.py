"""brain's LLM gateway: every model call in the project goes through ``complete``.

A model task is declared once, beside its system prompt and answer class (``Task``):

    CONSOLIDATE = llm.Task("consolidate", SYSTEM, max_tokens=8000, timeout=480.0,
                           output=MyPydanticModel)
    if CONSOLIDATE.configured(memory):
        answer = CONSOLIDATE.complete(prompt, memory=memory, timeout=seconds_left)

``llm.complete(task=..., system=..., prompt=..., ...)`` is the call a ``Task`` makes.

Nothing outside ``brain.llm.anthropic_api`` imports a provider SDK.
"""

from brain.llm.errors import LLMError, LLMInvalidOutput, LLMTimeout, LLMUnavailable
from brain.llm.gateway import Answer, complete, configured, embed, provider_name
from brain.llm.tasks import Task
from brain.llm.waiting import reporting

__all__ = [
    "Answer",
    "LLMError",
    "LLMInvalidOutput",
    "LLMTimeout",
    "LLMUnavailable",
    "Task",
    "complete",
    "configured",
    "embed",
    "provider_name",
    "reporting",
]
