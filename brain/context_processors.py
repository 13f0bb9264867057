from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string
from django_htmx.middleware import HtmxDetails


@dataclass
class Tab:
    label: str
    url: str
    badge: int
    staff_only: bool
    operator: bool  # Settings, Admin: offered apart from the household's tabs
    current: bool = False


def navigation(request: HttpRequest) -> dict:
    """The app's tabs, from settings.BRAIN_NAVIGATION; a tab whose app is not installed is left out.

    Each entry is (label, URL name, staff only, badge counter[, place]): the household's tabs
    first, then the operator's (place "operator": Settings, Admin), which a page offers only to
    those who administer the memory (``may.administer``) or, for the admin site, to staff.
    One tab is current: the one whose address is the longest start of the page's, so a page
    under /sources/ that is a tab of its own is not also Sources.

    Lower apps never link up to higher ones in code: the list lives in settings.
    """
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"navigation": []}
    htmx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
    if htmx and not htmx.boosted:
        # A fragment has no header: spare the polling banners the badge's counting.
        return {"navigation": []}
    tabs: list[Tab] = []
    for entry in settings.BRAIN_NAVIGATION:
        label, url_name, staff_only, badge = (
            str(entry[0]),
            str(entry[1]),
            bool(entry[2]),
            entry[3],
        )
        if staff_only and not request.user.is_staff:
            continue
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        count = import_string(str(badge))(request) if badge else 0
        operator = len(entry) > 4 and entry[4] == "operator"
        tabs.append(Tab(label, url, count, staff_only, operator))
    matching = [tab for tab in tabs if _under(request.path, tab.url)]
    if matching:
        max(matching, key=lambda tab: len(tab.url)).current = True
    return {"navigation": tabs}


def _under(path: str, url: str) -> bool:
    return path == url or (url != "/" and path.startswith(url))
