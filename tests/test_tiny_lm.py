"""The embedded tiny LM: compact traces, tokenizer round-trips, model build, SFT, eval, shipped checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]
from baselines import llm_eval, llm_sft  # noqa: E402
from baselines.lm import generation  # noqa: E402
from baselines.lm.tiny_lm import (  # noqa: E402
    SHIPPED_CHECKPOINT,
    TinyLMConfig,
    build_model,
    build_tokenizer,
    load_pretrained,
    save_pretrained,
)
from countdown_gym import Problem, Rules, dataclass_cli, load_split  # noqa: E402
from countdown_gym.data.splits import SPLIT_SPEC  # noqa: E402
from countdown_gym.envs.text import replay_completion  # noqa: E402
from countdown_gym.game.compact_trace import CompactTraceConfig, compact_trace, compact_trace_stats, shuffled  # noqa: E402
from countdown_gym.game.text_format import build_prompt, compact_prompt  # noqa: E402
from countdown_gym.game.verifier import verify  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def longproc_traces() -> dict[str, list[tuple[Problem, str]]]:
    """Every problem of the longproc-0.5k splits with its compact trace (computed once)."""
    return {s: [(p, compact_trace(p)) for p in load_split("longproc-0.5k", s)] for s in ("train", "validation", "test")}


def _roundtrip(tok, texts: list[str]) -> list[str]:
    """The texts that do NOT survive encode -> decode(skip_special_tokens=True)."""
    ids = tok(texts, add_special_tokens=True)["input_ids"]
    back = tok.batch_decode(ids, skip_special_tokens=True)
    return [t for t, b in zip(texts, back, strict=True) if b != t]


# ---- compact traces --------------------------------------------------------------------------------


def test_compact_trace_shape_and_answer():
    p = Problem((21, 16, 17, 26), 46)
    t = compact_trace(p)
    lines = t.splitlines()
    assert lines[0][0].isdigit()  # depth 0 starts without spaces
    assert "<Solution>" in lines and lines[-1] == "</Solution>"
    v = verify(p, t)
    assert v.correct and v.answer_format == "solution_block"
    a = compact_trace(p, config=CompactTraceConfig(answer="answer"))
    assert a.rstrip().endswith("</answer>") and verify(p, a).correct


def test_compact_trace_backtracks_and_shows_state():
    p = Problem((32, 1, 4, 3), 17)
    t = compact_trace(p, config=CompactTraceConfig(dead_ends=(1, 1)))
    depths = [len(x) - len(x.lstrip(" ")) for x in t.split("<Solution>")[0].splitlines()]
    assert any(b < a for a, b in zip(depths, depths[1:], strict=False))  # a backtrack happened
    first = t.splitlines()[0]
    assert first.endswith("]") and " [" in first


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_every_compact_trace_verifies_and_replays_clean(split, longproc_traces):
    items = longproc_traces[split]
    for p, t in items[::4]:
        assert verify(p, t).correct, (p, t)
    for p, t in items[::16]:
        r = replay_completion(p, t)
        assert r.verdict.correct, (p, t)
        assert r.invalid_steps == 0, (p, t)
        assert len(r.transitions) >= 3


def test_compact_trace_shuffle_and_bad_input():
    p = load_split("longproc-0.5k", "test")[0]
    q = shuffled(p, 3)
    assert sorted(q.numbers) == sorted(p.numbers) and q.target == p.target
    assert verify(p, compact_trace(p, shuffle_seed=3)).correct
    with pytest.raises(ValueError, match="no solution"):
        compact_trace(Problem((1, 1, 1, 1), 999))
    with pytest.raises(ValueError):
        CompactTraceConfig(dead_ends=())
    with pytest.raises(ValueError):
        CompactTraceConfig(answer="boxed")


def test_dead_end_rate_mixes_opening_moves():
    """dead_end_rate < 1 leaves out the dead ends at some states, drawn from ``seed``; 0 is the plain path."""
    problems = load_split("longproc-0.5k", "validation")[:60]
    always = CompactTraceConfig(dead_ends=(2, 0))
    half = CompactTraceConfig(dead_ends=(2, 0), dead_end_rate=0.5)
    never = CompactTraceConfig(dead_ends=(2, 0), dead_end_rate=0.0)
    assert compact_trace(problems[0], config=CompactTraceConfig(dead_ends=(2, 0), dead_end_rate=1.0), seed=5) == compact_trace(problems[0], config=always)
    kinds = set()
    for i, p in enumerate(problems):
        assert compact_trace(p, config=never, seed=i) == compact_trace(p)
        t = compact_trace(p, config=half, seed=i)
        assert t == compact_trace(p, config=half, seed=i)  # a function of its arguments
        assert t in (compact_trace(p, config=always), compact_trace(p))
        r = replay_completion(p, t)
        assert r.verdict.correct and r.invalid_steps == 0, (p, t)
        if compact_trace(p, config=always) != compact_trace(p):  # the problem has dead ends to show
            kinds.add(t == compact_trace(p))
    assert kinds == {True, False}
    mixed = compact_trace_stats(problems, half)["mean_lines"]
    assert compact_trace_stats(problems, never)["mean_lines"] < mixed < compact_trace_stats(problems, always)["mean_lines"]
    for bad in (-0.1, 1.5, "half", True):
        with pytest.raises(ValueError, match="dead_end_rate"):
            CompactTraceConfig(dead_end_rate=bad)


@pytest.mark.parametrize("kwargs", [{"dead_ends": (True,)}, {"probe": True}, {"show_state": "no"},
                                    {"dead_ends": (-(10**5000),)}, {"probe": -(10**5000)}, {"dead_end_rate": 10**5000}],
                         ids=["dead_ends-bool", "probe-bool", "show_state-str", "dead_ends-huge", "probe-huge", "rate-huge"])
def test_a_trace_config_of_the_wrong_type_is_refused(kwargs):
    """A bool was taken as a count or a rate, show_state='no' showed the states (truthy), and a 5,000-digit value
    raised Python's int->str digit limit while writing the message."""
    with pytest.raises(ValueError, match=f"{next(iter(kwargs))} must be"):
        CompactTraceConfig(**kwargs)


