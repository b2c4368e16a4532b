"""Reading an options dataclass from the command line with tyro, and the one usage-error form.

:func:`parse` (and :func:`parse_known`, :func:`run`, :func:`help_text`) hand the project's flag spellings to
``tyro.cli`` with the project's type rules; :func:`usage_error` is the one form of a usage error (exit code 2);
:func:`dispatch` runs a command made of commands. :func:`check_min` and :func:`check_choice` are the checks an
options class's ``__post_init__`` raises as usage errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

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

from countdown_gym.dataclass_cli.fields import field_docs, flag_kind, flags, is_optional, parse_bool

T = TypeVar("T")


# ---- tyro: the types' parsers, help and errors ----------------------------------------------------------------


def _finite_float(args: list[str]) -> float:
    value = float(args[0])
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {args[0]!r} (NaN and infinity are refused)")
    return value


def _json_object(args: list[str]) -> dict[str, Any]:
    try:
        value = json.loads(args[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg}); expected a JSON object like '{{\"key\": 1}}', got {args[0]!r}") from None
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


class _Invalid(Exception):
    """A ``ValueError`` of an options class's ``__post_init__``, carried past tyro to :func:`parse`."""


def _normalize(cls: type, argv: Sequence[str], prog: str) -> list[str]:
    """The project's spellings in tyro's: ``--flag VALUE`` of a bool, comma lists, ``--no-flag`` of ``bool | None``."""
    known = {f.name: f for f in flags(cls)}
    known.update({"--no-" + name[2:]: f for name, f in list(known.items())})
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
        if negative and kind not in ("bool", "auto-bool"):
            out.append(arg)  # --no-x of a non-bool: tyro reports it
            continue
        if kind in ("bool", "auto-bool"):
            if not eq and i < len(args) and not args[i].startswith("--") and not negative:
                value, eq = args[i], "="
                i += 1
            if negative:
                if eq:
                    usage_error(f"{name} takes no value, got {value!r}", prog=prog)
                value = "false"
            elif not eq:
                value = "true"
            try:
                truth = parse_bool(value, allow_auto=kind == "auto-bool")
            except ValueError as exc:
                usage_error(f"{flag.name}: {exc}", prog=prog)
            if kind == "auto-bool":
                out += [flag.name, "auto" if truth is None else str(truth).lower()]
            else:
                out.append(flag.name if truth else "--no-" + flag.name[2:])
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


def _prog(cls: type) -> str:
    return Path(sys.argv[0]).name if sys.argv and sys.argv[0] else cls.__name__


class UsageError(SystemExit):
    """Bad command-line input: exit code 2, its message already printed on stderr (``str()`` of it is the message)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _first_message(box: str) -> str:
    """The message of one of tyro's error boxes (the lines under its title, up to its first rule)."""
    lines = [line.strip(" │╭╮╰╯\n") for line in box.splitlines()]
    lines = ["-" if set(line) <= set("─-") else line.strip(" ─") for line in lines if line]  # "-": a rule of the box
    body: list[str] = []
    for line in lines[1:]:  # lines[0]: the title ("Value error", "Unrecognized options", ...)
        if set(line) <= set("-"):
            if body:
                break
            continue  # the rule under the title (the plain form of the box)
        body.append(line)
    return " ".join(body) or (lines[0] if lines else "invalid command line")


def usage_error(message: str, *, prog: str | None = None, details: str = "", usage: str = "[-h] [OPTIONS]") -> NoReturn:
    """Print the usage line and ``<prog>: error: <message>`` on stderr, then raise :class:`UsageError` (exit code 2).

    The one form of a usage error of every command and script: :func:`parse` reports a bad flag or a
    dataclass's failed check this way; a command does too, for a check that can only run after parsing
    (e.g. one that needs a library loaded or a file read). ``usage``: what follows ``prog`` on the usage line.
    """
    prog = prog or Path(sys.argv[0]).name
    print(f"usage: {prog} {usage}\n{details}{prog}: error: {message}\nFor full helptext, run {prog} --help",
          file=sys.stderr, flush=True)
    raise UsageError(message)


EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it."""


def interrupted(prog: str) -> int:
    """Say on stderr that ``prog`` was stopped by Ctrl-C (one line, no traceback); :data:`EXIT_INTERRUPTED`."""
    print(f"\n{prog}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def run(cls: type[T], argv: Sequence[str] | None, command: Callable[[T], int], *, prog: str,
        description: str | None = None) -> int:
    """The exit code of a command whose options are the dataclass ``cls``: ``command(parse(cls, argv))``.

    0 after ``--help``; 2 for a usage error, from the parse or raised by ``command`` through :func:`usage_error`
    (the message is already on stderr). ``command`` returns 0 on success, 1 on failure. Ctrl-C while it runs is
    one line on stderr and :data:`EXIT_INTERRUPTED` (130), never a traceback.
    """
    try:
        options = parse(cls, argv, prog=prog, description=description)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        return interrupted(prog)
    try:
        return command(options)
    except UsageError:
        return 2
    except KeyboardInterrupt:
        return interrupted(prog)


def dispatch_help(prog: str, commands: Mapping[str, tuple[str, Any]], *, description: str = "", epilog: str = "",
                  usage: str = "[-h] <command> [args]") -> str:
    """What ``prog --help`` prints for a command made of ``commands`` (see :func:`dispatch`)."""
    width = max(len(name) for name in commands) + 2
    listing = "\n".join(f"  {name:<{width}}{text}" for name, (text, _) in commands.items())
    parts = [f"usage: {prog} {usage}", description, f"commands:\n{listing}", epilog]
    return "\n\n".join(p.strip("\n") for p in parts if p) + "\n"


def dispatch(prog: str, commands: Mapping[str, tuple[str, Callable[[list[str]], int]]], argv: Sequence[str] | None,
             *, description: str = "", epilog: str = "") -> int:
    """``prog <command> [args]``: the exit code of ``commands[command][1](args)``, for a command made of commands
    (``countdown-gym``, ``countdown-gym leaderboard``).

    ``commands`` maps each command to ``(one-line help, run)``. ``-h`` / ``--help`` prints the list (exit code 0);
    no command or an unknown one is a usage error (exit code 2), in :func:`usage_error`'s form.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "[-h] <command> [args]"
    if argv and argv[0] in ("-h", "--help"):
        print(dispatch_help(prog, commands, description=description, epilog=epilog), end="")
        return 0
    try:
        if not argv:
            usage_error(f"a command is required: one of {', '.join(commands)}", prog=prog, usage=usage)
        if argv[0] not in commands:
            usage_error(f"unknown command {argv[0]!r}; one of {', '.join(commands)}", prog=prog, usage=usage)
    except UsageError:
        return 2
    return commands[argv[0]][1](argv[1:])


def parse(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None,
          description: str | None = None) -> T:
    """An instance of the options dataclass ``cls`` from ``argv`` (default ``sys.argv[1:]``).

    ``--help`` prints the help and exits 0; a malformed value, an unknown flag or a ``ValueError`` from
    the dataclass's own checks is a usage error on stderr (exit code 2).
    """
    return _cli(cls, argv, prog, description, unknown=False)


def parse_known(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None,
                description: str | None = None) -> tuple[T, list[str]]:
    """As :func:`parse`, but flags ``cls`` does not have are returned, in order, for another command to read.

    For a script that passes the rest of its command line on (``baselines/compare_rewards.py`` to ``sb3_ppo``).
    """
    return _cli(cls, argv, prog, description, unknown=True)


def _cli(cls: type[T], argv: Sequence[str] | None, prog: str | None, description: str | None, *, unknown: bool) -> Any:
    flags(cls)  # a class tyro cannot read without surprises (two fields, one flag) fails here, as TypeError
    prog = prog or _prog(cls)
    args = _normalize(cls, sys.argv[1:] if argv is None else argv, prog)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return tyro.cli(cls, args=args, prog=prog, description=description, return_unknown_args=unknown,
                            config=(tyro.conf.OmitArgPrefixes,), registry=_REGISTRY)
    except _Invalid as exc:
        usage_error(str(exc), prog=prog)
    except BrokenPipeError:  # `--help | head` closed the pipe: exit quietly, as a Unix tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        raise SystemExit(0) from None
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
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            parse(cls, ["--help"], prog=prog, description=description)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return buffer.getvalue()


# ---- checks for __post_init__ -----------------------------------------------------------------------------------


def check_min(options: Any, low: float, *names: str) -> None:
    """Raise ``ValueError`` naming the flag (``--eval-every must be >= 1, got 0``) unless every field is >= ``low``.

    NaN fails too. Meant for a dataclass's ``__post_init__`` (:func:`parse` turns the error into a usage error).
    """
    for name in names:
        value = getattr(options, name)
        if not value >= low:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")


def check_choice(options: Any, name: str, allowed: Collection[Any]) -> None:
    """Raise ``ValueError`` naming the flag (``--preset must be one of [...], got 'x'``) unless the field
    ``name`` of ``options`` is one of ``allowed``; like :func:`check_min`, meant for ``__post_init__``."""
    value = getattr(options, name)
    if value not in allowed:
        raise ValueError(f"--{name.replace('_', '-')} must be one of {list(allowed)}, got {value!r}")
