"""The options parser of :mod:`countdown_gym.dataclass_cli` (its docstring says what it adds to tyro)."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import itertools
import json
import math
import os
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from unittest import mock

import tyro
from tyro.constructors import (
    ConstructorRegistry,
    PrimitiveConstructorSpec,
    PrimitiveTypeInfo,
    StructConstructorSpec,
    StructTypeInfo,
)

# tyro's own dataclass rule, whose help text _dataclass_help replaces
from tyro.constructors._struct_spec_dataclass import dataclass_rule

from countdown_gym.dataclass_cli.output import EXIT_PIPE_CLOSED, UsageError, _quiet, guarded
from countdown_gym.dataclass_cli.strict import strict_json

T = TypeVar("T")
_TRUE, _FALSE, _AUTO = ("1", "true", "yes", "on"), ("0", "false", "no", "off"), ("auto", "none")


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


# ---- the fields of an options class ------------------------------------------------------------------------


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> help text from the source of ``cls`` and its dataclass bases: the docstring under the field
    (lines joined), else its trailing comment (a comment on a line of its own is no field's help)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
            body = next(n.body for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
            comments = {tok.start[0]: tok.string.lstrip("#").strip()
                        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                        if tok.type == tokenize.COMMENT and tok.line[: tok.start[1]].strip()}
        except (OSError, TypeError, SyntaxError, StopIteration, tokenize.TokenError):
            continue
        for stmt, nxt in zip(body, [*body[1:], None], strict=True):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[stmt.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
            elif stmt.end_lineno in comments:
                docs[stmt.target.id] = comments[stmt.end_lineno]
    return docs


@dataclasses.dataclass(frozen=True)
class Flag:
    """One command-line flag: the field it sets (``path``: field names from the options class down) and its type."""

    name: str  # "--field-name"
    path: tuple[str, ...]
    hint: Any


def is_optional(hint: Any) -> tuple[bool, Any]:
    """``(True, X)`` for ``X | None``, else ``(False, hint)``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        return True, next(a for a in args if a is not type(None))
    return False, hint


def flags(cls: type) -> list[Flag]:
    """Every flag of the options dataclass ``cls``, fields of nested dataclasses included (without a prefix).

    Raises ``TypeError`` for a class that is not a dataclass or for two fields with one flag name.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    out: dict[str, Flag] = {}

    def walk(klass: type, prefix: tuple[str, ...]) -> None:
        hints = typing.get_type_hints(klass)
        for f in dataclasses.fields(klass):
            if not f.init:
                continue
            hint = hints.get(f.name, f.type)
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                walk(hint, (*prefix, f.name))
                continue
            name = "--" + f.name.replace("_", "-")
            if name in out:
                raise TypeError(f"{cls.__name__}: {'.'.join((*prefix, f.name))} and {'.'.join(out[name].path)} "
                                f"are both {name}")
            out[name] = Flag(name, (*prefix, f.name), hint)

    walk(cls, ())
    return list(out.values())


def flag_kind(flag: Flag) -> str:
    """How the command line spells ``flag``: ``bool``, ``auto-bool`` (``bool | None``), ``sequence`` or ``value``."""
    optional, hint = is_optional(flag.hint)
    if hint is bool:
        return "auto-bool" if optional else "bool"
    return "sequence" if hint in (tuple, list) or typing.get_origin(hint) in (tuple, list) else "value"


# ---- tyro: the types' parsers, help and errors ----------------------------------------------------------------


def _finite_float(args: list[str]) -> float:
    value = float(args[0])
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {args[0]!r} (NaN and infinity are refused)")
    return value


def _json_object(args: list[str]) -> dict[str, Any]:
    """A strict JSON object (:func:`strict_json`), not nested past the parser's depth."""
    try:
        value = strict_json(args[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg}); expected a JSON object like '{{\"key\": 1}}', got {args[0]!r}") from None
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc}); expected a JSON object like '{{\"key\": 1}}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object like '{{\"key\": 1}}', got {args[0]!r}")
    return value


_REGISTRY = ConstructorRegistry()


@_REGISTRY.primitive_rule
def _project_types(info: PrimitiveTypeInfo) -> PrimitiveConstructorSpec | None:
    """Finite floats, JSON dicts and ``bool | None`` as ``true|false|auto``; everything else is tyro's."""
    if info.type is float:
        return PrimitiveConstructorSpec(
            nargs=1, metavar="FLOAT", instance_from_str=_finite_float,
            is_instance=lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), str_from_instance=lambda x: [str(x)])
    if info.type is dict or info.type_origin is dict:
        return PrimitiveConstructorSpec(
            nargs=1, metavar="JSON", instance_from_str=_json_object, is_instance=lambda x: isinstance(x, dict),
            str_from_instance=lambda x: [json.dumps(x)])
    if is_optional(info.type) == (True, bool):
        return PrimitiveConstructorSpec(
            nargs=1, metavar="{true,false,auto}", instance_from_str=lambda a: parse_bool(a[0], allow_auto=True),
            is_instance=lambda x: x is None or isinstance(x, bool),
            str_from_instance=lambda x: ["auto" if x is None else str(x).lower()])
    return None


