"""The multi-turn inference engine: a causal LM playing many ``CountdownMultiTurn-v0`` episodes at once.

:mod:`~countdown_gym.inference.engine` runs the token loop and the game; :mod:`~countdown_gym.inference.decoders`
holds the model's incremental forward pass (torch; imported only by what runs a model).
"""
