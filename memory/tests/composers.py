"""A composer whose answers a test scripts: each answer is a Composition, a callable taking the
compose() keyword arguments, or an exception to raise."""

from __future__ import annotations

from memory.composers.base import Composition


class ScriptedComposer:
    name = "scripted"

    def __init__(self, answers: list):
        self.answers = answers
        self.calls: list[dict] = []

    def compose(self, **kwargs) -> Composition:
        self.calls.append(kwargs)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(**kwargs)
        return answer
