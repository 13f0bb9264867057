from django.apps import AppConfig


class SurfacesConfig(AppConfig):
    name = "surfaces"

    def ready(self) -> None:
        from memory import measurements
        from review import counts

        # The Knowledge tab (memory) shows counts the review app keeps, which it may not import.
        measurements.count_with(open_guesses=counts.open_guesses, rules=counts.rules)
