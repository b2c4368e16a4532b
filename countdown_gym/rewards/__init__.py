"""Rewards: the per-step terms, the trajectory scores, the registry of reward variants, and the Gymnasium
wrappers that add a term to an environment's reward (``docs/rewards.md``)."""
