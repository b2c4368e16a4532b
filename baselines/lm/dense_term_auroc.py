"""How well each dense reward term predicts an episode's eventual success (the reward comparison's "why",
docs/results/reward_comparison.md): the AUROC of each move's term (``RewardVariant.move_values``), and of the
episode's mean term, against the outcome of episodes the shipped multi-turn model samples as GRPO's rollouts do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TERMS = ("oracle-perfect", "critic")
TEMPERATURE = 0.5
CLIPO_NOTE = ("its reward is given to the correct episodes of a group (0 to every failed one), so it is a function "
              "of the outcome rather than a prediction of it.")


def write_auroc(path: str | Path, *, samples: int = 4, seed: int = 0) -> dict[str, Any]:
    """Play the episodes, score every move with each term of :data:`TERMS`, write the AUROCs to ``path`` (JSON)."""
    import numpy as np
    import torch

    from baselines.lm.grpo_data import validation_subset
    from baselines.lm.grpo_model import DEFAULT_TURN_MODEL, load_model_and_tokenizer
    from baselines.lm.rewards import load_needs
    from countdown_gym.data.splits import load_split
    from countdown_gym.integrations.trl_rollout import play_episodes
    from countdown_gym.rewards.variants import get_variant
    from countdown_gym.runkit.runs import write_text_atomic
    from critics.metrics import auroc

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    model, tok = load_model_and_tokenizer(DEFAULT_TURN_MODEL)
    model.eval()
    problems = validation_subset(load_split("longproc-0.5k", "validation"), 200)
    with torch.no_grad():
        episodes = play_episodes(model, tok, [p for p in problems for _ in range(samples)], max_turns=16,
                                 temperature=TEMPERATURE, batch_size=256)
    given = load_needs(TERMS)
    terms: dict[str, Any] = {}
    moves = 0
    for name in TERMS:
        variant = get_variant(name, "text")
        scorer = variant.scorer_in(given)
        per_move, move_labels, per_episode = [], [], []
        for e in episodes:
            values = variant.move_values(e.replay.transitions, scorer) if e.replay.transitions else np.zeros(0)
            per_move += values.tolist()
            move_labels += [e.solved] * len(values)
            per_episode.append(float(values.mean()) if len(values) else 0.0)
        moves = len(per_move)
        terms[name] = {"per_move": auroc(per_move, move_labels), "per_episode": auroc(per_episode, [e.solved for e in episodes])}
    result = {"model": Path(DEFAULT_TURN_MODEL).name, "problems": len(problems), "episodes": len(episodes), "moves": moves,
              "temperature": TEMPERATURE, "seed": seed, "solved": float(np.mean([e.solved for e in episodes])),
              "terms": terms, "clipo_note": CLIPO_NOTE}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(result, indent=2) + "\n")
    return result
