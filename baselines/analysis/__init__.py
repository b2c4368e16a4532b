"""Helpers of the reward comparisons: standard errors (``uncertainty``) and the validation-curve figures
(``reward_curves``)."""
