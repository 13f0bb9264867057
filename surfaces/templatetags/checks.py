"""``{% load checks %}``: house checks and rules named in words (``review.check_names``)."""

from django import template

from review import check_names

register = template.Library()


@register.filter
def check_name(check_id: str) -> str:
    """``{{ finding.check_id|check_name }}``: "Water leak", never ``water_leak``."""
    return check_names.name_of(check_id)


@register.filter
def rule_words(rule) -> str:
    return check_names.rule_words(rule)
