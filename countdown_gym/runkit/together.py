"""Files that must agree (a page, its figure, a line quoting it) written all or none, and a set a kill cut short
finished by the next run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from countdown_gym.runkit.runs import read_options, write_text_atomic


def write_together(files: Mapping[str | os.PathLike[str], str | Callable[[Path], Any]]) -> None:
    """Write files that must agree (a page, its figure, a line quoting it) all or none: each to a temporary beside it,
    ``<stem>.part<suffix>`` (a ``str`` is written as UTF-8 text, a function is given that path); once all are whole, a
    journal beside the last file (``<name>.parts``) names them and they replace their files in the order given, the
    last one last. A kill during the renames leaves the journal: :func:`finish_together`, run first by every call
    (and by whoever reads the files), completes them."""
    paths = [Path(p) for p in files]
    journal = finish_together(paths[-1])
    parts = [p.with_name(f"{p.stem}.part{p.suffix}") for p in paths]
    try:
        for part, write in zip(parts, files.values(), strict=True):
            write_text_atomic(part, write) if isinstance(write, str) else write(part)
        pairs = [[os.path.relpath(x, journal.parent) for x in pair] for pair in zip(parts, paths, strict=True)]
        write_text_atomic(journal, json.dumps({"renames": pairs}) + "\n")
    except BaseException:
        for part in parts:
            part.unlink(missing_ok=True)
        raise
    finish_together(paths[-1])


def finish_together(last: str | os.PathLike[str]) -> Path:
    """Complete the renames of a :func:`write_together` whose last file is ``last`` that a kill cut short (its
    journal names them; none: nothing to do); returns the journal's path."""
    journal = Path(last).with_name(Path(last).name + ".parts")
    if (saved := read_options(journal.parent, journal.name)) is not None:
        try:
            for part, path in saved["renames"]:
                if (journal.parent / part).is_file():
                    os.replace(journal.parent / part, journal.parent / path)
        except (KeyError, TypeError, ValueError) as exc:
            raise SystemExit(f"{journal}: not the journal of an interrupted write ({exc}); delete it") from None
        journal.unlink()
    return journal
