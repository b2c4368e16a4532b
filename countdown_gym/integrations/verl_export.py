"""Export the frozen splits to verl's parquet prompt format (``countdown-gym export --format verl``:
:mod:`countdown_gym.cli.export`): ``<out>/<preset>/<split>.parquet``, one row per problem: ``data_source``
(``"countdown_gym/<preset>"``), ``prompt`` (:func:`~countdown_gym.game.text_format.chat_messages` in the chosen
style, ending with the user's turn), ``ability`` (``"math"``), ``reward_model`` (``{"style": "rule", "ground_truth":
...}``) and ``extra_info`` (``split``, ``index``, ``id``, ``preset``, ``prompt_style``); score with
``verl.py::compute_score``. ``interaction="tool"``: rows for verl's tool agent loop (``agent_name="tool_agent"``, each
tool's ground truth in ``extra_info.tools_kwargs``) and ``<out>/<preset>/countdown_tools.yaml``; score with
``verl_multiturn.py::compute_score`` (``docs/multiturn.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from countdown_gym.data.fresh import generate_fresh
from countdown_gym.data.splits import load_split
from countdown_gym.dataclass_cli import written_aside
from countdown_gym.game.problem import Problem
from countdown_gym.game.text_format import chat_messages
from countdown_gym.game.turn_format import tool_prompt
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, check_budget
from countdown_gym.integrations.verl import verl_row
from countdown_gym.integrations.verl_multiturn import dump_tool_config, tools_kwargs

TOOL_CONFIG = "countdown_tools.yaml"
INTERACTIONS = ("single-pass", "tool")


def verl_rows(problems: list[Problem], preset: str, split: str, prompt_style: str, interaction: str = "single-pass",
              max_turns: int = DEFAULT_MAX_TURNS) -> list[dict[str, Any]]:
    """verl prompt rows (see the module docstring) for ``problems``; ``interaction="tool"``: for the tool agent loop
    (the puzzle as the user message, the tools' kwargs, the ground truth)."""
    if interaction == "tool":
        return [verl_row(p, preset, split, i, [{"role": "user", "content": tool_prompt(p, max_turns)}], "tool_agent",
                         interaction="tool", max_turns=max_turns, need_tools_kwargs=True, tools_kwargs=tools_kwargs(p))
                for i, p in enumerate(problems)]
    return [verl_row(p, preset, split, i, chat_messages(p, prompt_style), prompt_style=prompt_style)
            for i, p in enumerate(problems)]


def export(preset: str, splits: list[str], prompt_style: str, out: Path, limit: int = 0,
           interaction: str = "single-pass", max_turns: int = DEFAULT_MAX_TURNS, size: int | None = None,
           seed: int = 0) -> list[Path]:
    """Write one parquet file per split (and, for ``interaction="tool"``, the tool config); returns their paths.

    ``size``: the ``train`` split is ``size`` problems generated beyond the frozen splits with ``seed``
    (:func:`~countdown_gym.data.fresh.generate_fresh`) instead of the frozen one; ``limit``: the first ``limit`` of
    each split (0: all)."""
    if interaction not in INTERACTIONS:  # a typo ("tools") wrote single-pass rows
        raise ValueError(f"unknown interaction {interaction!r:.40}; choose one of {list(INTERACTIONS)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be an integer >= 0 (0: every problem), got {limit!r:.40}")
    if interaction != "tool" and max_turns != DEFAULT_MAX_TURNS:  # it would be ignored (the CLI's usage error)
        raise ValueError(f"max_turns={max_turns!r:.40} applies to interaction='tool' only, got {interaction!r:.40}")
    check_budget("max_turns", max_turns, allow_none=False)
    if check_budget("size", size) is not None and "train" not in splits:  # size 0 wrote a file with no columns
        raise ValueError(f"size makes the train split; splits {list(splits)!r:.60} have no train")
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = []
    for split in splits:
        problems = generate_fresh(preset, size, seed) if size is not None and split == "train" else load_split(preset, split)
        if limit:
            problems = problems[:limit]
        table = pa.Table.from_pylist(verl_rows(problems, preset, split, prompt_style, interaction, max_turns))
        path = out / preset / f"{split}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_aside(path) as tmp:
            pq.write_table(table, tmp)
        paths.append(path)
    if interaction == "tool":
        config = out / preset / TOOL_CONFIG
        dump_tool_config(config, max_turns)
        paths.append(config)
    return paths
