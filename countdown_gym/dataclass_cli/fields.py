"""The fields of an options dataclass as command-line flags: their names, types and help text.

:func:`flags` flattens nested dataclasses (their fields are flags without a prefix); :func:`field_docs` reads each
field's help from the class source (the docstring under the field, else its trailing comment); :func:`parse_bool`
is the one reading of a boolean value.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_AUTO = ("auto", "none")


def parse_bool(text: str, *, allow_auto: bool = False) -> bool | None:
    """``true/false/yes/no/on/off/1/0`` (any case) -> bool; with ``allow_auto``, ``auto``/``none`` -> None."""
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    if allow_auto and t in _AUTO:
        return None
    raise ValueError(f"expected {'true/false/auto' if allow_auto else 'true/false'}, got {text!r}")


# ---- help text: the docstring under a field, else the comment at the end of its line ----------------------------


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> help text from the class source: the docstring under the field (its lines joined), else its
    trailing comment; a comment on a line of its own (a section heading) is no field's help.

    Base dataclasses are read too (a subclass's text wins). Empty when the source is unavailable.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_class_field_docs(klass))
    return docs


def _class_field_docs(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        tree = ast.parse(source)
        comments = {
            tok.start[0]: tok.string.lstrip("#").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and tok.line[: tok.start[1]].strip()  # trailing, not a whole-line comment
        }
    except (OSError, TypeError, SyntaxError, tokenize.TokenError):
        return {}
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
    docs: dict[str, str] = {}
    for stmt, nxt in zip(body, [*body[1:], None], strict=True):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name = stmt.target.id
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            docs[name] = " ".join(inspect.cleandoc(nxt.value.value).split())
        elif stmt.end_lineno in comments:
            docs[name] = comments[stmt.end_lineno]
    return docs


# ---- the fields of an options class, nested dataclasses flattened -------------------------------------------


@dataclasses.dataclass(frozen=True)
class Flag:
    """One command-line flag: the field it sets (``path``: field names from the options class down) and its type."""

    name: str  # "--field-name"
    path: tuple[str, ...]
    hint: Any
    field: dataclasses.Field


def is_optional(hint: Any) -> tuple[bool, Any]:
    """``(True, X)`` for ``X | None``, else ``(False, hint)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return True, args[0]
    return False, hint


def _nested_class(hint: Any) -> type | None:
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def flags(cls: type) -> list[Flag]:
    """Every flag of the options dataclass ``cls``, fields of nested dataclasses included (without a prefix).

    Raises ``TypeError`` for a class that is not a dataclass or for two fields with one flag name.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    out: dict[str, Flag] = {}

    def walk(klass: type, prefix: tuple[str, ...]) -> None:
        hints = typing.get_type_hints(klass, include_extras=False)
        for f in dataclasses.fields(klass):
            if not f.init:
                continue
            hint = hints.get(f.name, f.type)
            nested = _nested_class(hint)
            if nested is not None:
                walk(nested, (*prefix, f.name))
                continue
            name = "--" + f.name.replace("_", "-")
            if name in out:
                raise TypeError(f"{cls.__name__}: {'.'.join((*prefix, f.name))} and {'.'.join(out[name].path)} "
                                f"are both {name}")
            out[name] = Flag(name, (*prefix, f.name), hint, f)

    walk(cls, ())
    return list(out.values())




def flag_kind(flag: Flag) -> str:
    """How the command line spells ``flag``: ``bool``, ``auto-bool`` (``bool | None``), ``sequence`` or ``value``."""
    optional, hint = is_optional(flag.hint)
    if hint is bool:
        return "auto-bool" if optional else "bool"
    origin = typing.get_origin(hint)
    if hint in (tuple, list) or origin in (tuple, list):
        return "sequence"
    return "value"
