"""Baselines on countdown-gym: MaskablePPO on Countdown-v0, and GRPO / SFT of causal LMs with TRL.

``baselines`` is installed with the package, so every script runs both ways, from any directory::

    python baselines/sb3_ppo.py --reward oracle-perfect      # the commands the docs write
    python -m baselines.sb3_ppo --reward oracle-perfect      # the same script as a module

and modules import each other as ``from baselines.<module> import ...``. Importing this package loads
nothing; the modules need the ``sb3`` or ``llm`` extra.

Scripts (this folder): ``sb3_ppo``, ``compare_rewards`` (MaskablePPO reward comparison), ``llm_sft``
(pre-train the tiny LM), ``llm_grpo``, ``compare_llm_rewards`` (GRPO reward comparison), ``llm_eval``
(pass@k), ``llm_expert_iteration``, ``llm_grow`` (a deeper model that plays as the original),
``tier_success`` and ``reference_agents``. The comparisons' helpers: ``baselines.analysis`` (``uncertainty``,
``reward_curves``). The two families' modules: ``baselines.sb3`` (``features``: the move features;
``policy``: the per-action policy, ``load_model``; ``vec_env``; ``callbacks``) and ``baselines.lm`` (``tiny_lm``,
``generation``, the scripts' typed options (``grpo_options`` with the resolved ``GRPORun``, ``sft_options``,
``eval_options``), GRPO's ``grpo_config``, ``grpo_data``, ``grpo_model``, ``rewards``, the trainer ``grpo_trainer`` and ``step_credit``,
``callbacks``, ``run_card``, ``gpu_plan``, ``compat``, ...). Map of the code: ``docs/DESIGN.md``.
"""
