"""``Task``: what a model is asked to do, declared once beside its system prompt and answer class.

    STUDY = llm.Task("study", MODEL_SYSTEM, max_tokens=1500, timeout=120.0, output=StudyAnswer)
    if STUDY.configured(memory):
        answer = STUDY.complete(prompt, memory=memory)

A task's name is its route's (``brain.llm.routing``: the settings page lists every one, with
the words a person reads), so declaring a task the page does not list fails at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import pydantic

from brain.llm import gateway, routing


@dataclass(frozen=True)
class Task[T: pydantic.BaseModel]:
    """One kind of model call: its route's name, the system prompt, the most it may write, the
    seconds it may take and the class its answer must be (none: plain text). ``cheap`` asks the
    small model. A call may ask for less time or fewer tokens than declared (a deadline's rest,
    a document's size); everything else is the task's."""

    name: str
    system: str
    max_tokens: int
    timeout: float
    output: type[T] | None = None
    cheap: bool = False

    def __post_init__(self) -> None:
        if self.name not in dict(routing.TASKS):
            raise ValueError(
                f"Model task {self.name!r} is not one brain.llm.routing.TASKS lists, so no "
                "route could be set for it on the settings page."
            )

    def configured(self, memory) -> bool:
        """Whether ``memory``'s route for this task has a model (``llm.configured``)."""
        return gateway.configured(memory, self.name)

    def complete(
        self,
        prompt: str,
        *,
        memory,
        timeout: float | None = None,
        max_tokens: int | None = None,
    ) -> gateway.Answer[T]:
        """Ask the model for ``memory`` (``llm.complete``), within ``timeout`` seconds and
        ``max_tokens`` when given, else the task's own."""
        return gateway.complete(
            task=self.name,
            system=self.system,
            prompt=prompt,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            timeout=self.timeout if timeout is None else timeout,
            output=self.output,
            cheap=self.cheap,
            memory=memory,
        )
