"""The Stable-Baselines3 family: the per-action MaskablePPO policy, the vector env with reward variants,
and the training callbacks of ``baselines/sb3_ppo.py``."""