class _Invalid(Exception):
    """A ``ValueError`` of an options class's ``__post_init__``, carried past tyro to :func:`parse`."""


@_REGISTRY.struct_rule
def _dataclass_help(info: StructTypeInfo) -> StructConstructorSpec | None:
    """tyro's dataclass rule with the help text of :func:`field_docs` (tyro keeps the line breaks of an indented
    attribute docstring and gives a section comment to the fields under it)."""
    spec = dataclass_rule(info)
    if spec is None:
        return None
    docs = field_docs(info.type)
    fields = tuple(f if isinstance(f.helptext, str) else dataclasses.replace(f, helptext=docs.get(f.name)) for f in spec.fields)
    make = spec.instantiate

    def instantiate(*args: Any, **kwargs: Any) -> Any:
        try:
            return make(*args, **kwargs)
        except ValueError as exc:  # the class's own check: parse() reports it as one usage-error line
            raise _Invalid(str(exc)) from None

    doc = info.type.__doc__ or ""
    instantiate.__doc__ = None if doc.startswith(f"{info.type.__name__}(") else doc  # the help's description
    return dataclasses.replace(spec, fields=fields, instantiate=instantiate)


def _normalize(cls: type, argv: Sequence[str], prog: str) -> list[str]:
    """The project's spellings in tyro's: ``--flag VALUE`` of a bool, comma lists, ``--no-flag`` of ``bool | None``."""
    known = {f.name: f for f in flags(cls)}  # two fields with one flag name: TypeError
    known.update({"--no-" + name[2:]: f for name, f in list(known.items())})
    positional = any(tyro.conf.Positional in typing.get_args(h) for h in typing.get_type_hints(cls, include_extras=True).values())
    out: list[str] = []
    i, args = 0, list(argv)
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out += args[i - 1:]
            break
        spelled, eq, value = arg.partition("=")
        name = "--" + spelled[2:].replace("_", "-") if spelled.startswith("--") else spelled
        flag = known.get(name)
        if flag is None:
            out.append(arg)
            continue
        negative, kind = name != flag.name, flag_kind(flag)
        if kind in ("bool", "auto-bool"):
            if not eq and i < len(args) and not args[i].startswith("--") and not negative and (  # `audit --check fn`: fn is no bool
                    not positional or args[i].strip().lower() in (*_TRUE, *_FALSE, *_AUTO * (kind == "auto-bool"))):
                value, eq = args[i], "="
                i += 1
            if negative and eq:
                usage_error(f"{name} takes no value, got {value!r}", prog=prog)
            value = "false" if negative else value if eq else "true"
            try:
                truth = parse_bool(value, allow_auto=kind == "auto-bool")
            except ValueError as exc:
                usage_error(f"{flag.name}: {exc}", prog=prog)
            if kind == "auto-bool":
                out += [flag.name, "auto" if truth is None else str(truth).lower()]
            else:
                out.append(flag.name if truth else "--no-" + flag.name[2:])
        elif negative:
            out.append(arg)  # --no-x of a non-bool: tyro reports it
        elif kind == "sequence":
            values = [value] if eq else []
            while i < len(args) and not (args[i].startswith("--") and args[i] != "--"):
                values.append(args[i])
                i += 1
            out += [flag.name, *(item.strip() for v in values for item in v.split(",") if item.strip())]
        else:
            if not eq and i < len(args) and args[i].startswith("-") and " " in args[i]:  # argparse's rule: a value
                value, eq = args[i], "="  # like "--beta 0.01" (flags of another command) is not a flag
                i += 1
            out += ([f"{flag.name}={value}"] if value.startswith("-") else [flag.name, value]) if eq else [flag.name]
    return out


