"""``{% load words %}``: the plain words of ``brain.words`` as template filters."""

from django import template

from brain import words

register = template.Library()


@register.filter
def quoted(text) -> str:
    """``{{ fact.text|quoted }}``: in curly quotes once, never doubled."""
    return words.quoted(text)


@register.filter
def unnested(text) -> str:
    """``{{ change.summary|unnested }}``: a quotation inside a quotation in single quotes."""
    return words.unnested(text)


@register.filter
def sentence(text) -> str:
    return words.sentence(text)


@register.filter
def sureness(value) -> str:
    """``{{ fact.confidence|sureness }}``: "sure", "probably" or "not sure"."""
    return words.confidence(value)
