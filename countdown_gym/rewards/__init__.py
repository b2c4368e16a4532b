"""Rewards: the registry of reward variants and the Gymnasium wrapper a variant builds (``variants.py``, the one
reward API), their terms (``terms.py``); ``docs/rewards.md``."""
