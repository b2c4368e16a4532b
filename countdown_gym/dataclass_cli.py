"""One flag per dataclass field: the command line of every script that takes an options dataclass.

    opts = parse(Options)                      # sys.argv[1:]
    parser = build_parser(Options)             # the argparse parser itself (``--help``, tests)
    argv = to_argv(opts)                       # the flags that rebuild ``opts`` (non-default fields)
    changed_options(saved, opts, allowed)      # ["--lr 0.001 (now 0.01)"]: what a --resume would change

Flags are ``--field-name`` (``--field_name`` is accepted too). The help text of a flag is the
attribute docstring under the field (or, without one, the comment at the end of the field's line)
followed by its default; the class docstring is the description unless one is given. Values:

* ``bool``: ``--flag``, ``--no-flag`` or ``--flag true|false|yes|no|on|off|1|0``;
  ``bool | None`` also takes ``--flag auto`` (None);
* ``int``, ``float`` (finite: ``nan`` / ``inf`` are errors), ``str`` (and any other class that takes one string);
* ``tuple[int, ...]``, ``list[int]`` (or bare ``tuple`` / ``list``, element type from the default):
  comma lists (``--sizes 1,2``) or separate values (``--sizes 1 2``), or both;
* ``dict``: a JSON object (``--extra '{"top_p": 0.95}'``);
* ``Literal[...]``: argparse ``choices``.

A malformed value, an unknown flag, or a ``ValueError`` / ``TypeError`` raised by the dataclass
itself (``__post_init__`` checks) ends in argparse's usage error (exit code 2), never a traceback.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import io
import json
import math
import os
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_AUTO = ("auto", "none", "")


def parse_bool(text: str, *, allow_auto: bool = False) -> bool | None:
    """``true/false/yes/no/on/off/1/0`` (any case) -> bool; with ``allow_auto``, ``auto``/``none``/empty -> None."""
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    if allow_auto and t in _AUTO:
        return None
    expected = "true/false/auto" if allow_auto else "true/false"
    raise ValueError(f"expected {expected}, got {text!r}")


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> help text from the class source: the docstring under the field, else its trailing comment.

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


_BARE = object()  # the value of a bool flag given without one


class _BoolAction(argparse.Action):
    """``--flag [VALUE]`` and ``--no-flag`` on one destination."""

    def __init__(self, option_strings: Sequence[str], dest: str, allow_auto: bool = False, **kwargs: Any) -> None:
        negatives = [f"--no-{s[2:]}" for s in option_strings if s.startswith("--")]
        name = "true/false/auto" if allow_auto else "true/false"

        def convert(text: str) -> bool | None:
            return parse_bool(text, allow_auto=allow_auto)

        convert.__name__ = name
        super().__init__([*option_strings, *negatives], dest, nargs="?", const=_BARE, type=convert, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        negative = bool(option_string and option_string.startswith("--no-"))
        if negative and values is not _BARE:
            parser.error(f"argument {option_string}: expected no value")
        setattr(namespace, self.dest, not negative if values is _BARE else values)


class _SequenceAction(argparse.Action):
    """Values given as comma lists and/or separate tokens, flattened into one tuple or list."""

    def __init__(self, option_strings: Sequence[str], dest: str, sequence_type: type = tuple, **kwargs: Any) -> None:
        self.sequence_type = sequence_type
        super().__init__(option_strings, dest, nargs="+", **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.sequence_type(x for part in values for x in part))


def _split_items(item: Callable[[str], Any], name: str) -> Callable[[str], list[Any]]:
    def convert(text: str) -> list[Any]:
        return [item(x.strip()) for x in text.split(",") if x.strip()]

    convert.__name__ = name  # argparse names the type in "invalid <name> value" errors
    return convert


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


_finite_float.__name__ = "float"  # argparse names the type in "invalid <name> value" errors


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"key\": 1}}', got {text!r}")
    return value


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(_show(v) for v in value) or "(empty)"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value) if value != "" else '""'


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _add_field(parser: argparse.ArgumentParser, f: dataclasses.Field, hint: Any, doc: str) -> None:
    default = _default(f)
    kw: dict[str, Any] = {"dest": f.name}
    if isinstance(hint, str):  # unresolvable annotation: go by the default's type
        hint = type(default) if default not in (dataclasses.MISSING, None) else str
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    optional = origin in (typing.Union, types.UnionType) and type(None) in args
    if optional and len(args) == 2:
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        kw.update(action=_BoolAction, allow_auto=optional, metavar="true|false|auto" if optional else "true|false")
    elif origin is typing.Literal:
        kw.update(choices=args, type=type(args[0]))
    elif hint in (tuple, list) or origin in (tuple, list):
        item = next((a for a in args if a is not Ellipsis), None)
        if item is None:
            sample = next(iter(default), None) if default not in (dataclasses.MISSING, None) else None
            item = type(sample) if sample is not None else str
        kw.update(action=_SequenceAction, sequence_type=origin or hint, type=_split_items(item, item.__name__),
                  metavar=item.__name__.upper())
    elif hint is dict or origin is dict:
        kw.update(type=_json_object, metavar="JSON")
    elif isinstance(hint, type):
        kw.update(type=_finite_float if hint is float else hint, metavar=hint.__name__.upper())
    else:
        raise TypeError(f"field {f.name!r}: unsupported type {hint!r} for a command-line flag")
    if default is dataclasses.MISSING:
        kw["required"] = True
        text = doc
    else:
        kw["default"] = default
        shown = "auto" if default is None and hint is bool else _show(default)
        text = f"{doc} (default: {shown})".strip()
    kw["help"] = text.replace("%", "%%")
    parser.add_argument(f"--{f.name.replace('_', '-')}", **kw)


class _HelpFormatter(argparse.HelpFormatter):
    """Shows a bool flag as ``--flag [true|false], --no-flag``."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, _BoolAction):
            return f"{action.option_strings[0]} [{action.metavar}], {action.option_strings[1]}"
        return super()._format_action_invocation(action)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that also accepts ``--field_name`` for ``--field-name``."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        known = {s for a in self._actions for s in a.option_strings}
        out = []
        for arg in args:
            if arg == "--":
                out.extend(args[len(out):])
                break
            flag, eq, value = arg.partition("=")
            dashed = "--" + flag[2:].replace("_", "-")
            out.append(dashed + eq + value if flag.startswith("--") and flag not in known and dashed in known else arg)
        return super().parse_known_args(out, namespace)