def test_sft_rejects_a_bad_trace_format_clearly(tmp_path):
    for flags in (["--dead-end-rate", "2"], ["--dead-ends", "-1"]):
        with pytest.raises(SystemExit, match="trace format"):
            llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, [*flags, "--out", str(tmp_path / "run")]))
    assert not (tmp_path / "run").exists()


def test_sft_rejects_a_missing_init_from_before_writing_its_run(tmp_path):
    with pytest.raises(SystemExit, match="--init-from .*nope: no saved model there"):
        dataclass_cli.parse(llm_sft.SFTConfig, ["--init-from", str(tmp_path / "nope"), "--out", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()  # so the corrected command is not refused as "holds a run already"


def test_sft_refuses_an_init_from_that_does_not_load_before_writing_its_run(tmp_path):
    """A folder with a config.json that is no model, or torn weights, was a traceback after options.json was written
    (so the corrected command was refused as "holds a run already"); so was a model with too few positions."""
    import shutil

    bad = {"no_type": tmp_path / "a", "torn": tmp_path / "b", "positions": SHIPPED_CHECKPOINT}
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"):
        for d in (bad["no_type"], bad["torn"]):
            d.mkdir(exist_ok=True)
            shutil.copy(SHIPPED_CHECKPOINT / name, d / name)
    (bad["no_type"] / "config.json").write_text("{}")
    weights = bad["torn"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:10_000])
    for kind, folder in bad.items():
        argv = ["--init-from", str(folder), "--out", str(tmp_path / kind), "--fresh-problems", "0", "--max-positions", "4096"]
        with pytest.raises(SystemExit, match=f"--init-from {re.escape(str(folder))}: "
                           + ("the model has 512 positions" if kind == "positions" else "the saved model does not load")):
            llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, argv if kind == "positions" else argv[:-2]))
        assert not (tmp_path / kind).exists(), kind


def test_compact_trace_under_rational_rules_stays_integer():
    p = Problem((3, 5, 2, 6), 8, Rules.tinyzero())
    t = compact_trace(p)
    assert verify(p, t).correct
    assert "(" not in t.split("<Solution>")[0]


def test_compact_trace_stats_are_short():
    problems = load_split("longproc-0.5k", "validation")[:200]
    s = compact_trace_stats(problems)
    assert s["mean_lines"] < 6 and s["max_chars"] < 250
    s = compact_trace_stats(problems, CompactTraceConfig(dead_ends=(1, 0)))
    assert s["mean_lines"] < 12 and s["max_chars"] < 400


# ---- tokenizer -------------------------------------------------------------------------------------


def test_numbers_are_single_tokens(tokenizer):
    for n in (0, 7, 46, 999, 1000, 1999):
        assert len(tokenizer(str(n), add_special_tokens=False)["input_ids"]) == 1
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("37+14=51 [29,6,51]", add_special_tokens=False)["input_ids"])
    assert pieces == ["37", "+", "14", "=", "51", " ", "[", "29", ",", "6", ",", "51", "]"]
    assert tokenizer.convert_ids_to_tokens(tokenizer("<Solution>", add_special_tokens=False)["input_ids"]) == ["<Solution>"]


def test_tokenizer_special_tokens(tokenizer):
    ids = tokenizer("1+2")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id
    assert tokenizer.pad_token_id is not None and tokenizer.eos_token_id is not None
    assert tokenizer.unk_token_id not in tokenizer("odd text: 2401, 07, 12345 ~`|\t")["input_ids"]


def test_every_split_prompt_and_completion_roundtrips(tokenizer, longproc_traces):
    """Every prompt (all presets; compact and TinyZero styles) and every compact completion of longproc-0.5k."""
    for preset in SPLIT_SPEC:
        for split in ("train", "validation", "test"):
            problems = load_split(preset, split)
            texts = [compact_prompt(p) for p in problems] + [build_prompt(p, "tinyzero") for p in problems]
            if preset == "longproc-0.5k":
                texts += [t for _, t in longproc_traces[split]]
            assert _roundtrip(tokenizer, texts) == []
    some = load_split("longproc-0.5k", "test")[:5] + load_split("tinyzero", "test")[:5]
    assert _roundtrip(tokenizer, [build_prompt(p, "longproc") for p in some]) == []


def test_tinyzero_completions_roundtrip(tokenizer):
    problems = load_split("tinyzero", "validation")
    texts = []
    for p in problems:
        try:
            texts.append(compact_trace(p, config=CompactTraceConfig(answer="answer")))
        except ValueError:  # needs a fraction or a negative intermediate
            continue
    assert len(texts) > len(problems) // 2
    assert _roundtrip(tokenizer, texts) == []


# ---- models, SFT, eval ----------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_build_and_forward(tokenizer, arch):
    m = build_model(TinyLMConfig(arch=arch, hidden=32, layers=2, heads=2, intermediate=64), tokenizer)
    assert m.config.vocab_size == len(tokenizer)
    assert 50_000 < m.num_parameters() < 200_000
    batch = tokenizer(["Numbers: [1,2,3,4] Target: 10\n"], return_tensors="pt")
    out = m(**batch, labels=batch["input_ids"])
    assert torch.isfinite(out.loss)
    with pytest.raises(ValueError, match="unknown arch"):
        build_model(TinyLMConfig(arch="mamba"), tokenizer)


def test_sft_steps_checkpoint_resume(tmp_path):
    argv = ["--out", str(tmp_path / "run"), "--fresh-problems", "20", "--max-steps", "3", "--batch-size", "4",
            "--hidden", "32", "--intermediate", "64", "--layers", "1", "--heads", "2", "--eval-every", "3",
            "--eval-problems", "3", "--max-new-tokens", "8", "--checkpoint-every", "2", "--progress", "false"]
    cfg = dataclass_cli.parse(llm_sft.SFTConfig, argv)
    assert cfg.dead_ends == (0,) and cfg.progress is False
    summary = llm_sft.train(cfg)
    assert summary["steps"] == 3 and summary["final_val_success"] is not None
    run = tmp_path / "run"
    assert (run / "final" / "model.safetensors").exists() and (run / "curves.png").exists()
    rows = (run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 4
    cfg2 = dataclass_cli.parse(llm_sft.SFTConfig, [*argv[:4], "--max-steps", "4", *argv[6:], "--resume", "true"])
    assert llm_sft.train(cfg2)["steps"] == 4
    with pytest.raises(SystemExit, match="holds a run already: --resume continues it"):  # a fresh start over it: refused
        llm_sft.train(cfg)
    assert [r.split(",")[0] for r in (run / "metrics.csv").read_text().splitlines()] == ["step", "1", "2", "3", "4"]

    # --init-from starts from the saved weights (architecture flags ignored); lr 0 keeps them as they are
    argv3 = ["--out", str(tmp_path / "more"), "--init-from", str(run / "final"), "--lr", "0", "--hidden", "64",
             *argv[2:4], "--max-steps", "1", *argv[6:8], *argv[16:]]
    assert llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, argv3))["steps"] == 1
    before, _ = load_pretrained(run / "final")
    after, _ = load_pretrained(tmp_path / "more" / "final")
    assert after.config.hidden_size == 32
    for (name, a), (_, b) in zip(before.state_dict().items(), after.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    with pytest.raises(SystemExit, match="no saved model"):
        llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, ["--out", str(tmp_path / "other"), "--init-from", str(tmp_path / "none"),
                                                                  *argv3[4:]]))


def _sft_argv(out: Path, steps: int) -> list[str]:
    return ["--out", str(out), "--fresh-problems", "20", "--max-steps", str(steps), "--batch-size", "4", "--hidden", "32",
            "--intermediate", "64", "--layers", "1", "--heads", "2", "--eval-every", "100", "--eval-problems", "2",
            "--max-new-tokens", "4", "--checkpoint-every", "2", "--progress", "false", "--schedule", "steps", "--warmup-steps", "1"]


