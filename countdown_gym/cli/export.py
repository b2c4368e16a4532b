"""``countdown-gym export``: the frozen splits as Hugging Face datasets, parquet, JSON lines or verl files.

    countdown-gym export --format hf --out data/countdown            # every preset, every split
    countdown-gym export --format parquet --preset longproc-0.5k --split train --size 20000 --seed 1 --out data/big
    countdown-gym export --format jsonl --prompt-style longproc --chat --out data/countdown   # prompt: chat messages

One folder per preset under ``--out``: ``hf`` a ``datasets.DatasetDict``, ``parquet`` / ``jsonl`` one file per
split, ``verl`` verl's prompt rows (:mod:`countdown_gym.integrations.verl_export`); all but ``verl`` get a dataset
card ``README.md`` (``dataset_card.md`` filled in) with the Hub's YAML metadata. Rows have the columns
:data:`COLUMNS`; ``--size N`` replaces each ``train`` split with ``N`` problems generated beyond the frozen splits
(:mod:`countdown_gym.data.fresh`). See ``docs/datasets.md``.
"""

from __future__ import annotations

import errno
import json
import string
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from countdown_gym.data.difficulty import (
    TIER_METRIC,
    TIER_THRESHOLDS,
    Difficulty,
    difficulty,
    split_labels,
    split_tiers,
    tier,
)
from countdown_gym.data.fresh import GENERATED, generate_fresh
from countdown_gym.data.splits import SPLIT_SPEC, SPLITS, load_split, split_sha256
from countdown_gym.dataclass_cli import check_min, not_regular, run, usage_error, written_aside
from countdown_gym.game.problem import Problem
from countdown_gym.game.text_format import PROMPT_STYLES, build_prompt, chat_messages
from countdown_gym.game.turn_game import DEFAULT_MAX_TURNS, check_budget

FORMATS = ("hf", "parquet", "jsonl", "verl")

COLUMNS: dict[str, str] = {
    "id": "the problem's id in the package (`<preset>/<split>/<index>`)",
    "preset": "the generator preset of the split",
    "split": "`train`, `validation` or `test`",
    "numbers": "the numbers to combine (list of int)",
    "target": "the number to reach (int)",
    "rules": "the rules, a struct (`countdown_gym.Rules.from_dict`): name, integer_only (exact division only), sign "
             "(positive, nonnegative or any intermediate results), value_limit (results below it; null: none), use_all",
    "solution": "one solution expression (`countdown_gym.solve`), accepted by `countdown_gym.verify` inside `<answer>` tags",
    "num_solutions": "distinct solution expressions (`countdown_gym.solve`)",
    "search_nodes": "moves the reference depth-first search tries before reaching the target (LongProc trace length)",
    "first_wrong_depth": "moves made when the reference search first enters a dead end (null: its first path is right)",
    "wrong_moves": "moves of the reference search into dead ends before the solution",
    "good_first_moves": "first moves after which the target is still reachable",
    "legal_first_moves": "legal first moves",
    "tier": "difficulty tier: easy, medium or hard (cut on search_nodes, about equal thirds of the test split)",
    "prompt": "the prompt in the export's `--prompt-style`: plain text (`build_prompt`), or with `--chat` chat messages "
              "ending with the user's turn (`countdown_gym.game.text_format.chat_messages`)",
    **{f"prompt_{s}": f"the ready prompt in the `{s}` style (`countdown_gym.game.text_format.build_prompt`)" for s in PROMPT_STYLES},
}
"""Every column of an exported row, with its meaning (the dataset card lists them)."""


RULES_FIELDS: tuple[str, ...] = ("name", "integer_only", "sign", "value_limit", "use_all")


def split_rows(preset: str, split: str, prompt_style: str = "tinyzero", chat: bool = False) -> list[dict[str, Any]]:
    """The exported rows of one frozen split, in split order (columns :data:`COLUMNS`; ``prompt`` in
    ``prompt_style``, chat messages when ``chat``)."""
    return _rows(load_split(preset, split), split_labels(preset, split), split_tiers(preset, split), preset, split,
                 prompt_style, chat)


def generated_rows(preset: str, size: int, seed: int = 0, prompt_style: str = "tinyzero", chat: bool = False,
                   progress: bool = False) -> list[dict[str, Any]]:
    """``size`` exported rows of problems generated beyond the frozen splits (:func:`~countdown_gym.data.fresh.
    generate_fresh`: deterministic by ``seed``, none a frozen validation or test problem), as a ``train`` split, each
    with its measured difficulty labels and tier (the preset's cut points)."""
    from tqdm import tqdm

    problems = generate_fresh(preset, size, seed)
    labels = [difficulty(p) for p in tqdm(problems, desc=f"{preset}: difficulty", leave=False, disable=not progress)]
    tiers = [tier(d, preset) for d in labels]
    return _rows(problems, labels, tiers, preset, "train", prompt_style, chat)


