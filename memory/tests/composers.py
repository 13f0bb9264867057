"""A composer whose answers a test scripts: each answer is a Composition, a callable taking the
request's fields as keyword arguments, another composer to ask, or an exception to raise."""

from __future__ import annotations

from memory.composers.base import Composition, Request


class ScriptedComposer:
    name = "scripted"

    def __init__(self, answers: list):
        self.answers = answers
        self.requests: list[Request] = []

    def compose(self, request: Request, *, timeout: float | None = None) -> Composition:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if hasattr(answer, "compose"):
            return answer.compose(request, timeout=timeout)
        if callable(answer):
            return answer(**vars(request))
        return answer
