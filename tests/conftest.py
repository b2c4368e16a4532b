"""Shared test settings."""

import os

from hypothesis import settings

# ---- Hypothesis CI profile (derandomised: every CI run draws the same examples) ---------------------------------
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
