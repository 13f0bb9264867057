"""brain's LLM gateway: every model call in the project goes through ``complete``.

    from brain import llm
    answer = llm.complete(task="consolidate", system=..., prompt=..., max_tokens=8000,
                          timeout=seconds_left, output=MyPydanticModel, memory=memory)
    if llm.configured(memory, "consolidate"): ...

Nothing outside ``brain.llm.anthropic_api`` imports a provider SDK.
"""

from brain.llm.errors import LLMError, LLMInvalidOutput, LLMTimeout, LLMUnavailable
from brain.llm.gateway import Answer, complete, configured, embed, provider_name
from brain.llm.waiting import reporting

__all__ = [
    "Answer",
    "LLMError",
    "LLMInvalidOutput",
    "LLMTimeout",
    "LLMUnavailable",
    "complete",
    "configured",
    "embed",
    "provider_name",
    "reporting",
]
