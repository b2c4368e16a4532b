"""Baselines on countdown-gym: MaskablePPO on Countdown-v0, and GRPO / SFT of causal LMs with TRL.

Every script runs as ``python baselines/<script>.py`` or ``python -m baselines.<script>``, from any directory; modules
import each other as ``from baselines.<module> import ...``. Importing this package loads nothing; the modules need the
``sb3`` or ``llm`` extra. The families' modules are ``baselines.sb3`` and ``baselines.lm``, the comparisons' helpers
``baselines.analysis``; map of the code: ``docs/DESIGN.md``.
"""
