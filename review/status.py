"""What Home Assistant would show as sensors, read in one place for the API and the push.

Computed for a reader: the status API's for the person asking (how many facts *they* may read,
the last one *they* may read), the push's for the household (``knowledge.visibility.household``:
what every member of the memory reads), since Home Assistant's screens are shared."""

from __future__ import annotations

from knowledge.models import Memory
from memory import counts as facts
from review.models import Finding, Guess, Severity


def sensors(memory: Memory, *, reader) -> dict:
    """The sensors' states, counted as every page counts them (``review.counts``)."""
    guesses = list(Guess.objects.for_memory(memory).open().order_by("offered_at", "pk"))
    live = facts.facts(memory, reader).live()
    last = live.order_by("-created_at", "-pk").first()
    findings = list(Finding.objects.for_memory(memory).open().in_review_order())
    split = {level: sum(1 for f in findings if f.severity == level) for level in Severity.values}
    return {
        "memory_waiting_on_you": {
            "state": "on" if guesses else "off",
            "attributes": {"guesses": [{"id": g.pk, "question": g.question} for g in guesses]},
        },
        "memory_facts_learned": {"state": facts.known(memory, reader), "attributes": {}},
        "memory_last_learned": {
            "state": last.created_at.isoformat() if last else None,
            "attributes": {"text": last.text if last else None, "id": last.pk if last else None},
        },
        "findings_open_findings": {
            "state": len(findings),
            "attributes": {
                "severity": split,
                "findings": [
                    {"id": f.pk, "severity": f.severity, "text": f.text} for f in findings
                ],
            },
        },
    }
