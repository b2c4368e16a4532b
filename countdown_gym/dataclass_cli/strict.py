"""Strict JSON for untrusted text (RFC 8259), the one reader of every flag, row, request and submission line:
``NaN`` / ``Infinity`` (or a number too large for a float, ``1e999``), a key twice in one object (``json`` alone
keeps the last silently) and nesting past the parser's depth are each a ``ValueError`` naming it, never a value
read last-wins nor a ``RecursionError``."""

from __future__ import annotations

import json
import math
from typing import Any


def _constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def _finite(text: str) -> float:
    if not math.isfinite(value := float(text)):
        raise ValueError(f"number {text[:40]} is too large for a float (JSON numbers must be finite)")
    return value


class _KeyTwice(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyTwice(f"key {key[:40]!r} appears twice in one object")
            seen.add(key)
    return out


def _keys(value: Any) -> int:
    """How many keys the objects in the parsed JSON ``value`` hold, all levels together."""
    count, stack = 0, [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            count += len(v)
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return count


def duplicate_key(text: str | bytes, value: Any = None) -> str | None:
    """``key 'k' appears twice in one object`` when the JSON ``text`` (``value``: what it parses to) has a key twice
    in one object, else None (also for text that is not JSON). Cheap when no key is twice: every key has one colon
    after it, so no more colons than parsed keys proves it; otherwise the text is parsed again pair by pair."""
    colons = text.count(b":" if isinstance(text, bytes) else ":")
    if colons < 2:  # a key twice needs two keys
        return None
    try:
        if value is None:
            value = json.loads(text)
        if colons <= _keys(value):
            return None
        json.loads(text, object_pairs_hook=_unique, parse_int=str, parse_float=str, parse_constant=str)
    except _KeyTwice as exc:
        return str(exc)
    except (ValueError, RecursionError):  # not JSON: the caller's parser says why
        return None
    return None


def strict_json(text: str | bytes) -> Any:
    """``json.loads`` of untrusted ``text`` refusing what RFC 8259 does not allow (see the module); a
    ``json.JSONDecodeError`` for text that is not JSON at all."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if problem := duplicate_key(text, value):
        raise ValueError(problem)
    return value
