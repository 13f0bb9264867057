"""Every URL brain serves, read from the URL resolver, so a new endpoint is tested without
anyone listing it: the bad-input tests and the fuzz suite walk these."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

# Routes left out, each with its reason.
SKIPPED = {
    # Django's own admin site: staff only, its forms and validation are Django's, not ours.
    "admin/": "Django's admin",
    # Signing out ends the session every other request is made in.
    "logout/": "ends the session",
    # The OpenAPI schema is generated from the code; it reads no input, and takes a second
    # per request to build.
    "api/schema/": "generated from the code, reads no input",
}
WRITE_METHODS = ("post", "put", "patch", "delete")


@dataclass(frozen=True)
class Route:
    path: str  # as written in urls.py: "api/facts/<int:pk>/outcome"
    name: str  # "knowledge-api:outcome"
    api: bool  # a DRF view: answers JSON
    methods: tuple[str, ...]  # lower case

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(
            part.split(":")[-1].rstrip(">")
            for part in self.path.replace(">", ">/").split("/")
            if part.startswith("<")
        )

    def url(self, **values: int) -> str:
        """The path with each ``<int:name>`` filled from ``values``."""
        path = self.path
        for name in self.params:
            path = path.replace(f"<int:{name}>", str(values[name]))
        return "/" + path

    @property
    def writes(self) -> tuple[str, ...]:
        return tuple(method for method in self.methods if method in WRITE_METHODS)


def _walk(patterns, prefix: str = "", namespace: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if any(route.startswith(skipped) for skipped in SKIPPED):
            continue
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, route, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern):
            view_class = getattr(pattern.callback, "cls", None)
            if view_class is not None:  # DRF: the methods the view declares
                methods = tuple(
                    method
                    for method in ("get", "post", "put", "patch", "delete")
                    if hasattr(view_class, method)
                )
            else:  # a Django function view: its decorators do not say, so try both
                methods = ("get", "post")
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            yield Route(path=route, name=name, api=view_class is not None, methods=methods)


def routes() -> list[Route]:
    return list(_walk(get_resolver().url_patterns))


def api_routes() -> list[Route]:
    return [route for route in routes() if route.api]


def json_write_routes() -> list[tuple[Route, str]]:
    """(route, method) for every API method that may carry a JSON body."""
    return [(route, method) for route in api_routes() for method in route.writes]
