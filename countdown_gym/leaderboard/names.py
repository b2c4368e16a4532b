"""One rule for agent names on the leaderboard: what a name shows as (:func:`display_name`), and when two names are
one agent: equal :func:`agent_key` (the UTS #39 confusable skeleton, ``disarm.skeleton_key`` with ``tr39`` digits, of
the NFKC-case-folded display name: ``"Exhaustive-Solver "``, ``"ｅxhaustive-solver"`` and Cyrillic
``"еxhaustive-sоlver"`` are all ``exhaustive-solver``) or equal :func:`look_alike_key` (a capital ``I`` for ``l``).
A name that shows as nothing has an empty key and is refused.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Any

from disarm import skeleton_key

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
"""Control characters: C0 (line breaks, ANSI escapes), DEL, C1 (U+0085 ...), the line and paragraph separators."""

INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
"""Characters that display as nothing: Unicode's default-ignorable code points (zero-width spaces and joiners,
bidirectional controls such as U+202E, variation selectors, the soft hyphen, fillers, tags) and the Braille blank."""


def visible_text(text: str) -> str:
    """``text`` without invisible characters (:data:`INVISIBLE` and any other format character, Cf)."""
    text = INVISIBLE.sub("", text)
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def plain_text(text: Any, limit: int | None = None) -> str:
    """Untrusted text for one line of a table or a terminal: control characters (:data:`CONTROL`) as spaces,
    invisible ones (:func:`visible_text`) dropped, stripped, cut to ``limit`` characters with ``...``."""
    s = visible_text(CONTROL.sub(" ", str(text).encode("utf-8", "replace").decode("utf-8"))).strip()
    return s if limit is None or len(s) <= limit else s[: limit - 3] + "..."


SILENT_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]+")
"""The control characters that are not whitespace (NUL, ESC, DEL, most of C1): dropped from a name."""


def _without_bare_marks(word: str) -> str:
    """``word`` without the combining marks (Mn, Me) it starts with: with no base character they show as nothing
    (or a dotted circle), so ``"a \u0301"`` is ``"a"`` and ``"\u0301"`` alone is empty."""
    return "".join(itertools.dropwhile(lambda c: unicodedata.category(c) in ("Mn", "Me"), word))


def display_name(name: Any) -> str:
    """An agent name as the board shows it: control characters that are not whitespace dropped, then
    :func:`plain_text`, runs of whitespace as one space, combining marks with no base character dropped."""
    words = plain_text(SILENT_CONTROL.sub("", str(name))).split()
    if not all(w.isascii() for w in words):
        words = [w for w in map(_without_bare_marks, words) if w]
    return " ".join(words)


def agent_key(name: Any) -> str:
    """The identity of an agent name: the UTS #39 skeleton of its case-folded :func:`display_name` (module docstring); two
    names with the same key are the same agent, and an empty key is a name that shows as nothing."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", display_name(name)).casefold())
    return skeleton_key(folded, digit_policy="tr39")


def look_alike_key(name: Any) -> str:
    """The skeleton of :func:`display_name` before case folding, which makes a capital ``I`` (like ``l``) an ``i`` and
    a Greek capital eta (like ``H``) an eta (like ``n``)."""
    return skeleton_key(unicodedata.normalize("NFKC", display_name(name)), digit_policy="tr39")
