"""``{% load fact_counts %}``: how many of the facts an admin list holds are in use, counted as
``memory.counts`` counts facts known (the House page's number), so the two never disagree."""

from django import template

register = template.Library()


@register.simple_tag
def facts_in_use(queryset, every: int) -> dict:
    """``queryset``: the admin list's facts, already narrowed to what its reader may read and
    filtered; ``every``: how many it holds (the list counted them already)."""
    in_use = queryset.live().count()
    return {"in_use": in_use, "no_longer_used": every - in_use}