# ---- parsing, usage errors, commands ------------------------------------------------------------------------


def _first_message(box: str) -> str:
    """The message of one of tyro's error boxes (the lines under its title, up to its first rule)."""
    lines = [line.strip(" │╭╮╰╯\n") for line in box.splitlines()]
    lines = ["-" if set(line) <= set("─-") else line.strip(" ─") for line in lines if line]  # "-": a rule of the box
    # lines[0]: the title ("Value error", "Unrecognized options", ...); the body: the first run of lines between rules
    runs = (body for rule, body in itertools.groupby(lines[1:], key=lambda line: set(line) <= set("-")) if not rule)
    return " ".join(next(runs, [])) or (lines[0] if lines else "invalid command line")


def usage_error(message: str, *, prog: str | None = None, details: str = "", usage: str = "[-h] [OPTIONS]") -> NoReturn:
    """Print the usage line and ``<prog>: error: <message>`` on stderr, then raise :class:`UsageError` (exit code 2).

    The one usage-error form of every command, also for a check that can only run after parsing; ``usage``:
    what follows ``prog`` on the usage line.
    """
    prog = prog or Path(sys.argv[0]).name
    print(f"usage: {prog} {usage}\n{details}{prog}: error: {message}\nFor full helptext, run {prog} --help",
          file=sys.stderr, flush=True)
    raise UsageError(message)


def parse(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None,
          description: str | None = None) -> T:
    """An instance of the options dataclass ``cls`` from ``argv`` (default ``sys.argv[1:]``).

    ``--help`` prints the help and exits 0; a malformed value, an unknown flag or a ``ValueError`` from
    the dataclass's own checks is a usage error on stderr (exit code 2).
    """
    return _cli(cls, argv, prog, description, unknown=False)


def parse_known(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None,
                description: str | None = None) -> tuple[T, list[str]]:
    """As :func:`parse`, but flags ``cls`` does not have are returned, in order, for another command to read."""
    return _cli(cls, argv, prog, description, unknown=True)


def _cli(cls: type[T], argv: Sequence[str] | None, prog: str | None, description: str | None, *, unknown: bool) -> Any:
    prog = prog or (Path(sys.argv[0]).name if sys.argv and sys.argv[0] else cls.__name__)
    args = _normalize(cls, sys.argv[1:] if argv is None else argv, prog)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return tyro.cli(cls, args=args, prog=prog, description=description, return_unknown_args=unknown,
                            config=(tyro.conf.OmitArgPrefixes,), registry=_REGISTRY)
    except _Invalid as exc:
        usage_error(str(exc), prog=prog)
    except BrokenPipeError:  # `--help | head` closed the pipe: exit quietly, as a Unix tool does
        _quiet(sys.stdout)  # no second error when Python flushes at exit
        raise SystemExit(EXIT_PIPE_CLOSED) from None
    except SystemExit as exc:
        if exc.code != 2:
            raise
        usage_error(_first_message(errors.getvalue()), prog=prog, details=errors.getvalue())
    finally:
        if errors.getvalue() and sys.exc_info()[0] is None:
            sys.stderr.write(errors.getvalue())  # warnings of a successful parse


