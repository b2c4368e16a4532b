"""Baselines on countdown-gym: MaskablePPO on Countdown-v0, and GRPO / SFT of causal LMs with TRL.

Every script runs both ways from the repository root::

    python baselines/sb3_ppo.py --reward oracle-perfect      # the commands the docs write
    python -m baselines.sb3_ppo --reward oracle-perfect      # the same script as a module

and its modules import each other one way only, ``from baselines.<module> import ...`` (a script run
by path puts the repository root, not this folder, on ``sys.path``). Importing this package loads
nothing; the modules need the ``sb3`` or ``llm`` extra.

Scripts: ``sb3_ppo``, ``compare_rewards`` (MaskablePPO reward comparison), ``llm_sft`` (pre-train the
tiny LM), ``llm_grpo``, ``compare_llm_rewards`` (GRPO reward comparison), ``llm_eval`` (pass@k),
``llm_expert_iteration``, ``tier_success``, ``reference_agents``. Modules: ``sb3_policy`` (move features,
per-action policy, ``load_model``), ``sb3_vec_env``, ``tiny_lm``, ``llm_rewards``, ``llm_callbacks``,
``step_credit``, ``compat``, ``gpu_plan``, ``reward_curves``.
"""