def _rows(problems: Sequence[Problem], labels: Sequence[Difficulty], tiers: Sequence[str], preset: str, split: str,
          prompt_style: str, chat: bool) -> list[dict[str, Any]]:
    rows = []  # an unknown prompt_style: build_prompt's ValueError
    for p, d, t in zip(problems, labels, tiers, strict=True):
        row: dict[str, Any] = {
            "id": p.id, "preset": preset, "split": split, "numbers": list(p.numbers), "target": p.target,
            "rules": {k: p.rules.to_dict()[k] for k in RULES_FIELDS},
            "prompt": chat_messages(p, prompt_style) if chat else build_prompt(p, prompt_style),
            **d.to_dict(), "tier": t, **{f"prompt_{style}": build_prompt(p, style) for style in PROMPT_STYLES},
        }  # fmt: skip
        rows.append({k: row[k] for k in COLUMNS})
    return rows


def _features(chat: bool = False) -> Any:
    from datasets import Features, List, Value

    rules = {"name": Value("string"), "integer_only": Value("bool"), "sign": Value("string"),
             "value_limit": Value("int64"), "use_all": Value("bool")}
    message = {"role": Value("string"), "content": Value("string")}
    kinds = {"numbers": List(Value("int64")), "target": Value("int64"), "num_solutions": Value("int64"),
             "search_nodes": Value("int64"), "first_wrong_depth": Value("int64"), "wrong_moves": Value("int64"),
             "good_first_moves": Value("int64"), "legal_first_moves": Value("int64"), "rules": rules,
             "prompt": List(message) if chat else Value("string")}
    return Features({k: kinds.get(k, Value("string")) for k in COLUMNS})


def dataset_card(fmt: str, sizes: dict[str, dict[str, tuple[int, int]]], prompt_style: str = "tinyzero",
                 chat: bool = False, seed: int | None = None) -> str:
    """The ``README.md`` of an export: Hub YAML metadata (configs, features, sizes), usage, what the data is,
    citation. ``sizes[preset][split]`` is ``(rows, bytes)``; ``seed``: the ``train`` splits were generated beyond
    the frozen splits with this seed (``--size``)."""
    import yaml  # a dependency of datasets, which every format with a card needs

    from countdown_gym import __version__

    counts = {p: {s: n for s, (n, _) in splits.items()} for p, splits in sizes.items()}
    total = sum(sum(c.values()) for c in counts.values())
    meta: dict[str, Any] = {
        "license": "mit", "language": ["en"], "pretty_name": "Countdown (countdown-gym frozen splits)",
        "task_categories": ["text-generation"], "tags": ["countdown", "reasoning", "math", "reinforcement-learning"],
        "size_categories": [next((name for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"))
                                  if total < limit), "100K<n<1M")],
    }
    if fmt in ("parquet", "jsonl"):
        meta["configs"] = [
            {"config_name": preset, "data_files": [{"split": s, "path": f"{preset}/{s}.{fmt}"} for s in splits],
             **({"default": True} if k == 0 else {})}
            for k, (preset, splits) in enumerate(counts.items())
        ]
    features = _features(chat)._to_yaml_list()
    meta["dataset_info"] = [
        {"config_name": preset, "features": features,
         "splits": [{"name": s, "num_bytes": b, "num_examples": n} for s, (n, b) in sizes[preset].items()]}
        for preset in counts
    ]
    table = "\n".join(f"| `{c}` | {meaning} |" for c, meaning in COLUMNS.items())
    size_rows = "\n".join(
        f"| `{preset}` | " + " | ".join(str(splits.get(s, "-")) for s in SPLITS)
        + " | a = {}, b = {} |".format(*TIER_THRESHOLDS[preset])
        for preset, splits in counts.items()
    )
    generated = seed is not None and any("train" in splits for splits in counts.values())
    hashes = "\n".join(f"- `{p}/{s}`: `{split_sha256(p, s)}`" for p, splits in counts.items() for s in splits
                       if not (generated and s == "train"))
    fresh = (f"""

The `train` split of each preset here is not the frozen one: its problems were generated beyond the frozen splits
(`countdown-gym export --size N --seed {seed}`, `countdown_gym.data.fresh.generate_fresh(preset, N, seed={seed})`, the
same for the same seed), under the preset's rules, and none shares a (sorted numbers, target) pair with a frozen
validation or test problem of any preset; their difficulty labels and tiers were measured by the solver and their
ids read `<preset>/{GENERATED}-{seed}/<index>`.""" if generated else "")
    card = (resources.files("countdown_gym.cli") / "dataset_card.md").read_text(encoding="utf-8")
    load = {"hf": 'from datasets import load_from_disk\nds = load_from_disk("<this folder>/tinyzero")   # a DatasetDict'}.get(
        fmt, 'from datasets import load_dataset\nds = load_dataset("<this folder>", "tinyzero")   # or the Hub repo id')
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n" + string.Template(card).substitute(
        version=__version__, fmt=fmt, fresh=fresh, prompt_style=prompt_style, chat_flag=" --chat" if chat else "",
        kind="chat messages ending with the user's turn" if chat else "plain text", load=load, tier_metric=TIER_METRIC,
        size_rows=size_rows, table=table, no_hashes=" (the generated train splits have none)" if generated else "",
        hashes=hashes)


