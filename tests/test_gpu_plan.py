"""GPU planning (baselines/lm/gpu_plan.py), llm_grpo --dry-run, the start-up checks (baselines/lm/compat.py), and every
command of the GPU section of docs/llm_grpo.md run with --dry-run. No GPU here: the layouts are planned with
--gpu-memory-gb and the variables `accelerate launch` sets; the hub cannot be reached, so it is switched to
offline mode (HF_HUB_OFFLINE) and hub models are read from baselines/model_configs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from baselines import llm_grpo  # noqa: E402
from baselines.llm_grpo import Options, build_grpo_config, parse_options, plan_compute  # noqa: E402
from baselines.lm import compat, gpu_plan, grpo_config  # noqa: E402
from baselines.lm.grpo_options import GRPORun  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "llm_grpo.md"
LAUNCHER_VARIABLES = ("WORLD_SIZE", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "ACCELERATE_USE_FSDP")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def tiny_qwen(path: Path, **kw) -> Path:
    """A saved Qwen2 config (no weights, no tokenizer)."""
    from transformers import Qwen2Config

    args = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2)
    Qwen2Config(**{**args, **kw}).save_pretrained(path)
    return path


# --- the activation bytes are what autograd keeps --------------------------------------------------------


def saved_bytes(config, compute: str, tokens: int) -> int:
    """Bytes of the tensors autograd saves in a forward pass of ``tokens`` tokens (parameters apart)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16 if compute == "bfloat16" else torch.float32)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, config.vocab_size, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=compute == "autocast"):
        model.model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return sum(seen.values())


