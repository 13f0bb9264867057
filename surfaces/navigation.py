"""The tabs in the page header, a context processor (settings.TEMPLATES)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django_htmx.middleware import HtmxDetails

from review import counts as review_counts


@dataclass(frozen=True)
class Entry:
    label: str
    url_name: str
    staff_only: bool = False
    badge: Callable[[HttpRequest], int] | None = None
    operator: bool = False  # Settings, Admin: offered apart from the household's tabs


# The household's tabs, then the operator's (offered to those who administer the memory; the
# admin site to staff).
TABS = (
    Entry("House", "home"),
    Entry("Knowledge", "memory:knowledge"),
    Entry("Findings", "review:findings", badge=review_counts.badge),
    Entry("Sources", "knowledge:sources"),
    Entry("Pages", "knowledge:pages"),
    Entry("Settings", "settings:page", operator=True),
    Entry("Admin", "admin:index", staff_only=True, operator=True),
)


@dataclass
class Tab:
    label: str
    url: str
    badge: int
    staff_only: bool
    operator: bool  # Settings, Admin: offered apart from the household's tabs
    current: bool = False


def navigation(request: HttpRequest) -> dict:
    """The app's tabs (``TABS``); a tab whose address does not exist is left out.

    The operator's tabs (Settings, Admin) a page offers only to those who administer the memory
    (``may.administer``) or, for the admin site, to staff. One tab is current: the one whose
    address is the longest start of the page's, so a page under /sources/ that is a tab of its
    own is not also Sources.
    """
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"navigation": []}
    htmx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
    if htmx and not htmx.boosted:
        # A fragment has no header: spare the polling banners the badge's counting.
        return {"navigation": []}
    tabs: list[Tab] = []
    for entry in TABS:
        if entry.staff_only and not request.user.is_staff:
            continue
        try:
            url = reverse(entry.url_name)
        except NoReverseMatch:
            continue
        count = entry.badge(request) if entry.badge else 0
        tabs.append(Tab(entry.label, url, count, entry.staff_only, entry.operator))
    matching = [tab for tab in tabs if _under(request.path, tab.url)]
    if matching:
        max(matching, key=lambda tab: len(tab.url)).current = True
    return {"navigation": tabs}


def _under(path: str, url: str) -> bool:
    return path == url or (url != "/" and path.startswith(url))
