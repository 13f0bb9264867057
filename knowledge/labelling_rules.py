"""Labelling rules: the labels a new source takes because of who sent it, its channel, its
title or a page it names (``LabellingRule``, stated in the admin by a memory's administrators).

A rule matches a source when every condition it gives holds:

- ``sender``: the username of the person who added it, or for an email its From line or the
  address in it (compared without case);
- ``channel``: the source's kind (a note, a document, an email, a conversation…);
- ``title_words``: every word is in its title (without case);
- ``page``: its text names the page (a name or nickname, as ``knowledge.subjects`` finds them).

Its labels are set on the source as a person's are, so the passages take them and relabelling
keeps them. With no rule matching and no label chosen, a source takes the memory's default
labels, as before.
"""

from __future__ import annotations

import re

from knowledge.models import Label, LabellingRule, Source
from knowledge.subjects import mentioned_in

_FROM = re.compile(r"^From:\s*(.+)$", re.MULTILINE)
_ADDRESS = re.compile(r"[^\s<>\"']+@[^\s<>\"']+")


def _senders(source: Source) -> set[str]:
    """Who sent ``source``, as a rule may name them (folded): the username of the person who
    added it, and for an email its From line whole and the address in it."""
    by = source.added_by
    said = {by.get_username().casefold()} if by is not None else set()
    if source.kind == Source.Kind.EMAIL and (found := _FROM.search(source.text[:2000])):
        line = found.group(1).strip().casefold()
        said |= {line, *_ADDRESS.findall(line)}
    return said


def _sender_matches(rule: LabellingRule, source: Source) -> bool:
    return rule.sender.strip().casefold() in _senders(source)


def _title_matches(rule: LabellingRule, source: Source) -> bool:
    title = source.title.casefold()
    return all(word in title for word in rule.title_words.casefold().split())


def matching(source: Source) -> list[LabellingRule]:
    """The rules of the source's memory that ``source`` matches."""
    rules = list(
        LabellingRule.objects.filter(memory_id=source.memory_id).prefetch_related("labels")
    )
    if not rules:
        return []
    pages = None
    found = []
    for rule in rules:
        if rule.channel and rule.channel != source.kind:
            continue
        if rule.sender.strip() and not _sender_matches(rule, source):
            continue
        if rule.title_words.strip() and not _title_matches(rule, source):
            continue
        if rule.page_id:
            if pages is None:
                pages = {page.pk for page in mentioned_in(source.memory, source.text[:100_000])}
            if rule.page_id not in pages:
                continue
        found.append(rule)
    return found


def labels_for(source: Source) -> list[Label]:
    """The labels the rules that ``source`` matches set, each once, in the order met."""
    labels: list[Label] = []
    for rule in matching(source):
        labels += [label for label in rule.labels.all() if label not in labels]
    return labels