@pytest.mark.parametrize("compute", ["float32", "bfloat16", "autocast"])
@pytest.mark.parametrize(("hidden", "intermediate", "kv_heads"), [(256, 512, 8), (512, 1536, 2)])
def test_activation_bytes_per_token_are_the_saved_tensors(tmp_path, compute, hidden, intermediate, kv_heads):
    from transformers import Qwen2Config

    def config(layers: int) -> Qwen2Config:
        return Qwen2Config(vocab_size=64, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                           num_attention_heads=8, head_dim=hidden // 8, num_key_value_heads=kv_heads)

    def per_layer(tokens: int) -> int:
        return saved_bytes(config(2), compute, tokens) - saved_bytes(config(1), compute, tokens)

    measured = (per_layer(64) - per_layer(32)) / 32  # per token: what does not grow with the tokens cancels
    config(1).save_pretrained(tmp_path)
    shape = gpu_plan.model_shape(str(tmp_path))
    assert gpu_plan.activation_bytes_per_token(shape, compute) == pytest.approx(measured, abs=1.0)


# --- planning ---------------------------------------------------------------------------------------------


def test_micro_batch_is_the_largest_divisor_within_the_budget():
    assert gpu_plan.micro_batch(128, 704, 32 * 704) == 32
    assert gpu_plan.micro_batch(48, 704, 32 * 704) == 24  # a divisor, so gradient accumulation keeps the batch
    assert gpu_plan.micro_batch(16, 1536, 1000) == 1  # not even one sequence: one at a time
    assert gpu_plan.micro_batch(16, 1536, 10**9) == 16


def test_launcher_strategy_reads_what_accelerate_launch_sets(tmp_path):
    assert gpu_plan.launcher_strategy({}) == (1, "single")
    assert gpu_plan.launcher_strategy({"WORLD_SIZE": "4"}) == (4, "ddp")
    assert gpu_plan.launcher_strategy({"WORLD_SIZE": "8", "ACCELERATE_USE_DEEPSPEED": "true",
                                       "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}) == (8, "zero2")
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 3}}')
    assert gpu_plan.launcher_strategy({"WORLD_SIZE": "2", "ACCELERATE_USE_DEEPSPEED": "true",
                                       "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(ds)}) == (2, "zero3")
    assert gpu_plan.launcher_strategy({"WORLD_SIZE": "2", "ACCELERATE_USE_FSDP": "true"}) == (2, "fsdp")
    with pytest.raises(gpu_plan.PlanError, match="ZeRO stage"):
        gpu_plan.launcher_strategy({"ACCELERATE_USE_DEEPSPEED": "true"})
    for text in ('{"zero_optimization": ', "[2]", '{"zero_optimization": {"stage": 1}, "zero_optimization": {"stage": 3}}'):
        ds.write_text(text)  # was a JSONDecodeError / AttributeError traceback, or the last stage silently
        with pytest.raises(gpu_plan.PlanError, match="not a readable DeepSpeed JSON config"):
            gpu_plan.launcher_strategy({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(ds)})


def test_training_memory_shards_as_the_layout_says(tmp_path):
    shape = gpu_plan.model_shape(str(tiny_qwen(tmp_path / "m")))
    p = shape.parameters
    args = dict(weight_bytes=4, micro=2, sequence_tokens=100, completion_tokens=50, gradient_checkpointing=False,
                reference_model=False)
    ddp = gpu_plan.training_memory(shape, gpu_plan.Layout(4, "ddp", 80e9, bf16=True), **args)
    assert ddp["weights"] == ddp["gradients"] == ddp["DDP gradient buckets"] == 4 * p
    assert ddp["optimizer (Adam moments)"] == 8 * p and ddp["bf16 copies of the weights (autocast cache)"] == 2 * p
    zero2 = gpu_plan.training_memory(shape, gpu_plan.Layout(8, "zero2", 80e9, bf16=True), **args)
    assert zero2["weights"] == 2 * p and zero2["gradients"] == 2 * p / 8
    assert zero2["optimizer (fp32 master weights + Adam moments)"] == 12 * p / 8
    cpu = gpu_plan.training_memory(shape, gpu_plan.Layout(1, "single", None, bf16=False), **args)
    act = cpu["activations (2 x 100 tokens)"]
    assert act == 200 * gpu_plan.activation_bytes_per_token(shape, "float32") + 100 * shape.vocab * 4 * 2
    assert "CUDA context" not in cpu and cpu["total"] == sum(v for k, v in cpu.items() if k != "total")
    checkpointed = gpu_plan.training_memory(shape, gpu_plan.Layout(1, "single", None, bf16=False),
                                            **{**args, "gradient_checkpointing": True})
    assert checkpointed["activations (2 x 100 tokens)"] < act


def test_default_micro_batches_keep_the_step_on_cpu(tmp_path, monkeypatch):
    """Regression (issue 26, no micro-batching by default): the step's completions are split into micro-batches whose
    gradients accumulate, so per_device_train_batch_size x gradient_accumulation_steps x processes = the step."""
    cfg = build_grpo_config(GRPORun.of(Options(output_dir=str(tmp_path))))  # 16 prompts x 8 completions, the defaults
    assert (cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps) == (32, 4)  # as before this plan
    assert cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps == 128
    monkeypatch.setattr(grpo_config, "world_size", lambda: 4)
    plan = plan_compute(GRPORun.of(Options()))
    assert (plan.per_process, plan.micro, plan.grad_accum) == (32, 32, 1)
    plan = plan_compute(GRPORun.of(Options(prompts_per_step=6)))  # 48 completions: a divisor, where 32 used to be refused
    assert (plan.micro, plan.grad_accum) == (12, 1)
    monkeypatch.setattr(grpo_config, "world_size", lambda: 1)
    assert plan_compute(GRPORun.of(Options(micro_batch_size=0))).micro == 128  # the whole step at once, as before
    assert plan_compute(GRPORun.of(Options(interaction="single-pass", max_tokens_per_micro_batch=8 * 704))).micro == 8
    with pytest.raises(SystemExit, match="must divide"):
        plan_compute(GRPORun.of(Options(micro_batch_size=48)))


def test_a_multi_turn_plan_bounds_a_completion_by_its_turns_not_max_completion_length(capsys):
    """Regression: the multi-turn rollout ignores --max-completion-length, and the plan sized its sequences by it (512 +
    192 tokens) where an episode of 16 turns of 12 tokens, their replies and the EOS reaches 705 after its prompt."""
    plan = plan_compute(GRPORun.of(Options(max_tokens_per_micro_batch=4 * 1217)))  # the shipped multi-turn model
    assert (plan.sequence_tokens, plan.micro) == (512 + 16 * (12 + 32) + 1, 4)
    plan = plan_compute(GRPORun.of(Options(max_turns=4, max_turn_tokens=8, max_completion_length=1000)))
    assert plan.sequence_tokens == 512 + 4 * (8 + 32) + 1
    llm_grpo.dry_run(GRPORun.of(Options()))
    out = capsys.readouterr().out
    assert "sequences of at most 512 + 705 tokens (multi-turn: 16 turns x (12 + 32 reply tokens) + EOS" in out
    assert "activations (32 x 1217 tokens)" in out


def test_a_gpu_plan_derives_the_micro_batch_from_the_memory(tmp_path, monkeypatch):
    model = str(tiny_qwen(tmp_path / "m", hidden_size=256, intermediate_size=1024, num_hidden_layers=4))
    small = plan_compute(GRPORun.of(Options(model=model, interaction="single-pass", gpu_memory_gb=1.1, dry_run=True)))
    big = plan_compute(GRPORun.of(Options(model=model, interaction="single-pass", gpu_memory_gb=3, dry_run=True)))
    assert small.layout.bf16 and small.layout.on_gpu and 1 <= small.micro < big.micro
    assert small.micro * small.grad_accum == big.micro * big.grad_accum == 128
    with pytest.raises(SystemExit, match="only with --dry-run"):
        plan_compute(GRPORun.of(Options(model=model, gpu_memory_gb=80)))


# --- the dry run --------------------------------------------------------------------------------------------


def test_dry_run_loads_no_weights_and_prints_the_plan(tmp_path, monkeypatch, capsys):
    def no_weights(*a, **k):
        raise AssertionError("a dry run loads no weights")

    monkeypatch.setattr(llm_grpo, "load_model_and_tokenizer", no_weights)
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained", no_weights)
    monkeypatch.setenv("WORLD_SIZE", "2")
    model = str(tiny_qwen(tmp_path / "m"))
    llm_grpo.main(["--model", model, "--interaction", "single-pass", "--prompt-style", "longproc", "--use-vllm",
                   "--gpu-memory-gb", "24", "--dry-run", "--output-dir", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert "2 processes, DDP" in out and "one GPU of 24 GB each" in out and "vllm_max_model_length = 704" in out
    assert "per_device_train_batch_size = 64" in out and "fits:" in out and "vLLM (colocated engine)" in out
    assert not (tmp_path / "run").exists()  # nothing written
    monkeypatch.delenv("WORLD_SIZE")
    plan = llm_grpo.dry_run(GRPORun.of(parse_options([])))  # the default run, on this CPU: what it trains with
    assert plan["config"]["per_device_train_batch_size"] == 32 and plan["config"]["use_cpu"]
    assert plan["tokenizer_checked"]


def test_a_local_model_with_a_damaged_config_is_named(tmp_path):
    """Was 'could not be read here (OSError); pass a local model directory, or add baselines/model_configs//...'."""
    (tmp_path / "config.json").write_text('{"model_type": "lla')
    with pytest.raises(gpu_plan.PlanError, match=f"^{re.escape(str(tmp_path))}: its config.json does not read"):
        gpu_plan.model_shape(str(tmp_path))


def test_dry_run_refuses_what_a_run_would_refuse(tmp_path, monkeypatch):
    model = str(tiny_qwen(tmp_path / "m"))
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    with pytest.raises(SystemExit, match="ZeRO-3 shards the weights"):
        llm_grpo.main(["--model", model, "--interaction", "single-pass", "--gpu-memory-gb", "80", "--dry-run"])
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    with pytest.raises(SystemExit, match="divisible by the number of processes"):
        llm_grpo.main(["--model", model, "--interaction", "single-pass", "--gpu-memory-gb", "80", "--dry-run",
                       "--prompts-per-step", "3", "--num-generations", "3"])
    with pytest.raises(SystemExit, match="could not be read here"):
        llm_grpo.main(["--model", "no-such-org/no-such-model", "--interaction", "single-pass", "--dry-run"])
    from transformers import MambaConfig, T5Config  # a ValueError and an AttributeError traceback from deep inside

    for config in (T5Config(d_model=32, num_layers=1, num_heads=2, vocab_size=50), MambaConfig(hidden_size=32, num_hidden_layers=1)):
        config.save_pretrained(tmp_path / config.model_type)
        with pytest.raises(SystemExit, match=f"--model: the config of .* \\({config.model_type}\\) is not a causal LM"):
            llm_grpo.main(["--model", str(tmp_path / config.model_type), "--interaction", "single-pass", "--dry-run"])


# --- start-up checks ---------------------------------------------------------------------------------------


def test_critic_rewards_are_refused_on_states_it_cannot_score():
    with pytest.raises(SystemExit, match="integer states, but preset 'tinyzero'"):
        parse_options(["--preset", "tinyzero", "--rewards", "critic", "--interaction", "single-pass"])
    assert parse_options(["--rewards", "critic"]).rewards == "critic"  # longproc-0.5k: 4 integers


def chat_tokenizer(template: str, eos: str):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<unk>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "x"])}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")), eos_token=eos)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>", "<|eot_id|>", "<|end_of_text|>"]})
    tok.chat_template = template
    return tok


