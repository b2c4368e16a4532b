"""Shared test settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# ---- Hypothesis CI profile: derandomised (every CI run draws the same examples), no example database, no
# per-example deadline (a loaded CI machine must not turn a slow example into a failure) -------------------------
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def torn_savefig(monkeypatch: pytest.MonkeyPatch):
    """``torn_savefig()``: every matplotlib ``savefig`` from then on writes half a PNG, then is interrupted (a
    Ctrl-C mid-save)."""
    from matplotlib.figure import Figure

    def torn(self, fname, **_):
        Path(fname).write_bytes(b"\x89PNG half")
        raise KeyboardInterrupt

    return lambda: monkeypatch.setattr(Figure, "savefig", torn)


@pytest.fixture
def no_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports of ``transformers`` fail from here on, as where the ``llm`` extra is not installed."""
    import builtins

    real_import = builtins.__import__

    def blocked(name, *args, **kwargs):
        if name.startswith("transformers"):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", blocked)
