from django.apps import AppConfig


class BrainConfig(AppConfig):
    name = "brain"
    verbose_name = "brain platform"

    def ready(self) -> None:
        from django.contrib import admin

        import brain.celery  # noqa: F401  the Celery app every @shared_task binds to

        admin.site.site_header = "brain administration"
        admin.site.site_title = "brain admin"
        admin.site.index_title = "What brain keeps"
