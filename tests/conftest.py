"""Shared test settings."""

from __future__ import annotations

import os

from hypothesis import settings

# ---- Hypothesis CI profile: derandomised (every CI run draws the same examples), no example database, no
# per-example deadline (a loaded CI machine must not turn a slow example into a failure) -------------------------
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