def build_parser(
    cls: type, *, description: str | None = None, prog: str | None = None, exclude: Collection[str] = ()
) -> argparse.ArgumentParser:
    """An argparse parser with one ``--field-name`` flag per field of the dataclass ``cls``.

    Fields named in ``exclude`` get no flag (they keep their dataclass default).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    if description is None:
        description = inspect.cleandoc(cls.__doc__ or "")
        if description.startswith(f"{cls.__name__}("):  # the signature dataclasses write when there is no docstring
            description = ""
    parser = _Parser(prog=prog, description=description or None, usage="%(prog)s [--option VALUE ...]",
                     formatter_class=_HelpFormatter)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that cannot be evaluated: fall back to the defaults' types
        hints = {}
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.init and f.name not in exclude:
            _add_field(parser, f, hints.get(f.name, f.type), docs.get(f.name, ""))
    return parser


def parse(cls: type[T], argv: Sequence[str] | None = None, **kw: Any) -> T:
    """An instance of the dataclass ``cls`` from ``argv`` (default ``sys.argv[1:]``).

    ``kw`` goes to :func:`build_parser`. A ``ValueError`` / ``TypeError`` from the dataclass's own
    checks becomes a usage error (exit code 2).
    """
    parser = build_parser(cls, **kw)
    ns = parser.parse_args(argv)
    try:
        return cls(**vars(ns))
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
        raise  # unreachable: parser.error exits


def check_min(options: Any, low: float, *names: str) -> None:
    """Raise ``ValueError`` naming the flag (``--eval-every must be >= 1, got 0``) unless every field is >= ``low``.

    NaN fails too. Meant for a dataclass's ``__post_init__`` (:func:`parse` turns the error into a usage error).
    """
    for name in names:
        value = getattr(options, name)
        if not value >= low:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")


def changed_options(saved: Mapping[str, Any], current: Any, allowed: Collection[str] = ()) -> list[str]:
    """``--flag <saved> (now <current>)`` for each field of the dataclass instance ``current`` whose value
    differs from ``saved`` (a run's stored options, JSON-decoded), fields in ``allowed`` apart.

    A field that ``saved`` lacks (added after that run was made) counts as its default. The ``--resume``
    checks of the training scripts use this: a resume may change only what ``allowed`` names.
    """
    def as_json(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    changes = []
    for f in dataclasses.fields(current):
        if f.name in allowed:
            continue
        now, default = as_json(getattr(current, f.name)), _default(f)
        before = saved[f.name] if f.name in saved else (None if default is dataclasses.MISSING else as_json(default))
        if before != now:
            changes.append(f"--{f.name.replace('_', '-')} {_show(before)} (now {_show(now)})")
    return changes


def check_choice(options: Any, name: str, allowed: Collection[Any]) -> None:
    """Raise ``ValueError`` naming the flag (``--preset must be one of [...], got 'x'``) unless the field
    ``name`` of ``options`` is one of ``allowed``; like :func:`check_min`, meant for ``__post_init__``."""
    value = getattr(options, name)
    if value not in allowed:
        raise ValueError(f"--{name.replace('_', '-')} must be one of {list(allowed)}, got {value!r}")


def output_dir(path: str | os.PathLike[str], label: str) -> Path:
    """Create the directory ``path`` (and its parents) for a script's output; exit naming ``label`` if it cannot be written.

    ``label`` is what the user typed, e.g. ``"--out runs/x"``: a bad path fails before any work.
    """
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise SystemExit(f"{label}: cannot write there ({exc.strerror or exc})") from None
    return out


def to_argv(instance: Any, *, skip: Collection[str] = ()) -> list[str]:
    """The flags that rebuild ``instance`` with :func:`parse`: one per field that differs from its default.

    ``parse(type(instance), to_argv(instance)) == instance`` for every field type :func:`parse`
    supports (fields named in ``skip`` are left out). Fields without a default are always written.
    """
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise TypeError(f"to_argv needs a dataclass instance, got {type(instance).__name__}")
    argv: list[str] = []
    for f in dataclasses.fields(instance):
        value, default = getattr(instance, f.name), _default(f)
        if f.name in skip or (default is not dataclasses.MISSING and value == default):
            continue
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(value, bool):
            argv.append(flag if value else f"--no-{flag[2:]}")
        elif value is None:
            argv += [flag, "auto"]
        elif isinstance(value, (tuple, list)):
            if not value:
                raise ValueError(f"field {f.name!r}: an empty sequence has no command-line form")
            argv += [flag, *(_show(v) for v in value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv
