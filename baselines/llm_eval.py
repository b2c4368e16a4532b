"""pass@1 (greedy) and pass@k (sampled) of any Hugging Face causal LM on a frozen split.

    python baselines/llm_eval.py                                   # the shipped tiny model, longproc-0.5k test
    python baselines/llm_eval.py --model Qwen/Qwen2.5-0.5B-Instruct --prompt-style tinyzero --limit 200
    python baselines/llm_eval.py --model path/to/checkpoint --k 8 --backend vllm

The play and its records are ``baselines.lm.evaluation.evaluate``; the answers go to a leaderboard submission when
the whole split was evaluated, else to a JSONL of completions (docs/tiny_lm.md). pass@k here uses the k samples only
(the leaderboard adds the greedy answer).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from baselines.lm.evaluation import Evaluation, Play
from baselines.lm.evaluation import evaluate as play_and_score
from baselines.lm.generation import Sampling, vllm_engine
from baselines.lm.tiny_lm import SHIPPED_CHECKPOINT, SplitRun, detect_interaction, load_causal_lm
from countdown_gym import dataclass_cli
from countdown_gym.data.pass_rates import pass_rates_text
from countdown_gym.data.splits import SPLITS, load_split
from countdown_gym.game.problem import Problem
from countdown_gym.game.text_format import PROMPT_STYLES, build_prompt, render_chat_prompt
from countdown_gym.game.turn_format import TURN_PROMPT_STYLES
from countdown_gym.game.verifier import verify
from countdown_gym.integrations.trl_rollout import DEFAULT_MAX_TURN_TOKENS
from countdown_gym.runkit.runs import run_directory, write_text_atomic

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class EvalConfig(SplitRun):
    """Options of ``llm_eval.py`` (every field is a ``--flag``)."""

    model: str = str(SHIPPED_CHECKPOINT)  # local directory or hub id of any causal LM
    interaction: str = "auto"
    """``single-pass`` (one completion per answer), ``multi-turn`` (one move per turn, CountdownMultiTurn-v0 computes)
    or ``auto``: what the model was trained for (its ``training.json`` or its GRPO run's ``options.json``)."""
    split: str = "test"
    limit: int = 0  # evaluate only N problems (0 = all from ``offset`` on)
    offset: int = 0  # skip the first N problems of the split
    prompt_style: str = "compact"  # ``compact`` (the shipped tiny model), ``longproc`` or ``tinyzero``
    max_turn_tokens: int = DEFAULT_MAX_TURN_TOKENS  # multi-turn: one turn's token budget (a GRPO run's --max-turn-tokens)
    chat_template: str = "auto"  # ``auto``: the tokenizer's chat template when it has one; ``on`` / ``off``
    k: int = 8  # sampled completions per problem for pass@k and per-sample success (0 = greedy only)
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 320
    batch_size: int = 128
    backend: str = "hf"  # ``hf`` (transformers generate) or ``vllm``
    dtype: str = "float32"
    device: str = "auto"
    """Where the model runs (``--backend hf``): ``auto`` (a GPU when CUDA is available, else the CPU), ``cuda:1``..."""
    out: str = ""
    """Output path: a leaderboard submission ``.jsonl`` (whole split) or completions JSONL; empty = auto (an existing
    file of that name stops the run before generating)."""
    agent: str = ""
    authors: str = "countdown-gym baselines"
    method: str = "SFT on compact search traces"
    reward_variant: str = "none"  # the RL reward the model was trained with, for the submission (``none``: SFT only)
    results_json: str = ""  # also write the metrics to this JSON file
    dry_run: bool = False  # load no weights: print the generation settings, device and memory estimate, exit 0
    pass_rates: str = ""
    """Also write each problem's sampled pass rate to this JSONL (``id``, ``samples``, ``correct``), the input of
    ``llm_grpo.py --train-pass-rates``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        styles = (*PROMPT_STYLES, *(s for s in TURN_PROMPT_STYLES if s not in PROMPT_STYLES))
        for name, allowed in (("split", SPLITS), ("prompt_style", styles),
                              ("chat_template", ("auto", "on", "off")), ("backend", ("hf", "vllm")), ("dtype", DTYPES)):
            dataclass_cli.check_choice(self, name, allowed)
        dataclass_cli.check_choice(self, "interaction", ("auto", "single-pass", "multi-turn"))
        if self.interaction == "auto":  # what the model was trained for (reads no weights)
            self.interaction = detect_interaction(self.model)
        if self.prompt_style not in (ok := TURN_PROMPT_STYLES if self.interaction == "multi-turn" else PROMPT_STYLES):
            raise ValueError(f"--prompt-style {self.prompt_style} is not a {self.interaction} style: choose one of {list(ok)}")
        dataclass_cli.check_min(self, 1, "max_new_tokens", "batch_size", "max_turn_tokens")
        dataclass_cli.check_min(self, 0, "k", "offset", "limit")
        Sampling(temperature=self.temperature, top_p=self.top_p)  # --temperature > 0, --top-p in (0, 1]
        if not self.k:
            dataclass_cli.check_unused(self, "--k 0 (greedy only)", only=("temperature", "top_p"))
        if self.backend == "vllm":  # vLLM places the model itself
            dataclass_cli.check_unused(self, "--backend vllm", only=("device",))
        dataclass_cli.check_unused(self, f"--interaction {self.interaction}", only=(  # a template wraps single-pass prompts
            ("chat_template",) if self.interaction == "multi-turn" else ("max_turns", "max_turn_tokens")))
        try:
            torch.device(self.device if self.device != "auto" else "cpu")
        except RuntimeError:
            raise ValueError(f"--device must be auto or a torch device (cpu, cuda, cuda:1...), got {self.device!r}") from None
        if self.pass_rates and self.k < 1:
            raise ValueError("--pass-rates needs sampled completions (--k >= 1)")


def make_prompts(problems: list[Problem], tokenizer, style: str, chat_template: str = "auto") -> list[str]:
    """The prompt text of each problem, inside the tokenizer's chat template when asked / available."""
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if chat_template == "on" and not has_template:
        raise ValueError("--chat-template on, but the tokenizer has no chat template")
    if chat_template == "on" or (chat_template == "auto" and has_template):
        return [render_chat_prompt(p, tokenizer, style) for p in problems]  # tinyzero: the assistant turn continued
    return [build_prompt(p, style) for p in problems]


def failure_breakdown(problems: list[Problem], completions: list[str]) -> dict:
    """Where the completions go wrong, from their replay through the text environment: the fractions ``correct``,
    ``hallucinated_target`` (an invalid move claims the target), ``invalid_step``, ``valid_but_wrong``, ``backtracked``
    (a second move from the starting numbers outside the ``<Solution>`` block) and by ``first_invalid_reason``;
    ``first_move_on_path``: of valid first moves, those that keep the target reachable."""
    from collections import Counter

    from countdown_gym.game.solver import canonical
    from countdown_gym.integrations.trl import replay
    from countdown_gym.rewards.terms import perfect_moves

    n = max(len(completions), 1)
    kinds: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    on_path = with_first = backtracked = 0
    for problem, text in zip(problems, completions, strict=True):
        r = replay(problem, text)
        moves = r.transitions
        start = canonical(problem.numbers)
        if moves and moves[0]["valid"]:
            with_first += 1
            on_path += perfect_moves(moves[:1])[0] > 0  # the oracle reward's own rule
        backtracked += sum(1 for t in moves if t["valid"] and not t["in_solution"] and canonical(t["state"]) == start) > 1
        bad = [t for t in moves if not t["valid"]]
        if bad:
            reasons[bad[0]["reason"]] += 1
        if r.verdict.correct:
            kinds["correct"] += 1
        elif any(t["move"] is not None and t["move"][3] == problem.target for t in bad):
            kinds["hallucinated_target"] += 1
        elif bad:
            kinds["invalid_step"] += 1
        else:
            kinds["valid_but_wrong"] += 1
    out = {k: kinds[k] / n for k in ("correct", "hallucinated_target", "invalid_step", "valid_but_wrong")}
    out["first_move_on_path"] = on_path / with_first if with_first else None
    out["backtracked"] = backtracked / n
    out["first_invalid_reason"] = {k: v / n for k, v in reasons.most_common()}
    return out


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when CUDA is available, else ``cpu``; anything else as given."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def load_model(name: str, dtype: str = "float32", device: str = "auto"):
    """``(model, tokenizer)`` from a local path or hub id, on ``device`` (see :func:`resolve_device`)."""
    where = resolve_device(device)
    if (dev := torch.device(where)).type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():
        raise SystemExit(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    model, tokenizer = load_causal_lm(name, dtype=DTYPES[dtype])
    model = model.to(where)  # a no-op where it already is
    model.eval()
    return model, tokenizer


def select(problems: list[Problem], cfg: EvalConfig) -> list[Problem]:
    """``problems[offset : offset + limit]`` (``limit`` 0 = to the end); an error when nothing is left."""
    chosen = problems[cfg.offset : cfg.offset + cfg.limit if cfg.limit else None]
    if not chosen:
        raise SystemExit(f"--offset {cfg.offset} --limit {cfg.limit} selects no problem of {len(problems)}")
    return chosen


def evaluate(cfg: EvalConfig, problems: list[Problem] | None = None, progress: bool = True) -> dict:
    """Run the evaluation of ``cfg`` (``baselines.lm.evaluation.evaluate``); returns metrics plus the completions."""
    torch.set_num_threads(cfg.threads)
    if problems is None:
        problems = select(load_split(cfg.preset, cfg.split), cfg)
    turns = cfg.interaction == "multi-turn"
    if turns and cfg.backend != "hf":
        raise SystemExit("--interaction multi-turn generates turn by turn with transformers (--backend hf)")
    if cfg.backend == "hf":
        model, tokenizer = load_model(cfg.model, cfg.dtype, cfg.device)
    else:  # vLLM loads the weights itself
        from transformers import AutoTokenizer

        model, tokenizer = None, AutoTokenizer.from_pretrained(cfg.model)
    prompts = None
    if not turns:
        try:
            prompts = make_prompts(problems, tokenizer, cfg.prompt_style, cfg.chat_template)
        except ValueError as exc:  # --chat-template on with a tokenizer that has none
            raise SystemExit(f"{cfg.model}: {exc}") from None
    res: dict = {"problems": len(problems), "model": cfg.model, "preset": cfg.preset, "split": cfg.split, "prompt_style": cfg.prompt_style}
    if model is not None:
        res["params"] = f"{model.num_parameters() / 1e6:.2f}M"  # as a submission states it; tied weights counted once
    if turns:
        res.update(interaction="multi-turn", max_turns=cfg.max_turns, max_turn_tokens=cfg.max_turn_tokens)
    engine = None
    if cfg.backend == "vllm":  # one engine for the greedy and the sampled pass
        longest = max(len(tokenizer(p)["input_ids"]) for p in prompts or [""])
        engine = vllm_engine(cfg.model, cfg.dtype, cfg.seed, longest + cfg.max_new_tokens)
    how = Play(max_turns=cfg.max_turns if turns else None, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
               prompt_style=cfg.prompt_style, max_turn_tokens=cfg.max_turn_tokens, engine=engine)
    ev = play_and_score(model, tokenizer, problems, how, prompts=prompts, samples=cfg.k, seed=cfg.seed, progress=progress,
                        sampling=Sampling(temperature=cfg.temperature, top_p=cfg.top_p))
    res.update(metrics(ev, problems))
    return res


def metrics(ev: Evaluation, problems: list[Problem]) -> dict:
    """The printed metrics of an evaluation (every rate with its ``_se``) and its answers."""
    rates, n, k = ev.rates(), max(len(ev.greedy), 1), ev.samples
    turns = bool(ev.greedy) and ev.greedy[0].turns is not None
    res: dict = {"pass@1_greedy": rates["greedy_success"], "pass@1_greedy_se": rates["greedy_success_se"],
                 "greedy_tokens_per_s": ev.greedy_tokens / ev.greedy_seconds if ev.greedy_seconds > 0 and ev.greedy_tokens else None,
                 "greedy_seconds": ev.greedy_seconds, "greedy_mean_tokens": ev.greedy_tokens / n}
    res["completions_greedy"] = [r.answer for r in ev.greedy]
    if turns:
        res.update(greedy_mean_turns=sum(r.turns or 0 for r in ev.greedy) / n,
                   greedy_invalid_turn_frac=rates["greedy_invalid_frac"], conversations_greedy=[r.text for r in ev.greedy])
    else:
        res["greedy_failures"] = failure_breakdown(problems, res["completions_greedy"])
    if k:
        res.update({f"pass@{k}": rates["pass_at_k"], f"pass@{k}_se": rates["pass_at_k_se"],
                    "per_sample_success": rates["sampled_success"], "per_sample_success_se": rates["sampled_success_se"],
                    "sample_tokens_per_s": ev.sampled_tokens / ev.sampled_seconds if ev.sampled_seconds > 0 and ev.sampled_tokens else None,
                    "sample_seconds": ev.sampled_seconds,
                    "completions_sampled": [[r.answer for r in rs] for rs in ev.sampled]})
    return res


def submission_fields(cfg: EvalConfig, command: str, params: str) -> dict:
    """The metadata of the leaderboard submission an evaluation of the whole split writes."""
    n = cfg.k + 1
    return dict(
        agent=_agent_name(cfg), authors=cfg.authors, model=cfg.model, model_size=params, method=cfg.method,
        reward_variant=cfg.reward_variant, preset=cfg.preset, split=cfg.split,
        sampling={"k": n, "temperature": cfg.temperature if cfg.k else 0.0, "first_answer": "greedy"},
        compute=f"CPU, {cfg.threads} thread(s)", command=command, interaction=cfg.interaction,
        notes=((f"multi-turn (CountdownMultiTurn-v0, at most {cfg.max_turns} turns): each answer is the <Solution> block of "
                "the moves an episode played; " if cfg.interaction == "multi-turn" else "")
               + (f"answer 1 is the greedy completion, answers 2..{n} are samples at temperature {cfg.temperature}"
                  if n > 1 else "greedy completion")),
    )


def _agent_name(cfg: EvalConfig) -> str:
    """``--agent``, else the model folder's name (``runs/sparse/final`` -> ``sparse-final``)."""
    if cfg.agent:
        return cfg.agent
    path = Path(cfg.model.rstrip("/"))
    if (path.name in ("final", "best") or path.name.startswith("checkpoint-")) and path.parent.name:
        return f"{path.parent.name}-{path.name}"
    return path.name


def check_submission_fields(cfg: EvalConfig, problems: list[Problem], command: str) -> None:
    """Fail before any generation when the submission this run would write breaks the leaderboard schema."""
    if not _submits(cfg, problems):
        return
    from countdown_gym.leaderboard import SubmissionError, build_header, check_header

    try:
        check_header(build_header(**submission_fields(cfg, command, "unknown"), answer_kind="completions"))
    except SubmissionError as exc:
        raise SystemExit(f"cannot write a leaderboard submission with these options: {exc.reason}") from None


def _submits(cfg: EvalConfig, problems: list[Problem]) -> bool:
    """Whether this run writes a leaderboard submission (it evaluates the whole split)."""
    return len(problems) == len(load_split(cfg.preset, cfg.split))


def output_path(cfg: EvalConfig, problems: list[Problem]) -> Path:
    """``--out``, else the automatic name: ``leaderboard/submissions/<agent>.<preset>.<split>.jsonl``, or a
    completions file under ``runs/llm_eval/`` (not the current directory)."""
    if cfg.out:
        return Path(cfg.out)
    if _submits(cfg, problems):
        return Path(f"leaderboard/submissions/{_agent_name(cfg)}.{cfg.preset}.{cfg.split}.jsonl")
    return Path("runs") / "llm_eval" / f"{_agent_name(cfg)}-{cfg.preset}-{cfg.split}-completions.jsonl"


def write_outputs(cfg: EvalConfig, res: dict, problems: list[Problem], command: str) -> Path:
    """A leaderboard submission when the whole split was evaluated, else a JSONL of completions."""
    sampled = res.get("completions_sampled") or [[]] * len(res["completions_greedy"])
    answers = [[g, *s] for g, s in zip(res["completions_greedy"], sampled, strict=True)]
    out = output_path(cfg, problems)
    out.parent.mkdir(parents=True, exist_ok=True)
    if _submits(cfg, problems):
        from countdown_gym.leaderboard import write_submission

        write_submission(str(out), answers=answers, claimed={"pass@1": res["pass@1_greedy"]},
                         **submission_fields(cfg, command, str(res.get("params", "unknown"))))
        return out
    return write_text_atomic(out, "".join(json.dumps({"id": p.id, "numbers": list(p.numbers), "target": p.target,
                                                       "completions": a}) + "\n" for p, a in zip(problems, answers, strict=True)))


def write_pass_rates(path: str | Path, problems: list[Problem], sampled: list[list[str]]) -> None:
    """The pass-rate file (``countdown_gym/data/pass_rates.py``) of each problem's sampled completions."""
    solved = [[verify(p, c).correct for c in cs] for p, cs in zip(problems, sampled, strict=True)]
    write_text_atomic(path, pass_rates_text(problems, solved))


def dry_run(cfg: EvalConfig, problems: list[Problem]) -> dict:
    """What a run of ``cfg`` would do, from the model's config alone (no weights): settings, device, memory."""
    from baselines.lm import gpu_plan

    plan: dict[str, Any] = {"model": cfg.model, "interaction": cfg.interaction, "backend": cfg.backend,
                            "device": resolve_device(cfg.device), "dtype": cfg.dtype, "problems": len(problems),
                            "greedy": 1, "sampled_per_problem": cfg.k, "temperature": cfg.temperature, "top_p": cfg.top_p,
                            "max_new_tokens": cfg.max_new_tokens, "batch_size": cfg.batch_size}
    try:
        shape = gpu_plan.model_shape(cfg.model)
    except gpu_plan.PlanError as exc:
        plan["memory"] = f"unknown: {exc}"
        return plan
    seq = 512 + cfg.max_new_tokens  # a prompt budget of 512 tokens
    mem = gpu_plan.generation_memory(shape, torch.finfo(DTYPES[cfg.dtype]).bits // 8, cfg.batch_size, seq)
    plan["memory"] = {"parameters": shape.parameters, "config": shape.source, "weights_gb": round(mem["weights"] / gpu_plan.GB, 3),
                      "kv_cache_gb": round(mem["kv_cache"] / gpu_plan.GB, 3), "kv_cache_for": f"{cfg.batch_size} sequences of {seq} tokens",
                      "total_gb": round(mem["total"] / gpu_plan.GB, 3)}
    return plan


def main(argv: list[str] | None = None) -> dict:
    cfg = dataclass_cli.parse(EvalConfig, argv)
    problems = select(load_split(cfg.preset, cfg.split), cfg)
    if cfg.dry_run:
        plan = dry_run(cfg, problems)
        print(json.dumps(plan, indent=2))
        return plan
    command = shlex.join(["python", "baselines/llm_eval.py", *(sys.argv[1:] if argv is None else argv)])
    check_submission_fields(cfg, problems, command)
    auto = output_path(cfg, problems)
    if not cfg.out and auto.exists():  # an earlier evaluation of the same model
        raise SystemExit(f"{auto} exists (an earlier evaluation); pass --out PATH (an existing file is replaced) or --agent NAME")
    outputs = {flag: Path(p) for flag, p in (("--out", cfg.out), ("--results-json", cfg.results_json),
                                              ("--pass-rates", cfg.pass_rates)) if p}
    for flag, path in outputs.items():  # fail before generating, not after
        run_directory(path.parent, f"{flag} {path}")
        if kind := dataclass_cli.not_regular(path):  # a device (/dev/null) would be replaced by a file
            raise SystemExit(f"{flag} {path} is {kind}; name a file")
    if clash := [f for f, p in outputs.items() if [q.resolve() for q in outputs.values()].count(p.resolve()) > 1]:
        raise SystemExit(f"{' and '.join(clash)} name one file; each output needs its own")
    res = evaluate(cfg, problems=problems)
    out = write_outputs(cfg, res, problems, command)
    metrics = {k: v for k, v in res.items() if not k.startswith(("completions", "conversations"))}
    print(json.dumps(metrics, indent=2))
    print(f"completions written to {out}")
    if cfg.results_json:
        write_text_atomic(cfg.results_json, json.dumps(metrics, indent=2) + "\n")
    if cfg.pass_rates:
        write_pass_rates(cfg.pass_rates, problems, res["completions_sampled"])
        print(f"pass rates of {len(problems)} problems written to {cfg.pass_rates}")
    return res


if __name__ == "__main__":
    dataclass_cli.run_script(main)