def export(fmt: str, out: str | Path, presets: Sequence[str] | None = None, splits: Sequence[str] | None = None,
           prompt_style: str = "tinyzero", interaction: str = "single-pass", chat: bool = False,
           size: int | None = None, seed: int = 0, progress: bool = False, limit: int = 0,
           max_turns: int = DEFAULT_MAX_TURNS) -> list[Path]:
    """Write the chosen splits in ``fmt`` under ``out`` (see the module docstring); returns the paths written.

    ``prompt_style`` and ``chat`` choose the ``prompt`` column (verl rows are always chat messages; verl alone takes
    ``limit``, the first problems of each split, and ``max_turns``, the tool game's turn budget). ``size``: the
    ``train`` split of each preset is ``size`` problems generated beyond the frozen splits with ``seed``
    (:func:`generated_rows`) instead of the frozen one."""
    from tqdm import tqdm

    for what, value, allowed in (("format", fmt, FORMATS), ("prompt style", prompt_style, PROMPT_STYLES)):
        if value not in allowed:
            raise ValueError(f"unknown {what} {value!r}; choose one of {list(allowed)}")
    presets, splits = ([x] if isinstance(x, str) else list(x or default)  # "test" was the splits "t", "e", "s"
                       for x, default in ((presets, SPLIT_SPEC), (splits, SPLITS)))
    bad = [p for p in presets if p not in SPLIT_SPEC] + [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"unknown presets or splits {bad}; presets: {sorted(SPLIT_SPEC)}, splits: {list(SPLITS)}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE
                             or "train" not in splits):
        raise ValueError(f"size must be an int in 1..{MAX_SIZE:,} and the splits must include train (it replaces the frozen "
                         f"train split), got size={size!r}, splits={splits}")
    out = Path(out)
    if fmt == "verl":
        from countdown_gym.integrations.verl_export import export as verl_export

        return [p for preset in presets
                for p in verl_export(preset, splits, prompt_style, out, limit=limit, interaction=interaction,
                                     max_turns=max_turns, size=size, seed=seed)]
    paths: list[Path] = []
    sizes: dict[str, dict[str, tuple[int, int]]] = {}
    features = _features(chat) if fmt in ("hf", "parquet") else None
    for preset in tqdm(presets, desc="presets", leave=False):
        tables = {}
        sizes[preset] = {}
        for split in splits:
            rows = (generated_rows(preset, size, seed, prompt_style, chat, progress) if size is not None and split == "train"
                    else split_rows(preset, split, prompt_style, chat))
            (out / preset).mkdir(parents=True, exist_ok=True)
            if fmt == "jsonl":
                data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode("utf-8")
                paths.append(_write(out / preset / f"{split}.jsonl", Path.write_bytes, data))
                sizes[preset][split] = (len(rows), len(data))
                continue
            from datasets import Dataset

            tables[split] = Dataset.from_list(rows, features=features, split=split)
            sizes[preset][split] = (len(rows), tables[split].data.nbytes)
            if fmt == "parquet":
                paths.append(_write(out / preset / f"{split}.parquet", tables[split].to_parquet))
        if fmt == "hf":
            from datasets import DatasetDict

            with tempfile.TemporaryDirectory(prefix=".export-", dir=out / preset) as new:  # then each split folder and
                DatasetDict(tables).save_to_disk(new)  # dataset_dict.json last take their place whole; other files stay
                for entry in sorted(Path(new).iterdir(), key=lambda p: p.name == "dataset_dict.json"):
                    with written_aside(out / preset / entry.name) as tmp:
                        entry.rename(tmp)
            paths.append(out / preset)
    card = dataset_card(fmt, sizes, prompt_style, chat, None if size is None else seed)
    return [*paths, _write(out / "README.md", Path.write_text, card, "utf-8")]


MAX_SIZE = 10_000_000
"""The most problems ``--size`` generates (hours of solver time on one core)."""


def _write(path: Path, write: Callable[..., Any], *args: Any) -> Path:
    """``path`` written whole by ``write(tmp, *args)`` (:func:`written_aside`), unless something other than a regular file
    stands there (a FIFO, device or folder is not an earlier export: refused rather than replaced)."""
    if not_regular(path) is not None:
        raise OSError(errno.EEXIST, f"{path} exists and is not a regular file")
    with written_aside(path) as tmp:
        write(tmp, *args)
    return path