LLAMA3 = ("{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}"
          "{% if not (loop.last and m['role'] == 'assistant') or not continue_final_message %}<|eot_id|>{% endif %}"
          "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")


def test_chat_template_and_eos_checks():
    from trl import chat_template_utils

    qwen = chat_tokenizer(chat_template_utils.qwen2_5_chat_template, "<|im_end|>")
    compat.check_tokenizer(qwen, "qwen", "tinyzero", True)  # the turn ends with the EOS
    compat.check_tokenizer(chat_tokenizer(LLAMA3, "<|eot_id|>"), "llama-instruct", "tinyzero", True)
    base = chat_tokenizer(LLAMA3, "<|end_of_text|>")  # a base model's EOS with the instruct template
    with pytest.raises(SystemExit, match="ends the assistant's turn with '<|eot_id|>'.*--no-chat-template"):
        compat.check_tokenizer(base, "llama-base", "tinyzero", True)
    compat.check_tokenizer(base, "llama-base", "tinyzero", False)  # raw text: nothing to end
    no_system = chat_tokenizer("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role "
                               "not supported') }}{% endif %}{{ m['content'] }}<|im_end|>{% endfor %}", "<|im_end|>")
    compat.check_tokenizer(no_system, "gemma-like", "longproc", True)  # longproc sends one user message
    with pytest.raises(SystemExit, match="rejects the tinyzero prompt .*System role not supported"):
        compat.check_tokenizer(no_system, "gemma-like", "tinyzero", True)
    no_eos = chat_tokenizer(LLAMA3, "<|eot_id|>")
    no_eos.eos_token = None
    with pytest.raises(SystemExit, match="has no EOS token"):
        compat.check_tokenizer(no_eos, "no-eos", "compact", True)


