"""Two subjects that are one thing, merged, with everything that waits on a person following.

``knowledge.actions.merge_subjects`` moves the facts and nicknames; this app's rows point at
subjects too, so they move first, in the same transaction: findings, rules (about the subject,
and about everything in it as a room), guesses, and judgements — which are arithmetic over the
findings, so the merged subject's are withdrawn (their facts forgotten) and the kept subject's
are worked out again over the findings both now share.
"""

from __future__ import annotations

import dataclasses

from django.db import transaction

from brain.db.retry import retry_transaction
from knowledge import actions as knowledge_actions
from knowledge.models import Subject
from review import judgements
from review.models import Finding, Guess, Judgement, Rule

MERGED_AWAY = "its subject was merged into another"


@retry_transaction
def merge_subjects(*, keep: Subject, merged: Subject) -> knowledge_actions.SubjectsMerged:
    """``merged`` is ``keep``: every row that points at it points at ``keep``, then the facts
    and nicknames follow (``knowledge.actions.merge_subjects``, which deletes ``merged``).
    Raises ``knowledge.actions.CannotMerge`` (one subject twice, or two memories)."""
    if keep.pk == merged.pk or keep.memory_id != merged.memory_id:
        return knowledge_actions.merge_subjects(keep=keep, merged=merged)  # it says why
    with transaction.atomic():
        moving = Finding.objects.filter(subject=merged)
        checks = set(moving.values_list("check_id", flat=True))
        moving.update(subject=keep)
        rules = Rule.objects.filter(subject=merged).update(subject=keep)
        Rule.objects.filter(room=merged).update(room=keep)
        Guess.objects.filter(subject=merged).update(subject=keep)
        withdrawn = list(Judgement.objects.filter(subject=merged).select_related("fact"))
        for judgement in withdrawn:
            if judgement.fact is not None:
                knowledge_actions.forget_fact(fact=judgement.fact, reason=MERGED_AWAY)
        Judgement.objects.filter(pk__in=[j.pk for j in withdrawn]).delete()
        merged_subjects = knowledge_actions.merge_subjects(keep=keep, merged=merged)
        for check_id in sorted(checks):
            judgements.recount(memory=keep.memory, check_id=check_id, subject=keep)
    return dataclasses.replace(merged_subjects, rules=rules)
