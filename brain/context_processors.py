from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.module_loading import import_string
from django_htmx.middleware import HtmxDetails


def navigation(request: HttpRequest) -> dict:
    """The app's tabs, from settings.BRAIN_NAVIGATION; a tab whose app is not installed is left out.

    Lower apps never link up to higher ones in code: the list lives in settings.
    """
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"navigation": []}
    htmx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
    if htmx and not htmx.boosted:
        # A fragment has no header: spare the polling banners the badge's counting.
        return {"navigation": []}
    tabs = []
    for label, url_name, staff_only, badge in settings.BRAIN_NAVIGATION:
        if staff_only and not request.user.is_staff:
            continue
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        current = request.path == url or (url != "/" and request.path.startswith(url))
        count = import_string(badge)(request) if badge else 0
        tabs.append({"label": label, "url": url, "current": current, "badge": count})
    return {"navigation": tabs}