def test_sft_killed_mid_checkpoint_resumes_exactly(tmp_path, monkeypatch):
    parse = lambda argv: dataclass_cli.parse(llm_sft.SFTConfig, argv)  # noqa: E731
    llm_sft.train(parse(_sft_argv(tmp_path / "whole", 4)))
    real_save, calls = torch.save, []

    def dies_at_second_checkpoint(obj, f, *a, **kw):
        calls.append(f)
        if len(calls) == 2:  # the step-4 checkpoint: model files written, trainer state not yet
            raise KeyboardInterrupt
        return real_save(obj, f, *a, **kw)

    monkeypatch.setattr(torch, "save", dies_at_second_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        llm_sft.train(parse(_sft_argv(tmp_path / "cut", 6)))
    monkeypatch.setattr(torch, "save", real_save)
    assert llm_sft.train(parse([*_sft_argv(tmp_path / "cut", 4), "--resume", "true"]))["steps"] == 4
    whole, _ = load_pretrained(tmp_path / "whole" / "final")
    cut, _ = load_pretrained(tmp_path / "cut" / "final")
    for (name, a), (_, b) in zip(whole.state_dict().items(), cut.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    rows = (tmp_path / "cut" / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3", "4"]


def test_sft_ctrl_c_saves_the_step_and_resumes_exactly(tmp_path, monkeypatch):
    from countdown_gym.runkit.runs import StopRequest

    parse = lambda argv: dataclass_cli.parse(llm_sft.SFTConfig, argv)  # noqa: E731
    llm_sft.train(parse(_sft_argv(tmp_path / "whole", 4)))

    class CtrlCDuringStepThree(StopRequest):
        def __enter__(self):
            super().__enter__()
            real = torch.nn.utils.clip_grad_norm_
            calls = []

            def clip(*a, **kw):  # the first Ctrl-C arrives in the middle of step 3
                calls.append(1)
                if len(calls) == 3:
                    self._handle(signal.SIGINT, None)
                return real(*a, **kw)

            monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
            return self

    monkeypatch.setattr(llm_sft, "StopRequest", CtrlCDuringStepThree)
    summary = llm_sft.train(parse(_sft_argv(tmp_path / "cut", 4)))
    assert summary["interrupted"] and summary["steps"] == 3 and not (tmp_path / "cut" / "final").exists()
    monkeypatch.setattr(llm_sft, "StopRequest", StopRequest)
    monkeypatch.undo()
    assert llm_sft.train(parse([*_sft_argv(tmp_path / "cut", 4), "--resume", "true"]))["steps"] == 4
    whole, _ = load_pretrained(tmp_path / "whole" / "final")
    cut, _ = load_pretrained(tmp_path / "cut" / "final")
    for (name, a), (_, b) in zip(whole.state_dict().items(), cut.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_sft_resume_of_a_run_past_its_time_budget_trains_nothing(tmp_path):
    argv = [*_sft_argv(tmp_path / "t", 50), "--max-minutes", "0.001"]  # 0.06 s: past it, metrics.csv rounds to >= 0.1 s
    first = llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, argv))
    assert first["stopped_by_time"] and first["steps"] < 50
    again = llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, [*argv, "--resume", "true"]))
    assert again["stopped_by_time"] and again["steps"] == first["steps"]


def test_sft_resume_refuses_changed_options(tmp_path):
    argv = _sft_argv(tmp_path / "run", 2)
    llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, argv))
    for changed in (["--seed", "1"], ["--hidden", "64"], ["--weight-decay", "0.1"]):
        with pytest.raises(SystemExit, match=changed[0]):
            llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, [*argv, *changed, "--resume", "true"]))
    # the budget may change (extending a run is what --resume is for)
    more = [*_sft_argv(tmp_path / "run", 3), "--eval-problems", "1", "--resume", "true"]
    assert llm_sft.train(dataclass_cli.parse(llm_sft.SFTConfig, more))["steps"] == 3


def test_sft_progress_total_is_where_the_time_budget_ends():
    cfg = llm_sft.SFTConfig(max_steps=100_000, max_minutes=1.0)
    assert llm_sft.projected_steps(cfg, step=10, steps_per_s=2.0, elapsed=30.0) == 70
    assert llm_sft.projected_steps(cfg, step=10, steps_per_s=0.0, elapsed=0.0) == 100_000
    assert llm_sft.projected_steps(llm_sft.SFTConfig(max_steps=50, schedule="steps", max_minutes=0), 10, 2.0, 30.0) == 50


def test_training_problems_exclude_held_out():
    cfg = llm_sft.SFTConfig(fresh_problems=300)
    probs = llm_sft.training_problems(cfg.preset, cfg.fresh_problems, cfg.seed, progress=False)
    held = {p.key for s in ("validation", "test") for p in load_split("longproc-0.5k", s)}
    assert len(probs) == 8000 + 300
    assert not any(p.key in held for p in probs)
    assert len({p.key for p in probs}) == len(probs)


def _save_tiny(tmp_path: Path, arch: str, chat: bool = False) -> Path:
    tok = build_tokenizer()
    if chat:
        tok.chat_template = "{% for m in messages %}<bos>{{ m['content'] }}{% endfor %}"
    m = build_model(TinyLMConfig(arch=arch, hidden=32, layers=1, heads=2, intermediate=64), tok)
    return save_pretrained(m, tok, tmp_path / arch)


@pytest.mark.parametrize("arch,style,chat", [("gpt2", "compact", False), ("llama", "tinyzero", True)])
def test_eval_any_local_model(tmp_path, arch, style, chat):
    path = _save_tiny(tmp_path, arch, chat)
    out = tmp_path / "completions.jsonl"
    res = llm_eval.main(["--model", str(path), "--limit", "3", "--k", "2", "--max-new-tokens", "6",
                         "--prompt-style", style, "--out", str(out), "--batch-size", "4"])
    assert res["problems"] == 3 and 0.0 <= res["pass@1_greedy"] <= 1.0 and "pass@2" in res
    assert res["pass@1_greedy_se"] is not None and res["pass@2_se"] is not None and res["per_sample_success_se"] is not None
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 and all(len(x["completions"]) == 3 for x in lines)
    if not chat:
        with pytest.raises(SystemExit, match="--chat-template on, but the tokenizer has no chat template"):
            llm_eval.main(["--model", str(path), "--limit", "1", "--k", "0", "--chat-template", "on", "--out", str(out)])


