"""``{% load words %}``: the plain words of ``brain.words`` as template filters.

- ``{{ fact.text|quoted }}``: in curly quotes once, never doubled.
- ``{{ change.summary|unnested }}``: a quotation inside a quotation in single quotes.
- ``{{ text|sentence }}``: a full stop added only when it has none of its own.
- ``{{ fact.confidence|sureness }}``: "sure", "probably" or "not sure".
"""

from django import template

from brain import words

register = template.Library()
register.filter("quoted", words.quoted)
register.filter("unnested", words.unnested)
register.filter("sentence", words.sentence)
register.filter("sureness", words.confidence)
