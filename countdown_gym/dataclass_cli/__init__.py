"""Script options as dataclasses, read from the command line with tyro: one ``--flag`` per field.

    opts = parse(Options)                      # sys.argv[1:]; --help; bad input: usage error, exit code 2
    text = help_text(Options)                  # what --help prints
    argv = to_argv(opts)                       # the flags that rebuild ``opts`` (its non-default fields)
    changed_options(saved, opts, allowed)      # ["--lr 0.001 (now 0.01)"]: what a --resume would change
    code = run(Options, argv, command, prog=p) # a command's exit code: 0, 1 from command(opts), 2 usage error
    code = dispatch(prog, commands, argv)      # a command made of commands (countdown-gym, ... leaderboard)

This package is public API (``docs/DESIGN.md``): every ``countdown-gym`` command and the training,
evaluation, benchmark and export scripts of ``baselines/``, ``critics/``, ``benchmarks/`` and ``scripts/``
take their options through it (one help layout, one usage-error form: :func:`usage_error`), and so can a
user's own script. The parsing, the help and the error messages are tyro's (``tyro.cli``, called in
:mod:`~countdown_gym.dataclass_cli.commands`); this package adds what tyro does not do: the flag spellings the
project's commands have always used (:mod:`~countdown_gym.dataclass_cli.fields`), the resume check
(:func:`changed_options`) and :func:`to_argv` (:mod:`~countdown_gym.dataclass_cli.resume`).

The command line of an options dataclass:

* one flag per field, ``--field-name`` (``--field_name`` works too); the help text of a flag is the
  docstring under its field (or the comment at the end of the field's line), then its default; the
  class docstring is the description;
* a field whose type is a dataclass groups that class's fields: they are flags of their own, without
  a prefix (``TrainConfig.model.hidden`` is ``--hidden``), under the nested class's docstring in the
  help. Two fields with one flag name are an error;
* ``bool``: ``--flag``, ``--no-flag`` or ``--flag true|false|yes|no|on|off|1|0``; ``bool | None``
  also takes ``--flag auto`` (None);
* ``int``, ``float`` (finite: ``nan`` / ``inf`` are usage errors), ``str``, ``X | None`` (``None``);
* ``tuple[int, ...]``, ``list[float]``, ...: separate values (``--sizes 1 2``) or comma lists
  (``--sizes 1,2``), or both; ``--sizes=`` is the empty sequence;
* ``dict``: a JSON object (``--extra '{"top_p": 0.95}'``);
* ``Literal[...]``: the choices.

Checks: a dataclass checks its own values in ``__post_init__`` and raises ``ValueError`` naming the
flag (:func:`check_min`, :func:`check_choice`); :func:`parse` turns it into a usage error (exit code
2), like a malformed value or an unknown flag. Never a traceback.
"""

from countdown_gym.dataclass_cli.commands import (
    EXIT_INTERRUPTED,
    UsageError,
    check_choice,
    check_min,
    dispatch,
    dispatch_help,
    help_text,
    interrupted,
    parse,
    parse_known,
    run,
    usage_error,
)
from countdown_gym.dataclass_cli.fields import Flag, field_docs, flags, parse_bool
from countdown_gym.dataclass_cli.resume import changed_options, to_argv

__all__ = [
    "EXIT_INTERRUPTED",
    "Flag",
    "UsageError",
    "changed_options",
    "check_choice",
    "check_min",
    "dispatch",
    "dispatch_help",
    "field_docs",
    "flags",
    "help_text",
    "interrupted",
    "parse",
    "parse_bool",
    "parse_known",
    "run",
    "to_argv",
    "usage_error",
]