def test_agent_name_of_a_run_folder():
    name = lambda model: llm_eval._agent_name(llm_eval.EvalConfig(model=model))  # noqa: E731
    assert name("runs/sparse/final") == "sparse-final" and name("runs/b/checkpoint-40/") == "b-checkpoint-40"
    assert name("baselines/checkpoints/countdown-tiny-lm") == "countdown-tiny-lm" and name("Qwen/Qwen2.5-0.5B") == "Qwen2.5-0.5B"


def test_standard_errors():
    from baselines.analysis.uncertainty import binomial_se, mean_se, seed_spread

    assert mean_se([1.0]) is None
    # 3 of 10 problems right: sample std sqrt(0.3 * 0.7 * 10 / 9), over sqrt(10)
    assert mean_se([1.0] * 3 + [0.0] * 7) == pytest.approx((0.21 * 10 / 9) ** 0.5 / 10**0.5)
    assert binomial_se(0.3, 10) == pytest.approx((0.21 / 10) ** 0.5)
    assert binomial_se(0.0, 1000) == 0.0 and binomial_se(0.5, 0) == 0.0
    assert seed_spread([0.1]) == 0.0 and seed_spread([0.1, 0.3], "std") == pytest.approx(2**0.5 / 10)
    assert seed_spread([0.1, 0.3]) == pytest.approx(0.1)


def test_eval_offset_and_pass_rates(tmp_path):
    from countdown_gym import load_split

    path = _save_tiny(tmp_path, "llama")
    out, rates = tmp_path / "completions.jsonl", tmp_path / "rates.jsonl"
    llm_eval.main(["--model", str(path), "--split", "train", "--offset", "5", "--limit", "2", "--k", "3",
                   "--max-new-tokens", "4", "--out", str(out), "--pass-rates", str(rates)])
    train = load_split("longproc-0.5k", "train")
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [train[5].id, train[6].id]
    rows = [json.loads(x) for x in rates.read_text().splitlines()]
    assert [(r["id"], r["samples"]) for r in rows] == [(train[5].id, 3), (train[6].id, 3)]
    assert all(0 <= r["correct"] <= 3 for r in rows)
    for bad in (["--offset", "8000"], ["--limit", "-1"]):
        with pytest.raises(SystemExit):
            llm_eval.main(["--model", str(path), "--split", "train", *bad, "--k", "0"])
    with pytest.raises(ValueError, match="--pass-rates needs sampled"):  # refused before any generation
        llm_eval.EvalConfig(model=str(path), limit=1, k=0, out=str(out), pass_rates=str(rates))


def test_an_interrupted_completions_write_keeps_the_old_file(tmp_path, monkeypatch):
    """llm_eval's completions JSONL (part of a split) went into the file line by line: Ctrl-C between two lines left
    it cut short."""
    from countdown_gym import load_split

    problems, out = load_split("longproc-0.5k", "validation")[:2], tmp_path / "c.jsonl"
    out.write_text("old\n")
    cfg, res, real = llm_eval.EvalConfig(split="validation", limit=2, k=0, out=str(out)), {"completions_greedy": ["a", "b"]}, json.dumps
    monkeypatch.setattr(json, "dumps", lambda obj, *a, **kw: real(obj) if obj["id"] == problems[0].id else sys.exit(130))
    with pytest.raises(SystemExit):
        llm_eval.write_outputs(cfg, res, problems, "cmd")
    monkeypatch.undo()
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
    llm_eval.write_outputs(cfg, res, problems, "cmd")
    assert [json.loads(x)["completions"] for x in out.read_text().splitlines()] == [["a"], ["b"]]


def test_outputs_that_cannot_be_written_apart_are_refused_before_generating(tmp_path, monkeypatch):
    """--out naming a folder failed once every completion was generated (the rename onto it); --out and --results-json
    (or --pass-rates) naming one file kept only the last written, the completions silently lost."""
    monkeypatch.setattr(llm_eval, "evaluate", lambda *a, **k: pytest.fail("generated"))
    (tmp_path / "folder").mkdir()
    argv = ["--split", "validation", "--limit", "1", "--k", "1"]
    with pytest.raises(SystemExit, match=r"--out .*folder is a folder; name a file"):
        llm_eval.main([*argv, "--out", str(tmp_path / "folder")])
    with pytest.raises(SystemExit, match=r"--results-json .*folder is a folder; name a file"):
        llm_eval.main([*argv, "--out", str(tmp_path / "c.jsonl"), "--results-json", str(tmp_path / "folder")])
    os.mkfifo(tmp_path / "fifo")  # as a device (--results-json /dev/null, run as root): replaced by a file at the end
    with pytest.raises(SystemExit, match=r"--results-json .*fifo is a FIFO; name a file"):
        llm_eval.main([*argv, "--out", str(tmp_path / "c.jsonl"), "--results-json", str(tmp_path / "fifo")])
    with pytest.raises(SystemExit, match="^--out and --pass-rates name one file"):
        llm_eval.main([*argv, "--out", str(tmp_path / "c.jsonl"), "--pass-rates", str(tmp_path / "c.jsonl"),
                       "--results-json", str(tmp_path / "r.json")])


