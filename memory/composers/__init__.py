"""Composers fold queued candidates into the memory document; ``get_composer`` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.composers.base import Composer


def get_composer(memory=None) -> Composer:
    """The model when the gateway has one for ``memory``'s task "consolidate" (Anthropic with
    ANTHROPIC_API_KEY, or a worker), else the offline rules.

    Imports are lazy: this package is imported whenever ``memory.composers.base`` is, which
    happens while Django loads models, before the gateway (which needs the models) can load.
    """
    from brain import llm
    from memory.composers.claude import CONSOLIDATE, ClaudeComposer

    if CONSOLIDATE.configured(memory):
        return ClaudeComposer(memory=memory, name=llm.provider_name(memory, CONSOLIDATE.name))
    from memory.composers.offline import OfflineComposer

    return OfflineComposer()
