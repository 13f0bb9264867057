"""The platform's app, and Django's admin as brain loads it.

What a start loads is what every terminal command pays for before it reads a row, so neither
is loaded at start-up where it is not needed:

- The admin's modules (every app's ``admin.py``, and the actions they import) are found when
  the URLs load (``brain/urls.py``) or the system checks run (``discover_admin``), not in
  ``ready()``: Django's own AdminConfig imports them all at every start (0.35-0.6 s of a
  2-core machine's ``django.setup()``), and no command reads the admin.
- The Celery app (``brain.celery``, ~0.25 s of imports) is loaded by what sends a task
  (``send_on_commit`` imports it), by the worker and beat (``celery -A brain``), with the URLs
  (a request's ``task.delay()`` binds to it), and by a web process as it starts serving, so
  that its first request does not wait for it. A terminal command sends by name
  (``send_on_commit``): a ``@shared_task`` called before the app exists would go to Celery's
  default app and its default broker.
"""

from django.apps import AppConfig
from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "brain platform"

    def ready(self) -> None:
        from brain.serving import serving_started

        serving_started.connect(_load_celery, dispatch_uid="brain.celery")


def _load_celery(**kwargs) -> None:
    import brain.celery  # noqa: F401  the app every @shared_task of the process binds to


class AdminConfig(SimpleAdminConfig):
    """Django's admin, its registrations found when they are needed (``discover_admin``)."""

    def ready(self) -> None:
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(_check_admin_app, checks.Tags.admin)


def _check_admin_app(app_configs, **kwargs):
    """Django's check of every registered ModelAdmin, once they are all registered."""
    discover_admin()
    return check_admin_app(app_configs, **kwargs)


def discover_admin() -> None:
    """Import every app's ``admin.py`` (safe to call twice) and name the site."""
    from django.contrib import admin

    admin.autodiscover()
    admin.site.site_header = "brain administration"
    admin.site.site_title = "brain admin"
    admin.site.index_title = "What brain keeps"
