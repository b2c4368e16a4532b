"""Script options as dataclasses, read from the command line with tyro: one ``--flag`` per field.

    opts = parse(Options)                      # sys.argv[1:]; --help; bad input: usage error, exit code 2
    argv = to_argv(opts)                       # the flags that rebuild ``opts`` (its non-default fields)
    changed_options(saved, opts, allowed)      # ["--lr 0.001 (now 0.01)"]: what a --resume would change
    code = run(Options, argv, command, prog=p) # a command's exit code: 0, 1 from command(opts), 2 usage error
    code = dispatch(prog, commands, argv)      # a command made of commands (countdown-gym, ... leaderboard)

Public API (``docs/DESIGN.md``): every command and script parses its options here. Parsing, help and errors are
``tyro.cli``'s; this module adds what tyro does not do: the project's flag spellings, finite floats, JSON dicts,
help from field docstrings joined on one line, one usage-error form (:func:`usage_error`), the resume check
(:func:`changed_options`), the check of flags a mode ignores (:func:`check_unused`) and :func:`to_argv`.

Spellings: ``--field-name`` (or ``--field_name``); a nested dataclass field groups its class's fields as flags
without a prefix (two fields with one flag name are a ``TypeError``); ``bool``: ``--flag``, ``--no-flag`` or
``--flag true|false|yes|no|on|off|1|0``, and ``bool | None`` also ``--flag auto``; floats must be finite;
sequences take separate values, comma lists or both (``--sizes=`` is empty); ``dict`` is a JSON object;
``Literal`` gives the choices. A ``ValueError`` of the class's ``__post_init__`` (:func:`check_min`,
:func:`check_choice`) is a usage error, like a malformed value or an unknown flag: never a traceback.
"""

from countdown_gym.dataclass_cli.commands import (
    changed_options,
    check_choice,
    check_min,
    check_unused,
    dispatch,
    dispatch_help,
    flags,
    help_text,
    parse,
    parse_bool,
    parse_known,
    run,
    to_argv,
    usage_error,
)
from countdown_gym.dataclass_cli.output import (
    EXIT_INTERRUPTED,
    UsageError,
    file_kind,
    finish_together,
    guarded,
    not_regular,
    run_script,
    write_together,
    written_aside,
)
from countdown_gym.dataclass_cli.strict import strict_json

__all__ = [
    "EXIT_INTERRUPTED",
    "UsageError",
    "changed_options",
    "check_choice",
    "check_min",
    "check_unused",
    "dispatch",
    "dispatch_help",
    "file_kind",
    "finish_together",
    "flags",
    "guarded",
    "help_text",
    "not_regular",
    "parse",
    "parse_bool",
    "parse_known",
    "run",
    "run_script",
    "strict_json",
    "to_argv",
    "usage_error",
    "write_together",
    "written_aside",
]