def test_eval_never_overwrites_an_automatic_output(tmp_path, monkeypatch):
    a, b = tmp_path / "a" / "final", tmp_path / "b" / "final"
    _save_tiny(tmp_path / "a", "llama").rename(a)
    _save_tiny(tmp_path / "b", "llama").rename(b)
    monkeypatch.chdir(tmp_path)
    argv = ["--split", "validation", "--limit", "1", "--k", "0", "--max-new-tokens", "2"]
    llm_eval.main(["--model", str(a), *argv])
    first = (tmp_path / "runs" / "llm_eval" / "a-final-longproc-0.5k-validation-completions.jsonl").read_text()
    llm_eval.main(["--model", str(b), *argv])  # another run's final/ is named after its run
    assert (tmp_path / "runs" / "llm_eval" / "b-final-longproc-0.5k-validation-completions.jsonl").exists()
    with pytest.raises(SystemExit, match="exists"):  # an earlier evaluation is never replaced silently
        llm_eval.main(["--model", str(a), *argv])
    assert (tmp_path / "runs" / "llm_eval" / "a-final-longproc-0.5k-validation-completions.jsonl").read_text() == first
    llm_eval.main(["--model", str(b), *argv, "--out", str(tmp_path / "b.jsonl")])  # an explicit --out is written
    assert (tmp_path / "b.jsonl").exists()


def test_interaction_auto_is_resolved_once_when_parsed(monkeypatch) -> None:
    """--interaction auto read the model's files twice: in the option checks and again in resolved()."""
    calls = []
    monkeypatch.setattr(llm_eval, "detect_interaction", lambda model: calls.append(model) or "multi-turn")
    cfg = dataclass_cli.parse(llm_eval.EvalConfig, ["--prompt-style", "compact"])
    assert cfg.interaction == "multi-turn" and len(calls) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--backend", "vllm", "--device", "cuda:1"], "--device has no effect with --backend vllm"),
    (["--interaction", "single-pass", "--max-turn-tokens", "16"], "--max-turn-tokens has no effect with --interaction single-pass"),
    (["--interaction", "multi-turn", "--chat-template", "on"], "--chat-template has no effect with --interaction multi-turn"),
])
def test_llm_eval_flags_its_backend_or_interaction_ignores_are_usage_errors(argv, message, capsys) -> None:
    """Each ran with the flag ignored: vLLM places the model itself; turns have no chat template, one pass no turns."""
    with pytest.raises(SystemExit) as exc:
        dataclass_cli.parse(llm_eval.EvalConfig, argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_greedy_only_submission_says_temperature_0():
    fields = llm_eval.submission_fields(llm_eval.EvalConfig(k=0), "cmd", "1M")
    assert fields["sampling"]["temperature"] == 0.0 and fields["sampling"]["k"] == 1
    assert llm_eval.submission_fields(llm_eval.EvalConfig(k=4, temperature=0.5), "cmd", "1M")["sampling"]["temperature"] == 0.5


def test_eval_rejects_bad_submission_metadata_before_generating(tmp_path, monkeypatch):
    path = _save_tiny(tmp_path, "llama")
    monkeypatch.setattr(llm_eval, "evaluate", lambda *a, **k: pytest.fail("generated before checking the metadata"))
    with pytest.raises(SystemExit, match="schema violation at method"):
        llm_eval.main(["--model", str(path), "--split", "validation", "--method", "x" * 300, "--out", str(tmp_path / "s.jsonl")])


def test_left_padding_does_not_change_greedy_output(tmp_path):
    """Batched (left-padded) generation equals one-at-a-time generation for both architectures."""
    problems = [Problem((1, 2, 3, 4), 10), Problem((25, 14, 38, 30), 31)]
    for arch in ("gpt2", "llama"):
        model, tok = load_pretrained(_save_tiny(tmp_path, arch))
        prompts = [compact_prompt(p) + ("1+2=3 [3,4]\n" if i else "") for i, p in enumerate(problems)]
        batched, _ = generation.generate(model, tok, prompts, max_new_tokens=6)
        single = [generation.generate(model, tok, [p], max_new_tokens=6)[0][0] for p in prompts]
        assert batched == single


def test_pass_at_k():
    from countdown_gym.leaderboard.score import pass_at_k

    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 1, 8) == 1.0
    assert abs(pass_at_k(8, 2, 1) - 0.25) < 1e-12


# ---- the shipped checkpoint -----------------------------------------------------------------------


