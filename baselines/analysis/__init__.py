"""Helpers of the reward comparisons: standard errors (``uncertainty``), the validation-curve figures
(``reward_curves``) and the GRPO comparison's protocol and run records (``protocol``)."""
