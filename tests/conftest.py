"""Test-wide settings."""

from __future__ import annotations

import os

from hypothesis import settings

# Hypothesis' CI profile: a derandomised seed (and no example database), so a CI run is reproducible.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