def test_shipped_checkpoint_loads_and_solves_something():
    assert (SHIPPED_CHECKPOINT / "model.safetensors").exists(), "the shipped checkpoint is missing"
    size = sum(f.stat().st_size for f in SHIPPED_CHECKPOINT.iterdir() if f.is_file())
    assert size < 10 * 1024 * 1024
    model, tok = load_pretrained()
    problems = load_split("longproc-0.5k", "validation")[:20]
    outs, _ = generation.generate(model, tok, [compact_prompt(p) for p in problems], max_new_tokens=200)
    correct = sum(verify(p, o[0]).correct for p, o in zip(problems, outs, strict=True))
    assert correct >= 1
    texts = [compact_trace(p) for p in problems]
    assert _roundtrip(tok, texts) == []
    # TinyLMConfig() and llm_sft's defaults build the shipped architecture
    default = build_model(TinyLMConfig(), tok)
    assert {k: v.shape for k, v in default.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    assert llm_sft.SFTConfig().model == TinyLMConfig()


@pytest.mark.parametrize(("cls", "kwargs", "message"), [
    (TinyLMConfig, {"hidden": 130, "heads": 4}, "--hidden (130) must be a multiple of --heads (4)"),  # SFTConfig.model
    (TinyLMConfig, {"arch": "mamba"}, "unknown arch"),
    (llm_sft.SFTConfig, {"eval_every": 0}, "--eval-every must be >= 1"),
    (llm_sft.SFTConfig, {"preset": "nosuch"}, "--preset must be one of"),
    (llm_sft.SFTConfig, {"lr": -1.0}, "--lr must be >= 0"),
    (llm_eval.EvalConfig, {"split": "nosuch"}, "--split must be one of"),
    (llm_eval.EvalConfig, {"dtype": "float8"}, "--dtype must be one of"),
    (llm_eval.EvalConfig, {"prompt_style": "nosuch"}, "--prompt-style must be one of"),
    (llm_eval.EvalConfig, {"temperature": -1.0}, "--temperature must be > 0"),
    (llm_eval.EvalConfig, {"top_p": 0.0}, "--top-p must be in"),
    (llm_eval.EvalConfig, {"k": -1}, "--k must be >= 0"),
    (llm_eval.EvalConfig, {"max_new_tokens": 0}, "--max-new-tokens must be >= 1"),
    # a style of the other interaction: turn_prompt's ValueError traceback (multi-turn) or a line naming the model,
    # exit 1 (single-pass), after loading the model
    (llm_eval.EvalConfig, {"interaction": "multi-turn", "prompt_style": "longproc"}, "--prompt-style longproc is not a multi-turn"),
    (llm_eval.EvalConfig, {"prompt_style": "instruct"}, "--prompt-style instruct is not a single-pass style"),
])
def test_bad_sft_and_eval_options_are_refused_at_parse_time(cls, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(**kwargs)


def test_eval_refuses_a_missing_or_tokenizerless_model_and_an_unwritable_out(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match="cannot load model"):
        llm_eval.load_model(str(tmp_path / "m"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="--out .*cannot write there"):
        llm_eval.main(["--limit", "1", "--k", "0", "--out", str(tmp_path / "file" / "x.jsonl")])


@pytest.mark.parametrize("name, text", [("model.safetensors", b"\x10" * 100), ("config.json", b"[1, 2]")], ids=["torn", "list"])
def test_a_model_folder_with_a_damaged_file_is_one_error(tmp_path, name, text):
    """Torn weights were safetensors' SafetensorError traceback, a config.json list transformers' TypeError."""
    bad = Path(shutil.copytree(SHIPPED_CHECKPOINT, tmp_path / "m"))
    (bad / name).write_bytes(text)
    with pytest.raises(ValueError, match="m: the saved model does not load"):
        load_pretrained(bad)
    with pytest.raises(SystemExit, match="cannot load model"):
        llm_eval.load_model(str(bad))
    from baselines.lm.sft_checkpoints import Unusable, load_saved_model

    with pytest.raises(Unusable, match=r"m: the saved model does not load \((?!.*does not load)"):
        load_saved_model(bad)


def test_sft_refuses_a_damaged_episodes_file_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_sft, "training_problems", lambda *a, **k: [])  # not needed to get there
    (tmp_path / "e.jsonl").write_text('{"numbers": [1, 2], "target": 3}\n')  # no "turns": was a ValueError traceback
    with pytest.raises(SystemExit, match="--episodes: .*e.jsonl line 1: not an episode"):
        llm_sft.train(llm_sft.SFTConfig(interaction="multi-turn", episodes=str(tmp_path / "e.jsonl"), out=str(tmp_path / "o"),
                                        max_steps=1, progress=False))


def test_llm_eval_puts_the_model_on_the_gpu_when_there_is_one(monkeypatch):
    import torch

    assert llm_eval.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert llm_eval.resolve_device("cuda:1") == "cuda:1"
    model, _ = llm_eval.load_model(str(SHIPPED_CHECKPOINT), device="cpu")
    assert str(model.device) == "cpu"
    moved = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU machine, as far as the choice goes
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(type(model), "to", lambda self, *a, **k: moved.append(a) or self)
    llm_eval.load_model(str(SHIPPED_CHECKPOINT))
    assert moved == [("cuda",)]  # before the fix the model stayed on the CPU in float32
    assert dataclass_cli.parse(llm_eval.EvalConfig, ["--device", "cuda:1"]).device == "cuda:1"
    with pytest.raises(SystemExit, match=r"--device cuda:1: this machine has 1 CUDA device\(s\)"):  # was torch's error
        llm_eval.load_model(str(SHIPPED_CHECKPOINT), device="cuda:1")
    with pytest.raises(ValueError, match="--device must be auto or a torch device .* got 'gpu'"):  # was a traceback
        llm_eval.EvalConfig(device="gpu")


def test_sft_curves_take_rows_read_back_from_csv(tmp_path, monkeypatch):
    import matplotlib.axes

    plotted = []
    orig = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda self, x, *a, **k: plotted.append(list(x)) or orig(self, x, *a, **k))
    rows = [{"step": "9", "loss": "0.5", "val_success": ""}, {"step": 10, "loss": 0.4, "val_success": 0.2},
            {"step": "11", "loss": "0.3", "val_success": "0.25"}]  # the first and last as a --resume reads them back
    from countdown_gym.runkit.runs import plot_curves

    plot_curves(rows, tmp_path / "curves.png", llm_sft.CURVES)
    assert plotted == [[9, 10, 11], [10, 11]]  # numbers, in order: the x-axis does not break into string categories


def test_llm_eval_vllm_backend_builds_one_engine_and_passes_token_ids(monkeypatch):
    """vLLM cannot run here: a stand-in module records the calls, which follow vLLM's documented signatures
    (``LLM(model=, dtype=, seed=, max_model_len=)``, ``llm.generate(prompts, sampling_params, use_tqdm=)`` with
    ``{"prompt_token_ids": [...]}`` prompts, results with ``.outputs[i].text`` / ``.token_ids``)."""
    import types

    calls = {"engines": [], "generate": []}

    class SamplingParams:
        def __init__(self, n=1, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0, max_tokens=16, seed=None):
            self.n, self.temperature = n, temperature

    class LLM:
        def __init__(self, model, dtype="auto", seed=0, max_model_len=None, **kw):
            calls["engines"].append({"model": model, "dtype": dtype, "seed": seed, "max_model_len": max_model_len})

        def generate(self, prompts, sampling_params, use_tqdm=True):
            calls["generate"].append((prompts, sampling_params.n))
            out = types.SimpleNamespace(text="<answer>1+1</answer>", token_ids=[5, 6, 7])
            return [types.SimpleNamespace(outputs=[out] * sampling_params.n) for _ in prompts]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    cfg = dataclass_cli.parse(llm_eval.EvalConfig, ["--backend", "vllm", "--interaction", "single-pass", "--preset",
                                                      "tinyzero", "--split", "validation", "--limit", "3", "--k", "2",
                                                      "--dtype", "bfloat16", "--max-new-tokens", "50"])
    res = llm_eval.evaluate(cfg, progress=False)
    assert len(calls["engines"]) == 1  # one engine for the greedy and the sampled pass (two did not fit)
    engine = calls["engines"][0]
    assert engine["dtype"] == "bfloat16" and engine["max_model_len"] > 50
    (greedy_prompts, n1), (sampled_prompts, n2) = calls["generate"]
    assert (n1, n2) == (1, 2) and greedy_prompts == sampled_prompts
    bos = llm_eval.load_model(str(SHIPPED_CHECKPOINT))[1].bos_token_id
    for p in greedy_prompts:
        ids = p["prompt_token_ids"]
        assert ids[0] == bos and ids[1] != bos  # token ids, with one BOS
    assert res["pass@1_greedy"] == 0.0 and res["pass@2"] == 0.0


def test_llm_eval_dry_run_loads_no_weights_and_estimates_memory(tmp_path, monkeypatch, capsys):
    from transformers import Qwen2Config

    def no_weights(*a, **k):
        raise AssertionError("a dry run loads no weights")

    monkeypatch.setattr(llm_eval, "load_model", no_weights)
    monkeypatch.setattr(llm_eval, "load_causal_lm", no_weights)
    Qwen2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2).save_pretrained(tmp_path / "qwen")  # a config, no weights
    plan = llm_eval.main(["--model", str(tmp_path / "qwen"), "--dry-run", "--dtype", "bfloat16", "--batch-size", "8",
                          "--max-new-tokens", "64", "--interaction", "single-pass", "--limit", "5"])
    mem = plan["memory"]
    assert plan["problems"] == 5 and plan["dtype"] == "bfloat16" and mem["parameters"] > 0
    assert mem["kv_cache_gb"] == round(2 * 2 * 2 * 16 * (512 + 64) * 8 * 2 / 1e9, 3)  # layers, kv heads, head dim
    assert '"memory"' in capsys.readouterr().out
    unknown = llm_eval.main(["--model", str(tmp_path / "nothing-here"), "--dry-run", "--interaction", "single-pass"])
    assert unknown["memory"].startswith("unknown")


def test_eval_plays_multi_turn_with_the_turn_budget_it_is_given(tmp_path, monkeypatch):
    """llm_eval had no --max-turn-tokens: a model trained with `llm_grpo.py --max-turn-tokens 16` was evaluated with
    12-token turns (the run's own validation and test play its budget)."""
    from baselines.lm.grpo_model import DEFAULT_TURN_MODEL

    seen = []

    def capture(model, tokenizer, problems, how, **kwargs):
        seen.append(how)
        raise KeyboardInterrupt

    monkeypatch.setattr(llm_eval, "play_and_score", capture)
    with pytest.raises(KeyboardInterrupt):
        llm_eval.main(["--model", str(DEFAULT_TURN_MODEL), "--interaction", "multi-turn", "--limit", "1", "--k", "0",
                       "--max-turn-tokens", "16", "--out", str(tmp_path / "c.jsonl")])
    assert seen[0].max_turns is not None and seen[0].max_turn_tokens == 16
