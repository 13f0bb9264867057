"""Secrets never become memory: a password, a key or a token in a fact is refused on arrival.

Memory is replayed into prompts for ever, so a secret stored once would leak every time.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

_PATTERNS = [
    (
        re.compile(r"\b(password|passcode|passwd|wi-?fi key)\b\s*(is|=|:|was)\s*\S+", re.I),
        "a password",
    ),
    # A PIN or a code is a secret when its digits come with it: "the hinge pin is loose" is not.
    (
        re.compile(
            r"\b(pin|alarm code|door code|gate code|safe code)\b\s*(is|=|:|was)?\s*\d{3,}", re.I
        ),
        "a PIN or code",
    ),
    (
        re.compile(r"\b(api[ _-]?key|secret|token|bearer)\b\s*(is|=|:)\s*\S{6,}", re.IGNORECASE),
        "a key or token",
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "an API key"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}"), "a token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"\b(?:\d[ -]?){13,19}\b"), "a card number"),
]


def secret_in(text: str) -> str | None:
    """What kind of secret ``text`` seems to hold ("a password or code"), or None."""
    for pattern, what in _PATTERNS:
        if pattern.search(text):
            return what
    return None


def refuse_secrets(text: str) -> None:
    """ValidationError when ``text`` seems to hold a secret, in the one set of words every
    refusal of one uses: a statement taught, an episode or a procedure recorded, the ask bar's
    teaching turn, a fact edited — each before anything is written."""
    secret = secret_in(text)
    if secret:
        raise ValidationError(
            f"That looks like {secret}. brain does not keep secrets: memory is replayed into "
            "prompts, so a secret stored once would be repeated for ever."
        )
