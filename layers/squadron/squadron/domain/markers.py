"""The framework's hidden markers, and agents' text made unable to carry one — pure.

What the App writes on GitHub counts as the framework's own, and a few hidden HTML comments in
it steer the framework: a keyed effect's marker (``<!-- squadron:effect KEY -->``) says an effect
was done (found on a retry, it is not done again), the dashboard's marker names the dashboard
issue, ``act`` and ``remember`` markers are a dashboard's boxes, ``memory`` markers list the facts
a merge confirms, ``config-notice`` markers the configuration notice. Every one of them opens with
``<!--``.

An agent's words reach GitHub as the App too (its comments, issues, pull requests, reviews, and
the router's escalations, needs-human and blocker issues, retrospectives quoting them). So text
of agent origin goes through :func:`inert` before it is posted: every ``<!--`` in it is written
``&lt;!--``, which GitHub shows as the characters ``<!--`` and which no marker's pattern matches.
Escaping (rather than removing markers) leaves no way to reassemble one: removal in one pass turns
``<!-- squadron:<!-- squadron:x -->effect K -->`` into a complete marker, and an unclosed
``<!--`` left in an agent's text would join the framework's own text that follows it. It also
keeps an agent from hiding words from the people who read what it wrote. The price: an HTML
comment an agent quotes in a code block shows as ``&lt;!--`` there.
"""

from __future__ import annotations

import re
from typing import Final

#: What opens every hidden marker (an HTML comment).
OPENER: Final = "<!--"
#: How an agent's ``<!--`` is written (GitHub shows it as ``<!--``; it opens no comment).
ESCAPED: Final = "&lt;!--"
#: Any of the framework's hidden markers, however spelled (``<!-- squadron:effect|dashboard|...``).
FRAMEWORK_MARKER: Final = re.compile(r"<!--\s*squadron:.*?-->", re.IGNORECASE | re.DOTALL)


def inert(text: str) -> str:
    """``text`` (of agent origin, to be posted as the App) unable to carry a hidden marker, alone
    or next to any other text: no ``<!--`` is left in it (each one is escaped)."""
    return text.replace(OPENER, ESCAPED)


def has_framework_marker(text: str) -> bool:
    """Whether ``text`` carries anything shaped like one of the framework's markers."""
    return FRAMEWORK_MARKER.search(text) is not None
