"""Composers fold queued candidates into the memory document; ``get_composer`` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.composers.base import Composer


def get_composer() -> Composer:
    """Claude when the LLM gateway is configured (ANTHROPIC_API_KEY), else the offline rules.

    Imports are lazy: this package is imported whenever ``memory.composers.base`` is, which
    happens while Django loads models, before the gateway (which needs the models) can load.
    """
    from brain import llm

    if llm.configured():
        from memory.composers.claude import ClaudeComposer

        return ClaudeComposer()
    from memory.composers.offline import OfflineComposer

    return OfflineComposer()
