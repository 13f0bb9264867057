from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string
from django_htmx.middleware import HtmxDetails


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
    tabs = []
    for label, url_name, staff_only, badge, *place in settings.BRAIN_NAVIGATION:
        if staff_only and not request.user.is_staff:
            continue
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        count = import_string(badge)(request) if badge else 0
        tabs.append(
            {
                "label": label,
                "url": url,
                "current": False,
                "badge": count,
                "staff_only": staff_only,
                "operator": place == ["operator"],
            }
        )
    matching = [tab for tab in tabs if _under(request.path, tab["url"])]
    if matching:
        max(matching, key=lambda tab: len(tab["url"]))["current"] = True
    return {"navigation": tabs}


def _under(path: str, url: str) -> bool:
    return path == url or (url != "/" and path.startswith(url))
