"""An options instance against a run's stored options, and back to flags: the resume check and :func:`to_argv`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from countdown_gym.dataclass_cli.fields import Flag, flag_kind, flags


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _leaves(instance: Any) -> Iterator[tuple[Flag, Any, Any]]:
    """``(flag, value, default)`` of every flag of a dataclass instance; a nested field's default is the one its
    enclosing default instance holds."""
    for flag in flags(type(instance)):
        value, default, parent_default = instance, dataclasses.MISSING, dataclasses.MISSING
        for depth, name in enumerate(flag.path):
            klass = type(value)
            field = next(f for f in dataclasses.fields(klass) if f.name == name)
            if depth == 0 or parent_default is dataclasses.MISSING:
                default = _default(field)
            else:
                default = getattr(parent_default, name)
            parent_default = default
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
    """``--flag <saved> (now <current>)`` for each flag of the dataclass instance ``current`` whose value
    differs from ``saved`` (a run's stored options, JSON-decoded), fields named in ``allowed`` apart.

    A field that ``saved`` lacks (added after that run was made) counts as its default. The ``--resume``
    checks of the training scripts use this: a resume may change only what ``allowed`` names.
    """
    def as_json(value: Any) -> Any:
        return json.loads(json.dumps(value, default=str))

    changes = []
    for flag, value, default in _leaves(current):
        if flag.path[-1] in allowed:
            continue
        found, before = _lookup(saved, flag.path)
        if not found:
            before = None if default is dataclasses.MISSING else as_json(default)
        now = as_json(value)
        if before != now:
            changes.append(f"{flag.name} {_show(before)} (now {_show(now)})")
    return changes


def to_argv(instance: Any, *, skip: Collection[str] = ()) -> list[str]:
    """The flags that rebuild ``instance`` with :func:`parse`: one per field that differs from its default.

    ``parse(type(instance), to_argv(instance)) == instance`` for every field type :func:`parse`
    supports (fields named in ``skip`` are left out). Fields without a default are always written.
    """
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
            argv += [flag.name + "=" + ",".join(_show(v) for v in value)] if not value else [flag.name, *(_show(v) for v in value)]
        elif isinstance(value, dict):
            argv += [flag.name, json.dumps(value)]
        else:
            argv += [flag.name, str(value)]
    return argv