def help_text(cls: type, *, prog: str | None = None, description: str | None = None) -> str:
    """What ``--help`` prints for the options dataclass ``cls`` (plain text, 100 columns)."""
    buffer = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": "100"}), contextlib.redirect_stdout(buffer), \
            contextlib.suppress(SystemExit):
        parse(cls, ["--help"], prog=prog, description=description)
    return buffer.getvalue()


def run(cls: type[T], argv: Sequence[str] | None, command: Callable[[T], int], *, prog: str,
        description: str | None = None) -> int:
    """The exit code of ``command(parse(cls, argv))``: 0 after ``--help``; 2 for a usage error (from the parse or
    :func:`usage_error` in ``command``); else what ``command`` returns (0 or 1); Ctrl-C and output that cannot be
    written: :func:`guarded`."""
    def body() -> int:
        try:
            options = parse(cls, argv, prog=prog, description=description)
        except SystemExit as exc:  # --help (0) or a usage error (2)
            return exc.code if isinstance(exc.code, int) else 0
        return command(options)  # usage_error() in it: guarded's 2

    return guarded(prog, body)


def dispatch_help(prog: str, commands: Mapping[str, tuple[str, Any]], *, description: str = "", epilog: str = "",
                  usage: str = "[-h] <command> [args]") -> str:
    """What ``prog --help`` prints for a command made of ``commands`` (see :func:`dispatch`)."""
    width = max(len(name) for name in commands) + 2
    listing = "\n".join(f"  {name:<{width}}{text}" for name, (text, _) in commands.items())
    parts = [f"usage: {prog} {usage}", description, f"commands:\n{listing}", epilog]
    return "\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def dispatch(prog: str, commands: Mapping[str, tuple[str, Callable[[list[str]], int]]], argv: Sequence[str] | None,
             *, description: str = "", epilog: str = "", usage: str = "[-h] <command> [args]") -> int:
    """``prog <command> [args]``: the exit code of ``commands[command][1](args)``; ``commands`` maps each command
    to ``(one-line help, run)``. ``--help`` lists them (0); no command or an unknown one is a usage error (2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        text = dispatch_help(prog, commands, description=description, epilog=epilog, usage=usage)
        return guarded(prog, lambda: print(text, end=""))
    if not argv or argv[0] not in commands:
        problem = f"unknown command {argv[0]!r};" if argv else "a command is required:"
        return guarded(prog, lambda: usage_error(f"{problem} one of {', '.join(commands)}", prog=prog, usage=usage))
    return commands[argv[0]][1](argv[1:])


def check_min(options: Any, low: float, *names: str) -> None:
    """Raise ``ValueError`` naming the flag (``--eval-every must be >= 1, got 0``) unless every field is >= ``low``
    (NaN fails too); for ``__post_init__``, whose ``ValueError`` :func:`parse` reports as a usage error."""
    for name in names:
        value = getattr(options, name)
        if not value >= low:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")


def check_choice(options: Any, name: str, allowed: Collection[Any]) -> None:
    """Raise ``ValueError`` naming the flag (``--preset must be one of [...], got 'x'``) unless the field ``name``
    is one of ``allowed``; like :func:`check_min`."""
    value = getattr(options, name)
    if value not in allowed:
        raise ValueError(f"--{name.replace('_', '-')} must be one of {list(allowed)}, got {value!r}")


def check_unused(options: Any, mode: str, *, only: Collection[str] | None = None, skip: Collection[str] = ()) -> None:
    """Raise ``ValueError`` naming the flags set away from their defaults that have no effect in ``mode``
    (``--seeds, --steps have no effect with --replot: drop them``): the fields in ``only`` (default: all) less those
    in ``skip``; like :func:`check_min`. A mode that reads only some flags refuses the others, never ignores them."""
    unused = [flag.name for flag, value, default in _leaves(options)
              if (only is None or flag.path[-1] in only) and flag.path[-1] not in skip and value != default]
    if unused:
        one = len(unused) == 1
        raise ValueError(f"{', '.join(unused)} {'has' if one else 'have'} no effect with {mode}: drop {'it' if one else 'them'}")


# ---- back to flags: the resume check and to_argv ------------------------------------------------------------


def _leaves(instance: Any) -> Iterator[tuple[Flag, Any, Any]]:
    """``(flag, value, default)`` of every flag of a dataclass instance; a nested field's default is the one its
    enclosing default instance holds."""
    for flag in flags(type(instance)):
        value, default = instance, dataclasses.MISSING
        for depth, name in enumerate(flag.path):
            field = next(f for f in dataclasses.fields(value) if f.name == name)
            if depth == 0 or default is dataclasses.MISSING:
                default = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
            else:
                default = getattr(default, name)
            value = getattr(value, name)
        yield flag, value, default


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(_show(v) for v in value) or "(empty)"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value) if value != "" else '""'


def _lookup(saved: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    """A field's stored value: by its path (``{"model": {"hidden": 256}}``), else under its own name at the top
    (options stored before the field moved into a nested class)."""
    node: Any = saved
    for name in path:
        if not (isinstance(node, Mapping) and name in node):
            break
        node = node[name]
    else:
        return True, node
    return (True, saved[path[-1]]) if path[-1] in saved and not isinstance(saved[path[-1]], Mapping) else (False, None)


def changed_options(saved: Mapping[str, Any], current: Any, allowed: Collection[str] = ()) -> list[str]:
    """``--flag <saved> (now <current>)`` for each flag of the dataclass instance ``current`` whose value differs
    from ``saved`` (a run's stored options, JSON-decoded), fields named in ``allowed`` apart; a field ``saved``
    lacks counts as its default. The training scripts' ``--resume`` checks."""
    def as_json(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    changes = []
    for flag, value, default in _leaves(current):
        if flag.path[-1] in allowed:
            continue
        found, before = _lookup(saved, flag.path)
        if not found:
            before = None if default is dataclasses.MISSING else as_json(default)
        if before != (now := as_json(value)):
            shown = [_show(before), _show(now)]  # the same text, another JSON type ("0.001"): shown as JSON
            shown = [json.dumps(before), json.dumps(now)] if shown[0] == shown[1] else shown
            changes.append(f"{flag.name} {shown[0]} (now {shown[1]})")
    return changes


def to_argv(instance: Any, *, skip: Collection[str] = ()) -> list[str]:
    """The flags that rebuild ``instance``: ``parse(type(instance), to_argv(instance)) == instance``. One per field
    that differs from its default (fields without one always), fields named in ``skip`` left out."""
    if not dataclasses.is_dataclass(instance) or isinstance(instance, type):
        raise TypeError(f"to_argv needs a dataclass instance, got {type(instance).__name__}")
    argv: list[str] = []
    for flag, value, default in _leaves(instance):
        if flag.path[-1] in skip or (default is not dataclasses.MISSING and value == default):
            continue
        if isinstance(value, bool):
            argv.append(flag.name if value else f"--no-{flag.name[2:]}")
        elif value is None:
            argv += [flag.name, "auto" if flag_kind(flag) == "auto-bool" else "None"]
        elif isinstance(value, (tuple, list)):
            argv += [flag.name, *(_show(v) for v in value)] if value else [flag.name + "="]
        else:
            text = json.dumps(value) if isinstance(value, dict) else str(value)
            argv += [f"{flag.name}={text}"] if text.startswith("-") else [flag.name, text]  # "-x" would read as a flag
    return argv
