"""Rewards: the registry of reward variants (``variants.py``, the one reward API), their terms (``terms.py``)
and the Gymnasium wrapper a variant builds (``wrapper.py``); ``docs/rewards.md``."""