def _choice(value: str, allowed: Sequence[str], what: str) -> list[str] | None:
    """None for ``"all"``, else the comma-separated names; ``ValueError`` naming ``--what`` for an unknown or no name."""
    if value == "all":
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]  # "tinyzero, hard", as the sequence flags read it
    bad = [v for v in names if v not in allowed]
    if bad or not names or len(set(names)) < len(names):  # a name twice: exported twice
        raise ValueError(f"--{what} must be 'all' or a comma-separated subset of {list(allowed)}, got {value!r}")
    return names


@dataclass
class ExportOptions:
    """Export the frozen splits (with difficulty labels, a reference solution and ready prompts) as a Hugging Face
    dataset, parquet or JSON lines with a dataset card, or as verl prompt rows."""

    format: Literal[FORMATS]
    """hf (datasets.save_to_disk), parquet, jsonl or verl"""
    out: str
    """output folder (one subfolder per preset)"""
    preset: str = "all"
    """'all' or a comma-separated subset of the presets"""
    split: str = "all"
    """'all' or a comma-separated subset of train, validation, test"""
    prompt_style: Literal[PROMPT_STYLES] = "tinyzero"
    """the style of the prompt column (and of verl's prompts)"""
    chat: bool = False
    """hf/parquet/jsonl: the prompt column as chat messages ending with the user's turn (default: plain text);
    verl's prompts are always chat messages"""
    interaction: Literal["single-pass", "tool"] = "single-pass"
    """verl: single-pass prompts, or verl's multi-turn tool agent loop"""
    max_turns: int = DEFAULT_MAX_TURNS
    """verl --interaction tool: the game's turn budget"""
    limit: int = 0
    """verl: export only the first N problems of each split (0: all)"""
    size: int | None = None
    """the train split of each preset: this many problems generated beyond the frozen splits (none a frozen
    validation or test problem, difficulty measured) instead of the frozen train split (default)"""
    seed: int = 0
    """with --size: the generator's seed (the same seed, the same problems)"""

    def __post_init__(self) -> None:
        if not self.out.strip():  # an unset shell variable: the files would land in the current folder
            raise ValueError("--out is empty; give the output folder")
        _choice(self.preset, sorted(SPLIT_SPEC), "preset")
        splits = _choice(self.split, SPLITS, "split")
        if self.size is not None and not 1 <= self.size <= MAX_SIZE:
            raise ValueError(f"--size must be a number of problems in 1..{MAX_SIZE:,}, got {self.size}")
        if self.size is not None and splits is not None and "train" not in splits:
            raise ValueError(f"--size makes the train split; --split {self.split} has no train")
        check_min(self, 0, "seed", "limit")
        check_min(self, 1, "max_turns")
        check_budget("--max-turns", self.max_turns, allow_none=False)  # <= sys.maxsize: pyarrow's int64
        if self.format != "verl" and (self.interaction != "single-pass" or self.limit):
            flag = f"--interaction {self.interaction}" if self.interaction != "single-pass" else f"--limit {self.limit}"
            raise ValueError(f"{flag} applies to --format verl only; --format {self.format} exports whole splits of "
                             "single-pass prompts")
        if self.interaction != "tool" and self.max_turns != DEFAULT_MAX_TURNS:  # it would be ignored
            raise ValueError(f"--max-turns {self.max_turns} applies to --format verl --interaction tool only")


PROG = "countdown-gym export"


def _export(args: ExportOptions) -> int:
    needs = "pyarrow" if args.format == "verl" else "datasets"  # jsonl too: its dataset card
    try:
        __import__(needs)
    except ImportError:
        usage_error(f"--format {args.format} needs {needs}: pip install 'countdown-gym[llm]'", prog=PROG)
    try:
        paths = export(args.format, args.out, _choice(args.preset, sorted(SPLIT_SPEC), "preset"),
                       _choice(args.split, SPLITS, "split"), args.prompt_style, args.interaction, args.chat,
                       args.size, args.seed, progress=True, limit=args.limit, max_turns=args.max_turns)
    except OSError as exc:  # named: the file where a folder goes (or the folder where a file goes), else --out
        where = exc.filename2 or exc.filename or "there"
        print(f"{PROG}: error: --out {args.out}: cannot write {where} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    except ImportError as exc:  # --interaction tool derives the tool schemas with transformers
        usage_error(str(exc), prog=PROG)
    for path in paths:
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``countdown-gym export``: parse the options, export, print the paths written (0; 1 failure; 2 usage error)."""
    return run(ExportOptions, argv, _export, prog=PROG)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
