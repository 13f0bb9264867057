"""Structured output: ask for one JSON object, then accept only what validates.

Provider-neutral on purpose (plain prompting, no vendor "JSON mode"), so a local model behind
the same gateway is held to the same contract.
"""

from __future__ import annotations

import json
import re

import pydantic

from brain.llm.errors import LLMInvalidOutput, one_line

# A fenced block on lines of its own. JSON keeps every string on one line (newlines are
# escaped), so a fence inside the document text cannot be mistaken for this one.
_FENCED = re.compile(r"^```[a-zA-Z]*[ \t]*\n(?P<body>.*?)\n```[ \t]*$", re.DOTALL | re.MULTILINE)


def instruction(output: type[pydantic.BaseModel]) -> str:
    """The paragraph appended to the system prompt when ``output`` is asked for."""
    schema = json.dumps(output.model_json_schema(), separators=(",", ":"))
    return (
        "Answer with exactly one JSON object and nothing else: no prose before or after it and "
        f"no code fence. It must validate against this JSON Schema:\n{schema}"
    )


def parse[T: pydantic.BaseModel](text: str, output: type[T], *, stop_reason: str | None) -> T:
    """``text`` as an ``output`` instance; LLMInvalidOutput naming what was wrong otherwise.

    Accepts a bare object, or one wrapped in a ```json fence (with or without prose around it).
    """
    if stop_reason == "max_tokens":
        raise LLMInvalidOutput("The answer was cut off at max_tokens before it was complete.")
    body = _unfence(text.strip())
    if not body:
        raise LLMInvalidOutput(f"The answer was empty (stop reason: {stop_reason or 'none'}).")
    try:
        return output.model_validate_json(body)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise LLMInvalidOutput(
                f"The answer is not JSON; its last line: {one_line(text, limit=160)!r}"
            ) from error
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise LLMInvalidOutput(
            f"The answer does not match {output.__name__}: {where}: {first['msg']}"
        ) from error


def unfence(text: str) -> str:
    """The JSON object inside ``text``: itself when bare, else the body of its fenced block."""
    return _unfence(text)


def _unfence(text: str) -> str:
    if text.startswith("{"):
        return text
    match = _FENCED.search(text)
    return match.group("body").strip() if match else text
