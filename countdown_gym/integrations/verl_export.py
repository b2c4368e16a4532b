"""Export the frozen splits to verl's parquet prompt format (installed with the package).

    countdown-gym export --format verl --preset longproc-0.5k --prompt-style tinyzero --out data/verl
    python scripts/export_verl.py --preset longproc-0.5k --prompt-style tinyzero --out data/verl   # the same

writes ``<out>/<preset>/<split>.parquet``, one row per problem: ``data_source`` (``"countdown_gym/<preset>"``),
``prompt`` (:func:`~countdown_gym.game.text_format.chat_messages` in the chosen style, ending with the user's turn:
verl opens the assistant turn), ``ability`` (``"math"``), ``reward_model`` (``{"style": "rule", "ground_truth":
...}``) and ``extra_info`` (``split``, ``index``, ``id``, ``preset``, ``prompt_style``); score with
``countdown_gym/integrations/verl.py::compute_score``. ``--interaction tool`` exports for verl's tool agent loop:
the tool-calling puzzle text, ``agent_name="tool_agent"``, every tool's ground truth in ``extra_info.tools_kwargs``,
and ``<out>/<preset>/countdown_tools.yaml`` (``multi_turn.tool_config_path``); score with
``countdown_gym/integrations/verl_multiturn.py::compute_score`` (``docs/multiturn.md``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from countdown_gym.data.fresh import generate_fresh
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, load_split
from countdown_gym.dataclass_cli import check_choice, check_min, run, usage_error, written_aside
from countdown_gym.game.problem import Problem
from countdown_gym.game.text_format import PROMPT_STYLES, chat_messages
from countdown_gym.game.turn_format import tool_prompt
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS
from countdown_gym.integrations.verl import verl_row
from countdown_gym.integrations.verl_multiturn import dump_tool_config, tools_kwargs

TOOL_CONFIG = "countdown_tools.yaml"


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
    (:func:`~countdown_gym.data.fresh.generate_fresh`) instead of the frozen one."""
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


@dataclass
class VerlExportOptions:
    """Export the frozen splits to verl's parquet prompt format."""

    preset: str = "longproc-0.5k"
    """frozen split preset"""
    splits: tuple[str, ...] = SPLITS
    """splits to export (separate or comma-separated names: train, validation, test)"""
    prompt_style: Literal[PROMPT_STYLES] = "tinyzero"
    """the prompt's style"""
    out: str = "data/verl"
    """output directory"""
    limit: int = 0
    """export only the first N problems of each split (0 = all)"""
    interaction: Literal["single-pass", "tool"] = "single-pass"
    """single-pass: one completion per answer; tool: verl's multi-turn tool agent loop"""
    max_turns: int = DEFAULT_MAX_TURNS
    """tool: the game's turn budget"""

    def __post_init__(self) -> None:
        check_choice(self, "preset", sorted(SPLIT_SPEC))
        check_min(self, 1, "max_turns")
        check_min(self, 0, "limit")
        bad = [s for s in self.splits if s not in SPLITS]
        if bad or not self.splits:
            raise ValueError(f"--splits must name some of {list(SPLITS)}, got {','.join(self.splits)!r}")


def main(argv: list[str] | None = None, prog: str = "scripts/export_verl.py") -> int:
    """The command line of the verl export (``scripts/export_verl.py``; ``countdown-gym export --format verl`` writes
    the same rows): 0 written, 1 cannot write, 2 usage error."""

    def body(args: VerlExportOptions) -> int:
        try:
            paths = export(args.preset, list(args.splits), args.prompt_style, Path(args.out), args.limit,
                           args.interaction, args.max_turns)
        except OSError as exc:
            print(f"{prog}: error: --out {args.out}: cannot write there ({exc.strerror or exc})", file=sys.stderr)
            return 1
        except ImportError as exc:  # pyarrow (the parquet files), or transformers (--interaction tool's tool schemas)
            usage_error("the verl export needs pyarrow: pip install 'countdown-gym[bench]' (or pip install pyarrow)"
                        if exc.name == "pyarrow" else str(exc), prog=prog)
        for path in paths:
            print(path)
        return 0

    return run(VerlExportOptions, argv, body, prog=prog, description=__doc__.split("\n")[0])