def test_training_checks_the_tokenizer_before_the_model_loads(tmp_path, monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("the model loads after the checks")

    tok = chat_tokenizer(LLAMA3, "<|end_of_text|>")
    monkeypatch.setattr(grpo_config, "read_tokenizer", lambda name: tok)
    monkeypatch.setattr(llm_grpo, "load_model_and_tokenizer", no_model)
    with pytest.raises(SystemExit, match="ends the assistant's turn"):
        llm_grpo.train(Options(model=str(tiny_qwen(tmp_path / "m")), interaction="single-pass", prompt_style="longproc",
                               output_dir=str(tmp_path / "run"), train_pass_rates="none"))
    assert not (tmp_path / "run").exists()  # nothing written either


# --- the GPU section of docs/llm_grpo.md --------------------------------------------------------------------


def gpu_section_commands() -> list[tuple[str, str]]:
    """``(comment above it, command)`` for every command in the bash blocks of the doc's GPU section."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## GPUs\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        comment = ""
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("#"):
                comment = line
            elif line.strip():
                commands.append((comment, line.strip()))
    return commands


def run_dry(comment: str, command: str, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Run a documented command with --dry-run as its launcher would (the variables it sets; --gpu-memory-gb for the
    GPUs the comment names); the output of an llm_grpo.py command, None for llm_eval.py."""
    from accelerate.commands.launch import launch_command_parser

    from baselines import llm_eval

    words = shlex.split(command)
    while "=" in words[0]:  # VAR=value prefixes (CUDA_VISIBLE_DEVICES): the device choice, not the plan
        words.pop(0)
    if words[:2] == ["accelerate", "launch"]:
        args = launch_command_parser().parse_args(words[2:])
        monkeypatch.setenv("WORLD_SIZE", str(args.num_processes or 1))  # what torchrun / deepspeed set
        if args.use_deepspeed:  # as accelerate.utils.launch.prepare_deepspeed_cmd_env sets them
            monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
            monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", str(args.zero_stage))
        script, argv = args.training_script, list(args.training_script_args)
    else:
        assert words[0] == "python", command
        script, argv = words[1], words[2:]
    if script == "baselines/llm_eval.py":
        plan = llm_eval.main([*argv, "--dry-run"])
        assert isinstance(plan["memory"], dict), plan
        return None
    assert script == "baselines/llm_grpo.py", command
    gpus = re.search(r"(\d+) x (\d+) GB", comment)
    assert gpus, f"name the GPUs in the comment above {command!r}"
    n, size = int(gpus[1]), gpus[2]
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        llm_grpo.main([*argv, "--dry-run", "--gpu-memory-gb", size])
    out = buf.getvalue()
    processes = int(re.search(r"process layout: (\d+) process", out)[1])
    assert processes <= n, out
    return out


def test_every_command_of_the_gpu_section_passes_its_dry_run(monkeypatch):
    commands = gpu_section_commands()
    assert len(commands) >= 5
    outputs = []
    for comment, command in commands:
        if command.startswith("CUDA_VISIBLE_DEVICES=0 trl vllm-serve"):  # the vLLM server of the server-mode example
            continue
        with monkeypatch.context() as m:
            out = run_dry(comment, command, m)
        if out is not None:
            assert "fits:" in out, f"{command}\n{out}"
            outputs.append(out)
    seven_b = next(o for o in outputs if "Qwen/Qwen2.5-7B-Instruct" in o)
    spare = float(re.search(r"fits: ([\d.]+) GB", seven_b)[1])
    assert spare >= 8  # the target: the 7B command fits 80 GB GPUs with margin
    shown = DOC.read_text(encoding="utf-8").split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    printed = [line for line in shown if not line.startswith(("$", "    "))]
    assert printed and all(line in seven_b.splitlines() for line in printed), "the doc's dry-run output drifted"
