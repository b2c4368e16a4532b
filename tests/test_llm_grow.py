"""baselines/llm_grow.py: block expansion keeps what the model computes and plays, and refuses bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines import llm_grow  # noqa: E402
from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer, load_pretrained  # noqa: E402
from countdown_gym import load_split  # noqa: E402
from countdown_gym.integrations.trl_rollout import play_episodes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TURNS = ROOT / "baselines" / "checkpoints" / "countdown-tiny-lm-turns"


def test_grown_model_computes_and_plays_as_the_original(tmp_path):
    out = llm_grow.grow(llm_grow.GrowOptions(model=str(TURNS), out=str(tmp_path / "deep")))
    base, tok = load_pretrained(TURNS)
    grown, _ = load_pretrained(out)
    assert grown.config.num_hidden_layers == 2 * base.config.num_hidden_layers
    assert [layer.self_attn.layer_idx for layer in grown.model.layers] == list(range(grown.config.num_hidden_layers))
    ids = tok(["Numbers: [37,14,29,6] Target: 46\n37-14\n= 23 [29,6,23]\n"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(grown(ids).logits, base(ids).logits, rtol=0, atol=1e-5)
    problems = load_split("longproc-0.5k", "test")[:12]
    played = [play_episodes(m, tok, problems, greedy=True) for m in (base, grown)]
    assert [r.turns for r in played[0]] == [r.turns for r in played[1]]

    meta = json.loads((out / "training.json").read_text())
    assert meta["grown_from"]["layers"] == 4 and meta["model_config"]["num_hidden_layers"] == 8
    assert meta["sft_config"]["interaction"] == "multi-turn"  # llm_grpo's --interaction auto reads it
    assert (out / "train_pass_rates.jsonl").read_bytes() == (TURNS / "train_pass_rates.jsonl").read_bytes()
    assert not (tmp_path / "deep.partial").exists()

    # the zeroed projections learn from the first gradient: the copies are not dead weight
    grown.train()
    grown(ids, labels=ids).loss.backward()
    extra = grown.model.layers[1]
    assert extra.self_attn.o_proj.weight.grad.abs().sum() > 0 and extra.mlp.down_proj.weight.grad.abs().sum() > 0


def test_every_second_layer(tmp_path):
    tok = build_tokenizer()
    model = build_model(TinyLMConfig(hidden=32, layers=4, heads=2, intermediate=64), tok)
    grown = llm_grow.expand_blocks(model, every=2)
    assert grown.config.num_hidden_layers == 6 and model.config.num_hidden_layers == 4
    ids = tok(["Numbers: [1,2,3,4] Target: 10\n"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(grown(ids).logits, model(ids).logits, rtol=0, atol=1e-5)


def test_a_qwen2_model_with_sliding_layers_grows_too():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, use_sliding_window=True, sliding_window=4,
                      max_window_layers=1)
    model = Qwen2ForCausalLM(cfg).eval()
    grown = llm_grow.expand_blocks(model)
    assert grown.config.num_hidden_layers == 6
    assert grown.config.layer_types == [t for t in model.config.layer_types for _ in range(2)]
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(grown(ids).logits, model(ids).logits, rtol=0, atol=1e-5)


def test_bad_input_is_refused_with_a_message(tmp_path):
    tok = build_tokenizer()
    gpt2 = build_model(TinyLMConfig(arch="gpt2", hidden=32, layers=1, heads=2, intermediate=64), tok)
    with pytest.raises(ValueError, match="Llama-style"):
        llm_grow.expand_blocks(gpt2)
    with pytest.raises(SystemExit, match="no saved model there"):
        llm_grow.grow(llm_grow.GrowOptions(model=str(tmp_path / "missing"), out=str(tmp_path / "o")))
    (tmp_path / "config_only").mkdir()  # no tokenizer files: was transformers' ValueError traceback
    shutil.copy(TURNS / "config.json", tmp_path / "config_only")
    with pytest.raises(SystemExit, match="no saved model there"):
        llm_grow.grow(llm_grow.GrowOptions(model=str(tmp_path / "config_only"), out=str(tmp_path / "o")))
    torn = shutil.copytree(TURNS, tmp_path / "torn")  # cut-off weights: was safetensors' SafetensorError traceback
    (torn / "model.safetensors").write_bytes((TURNS / "model.safetensors").read_bytes()[:1000])
    with pytest.raises(SystemExit, match="torn: the saved model does not load"):
        llm_grow.grow(llm_grow.GrowOptions(model=str(torn), out=str(tmp_path / "o")))
    (tmp_path / "taken").mkdir()
    with pytest.raises(SystemExit, match="exists"):
        llm_grow.grow(llm_grow.GrowOptions(model=str(TURNS), out=str(tmp_path / "taken")))
    proc = subprocess.run([sys.executable, str(ROOT / "baselines" / "llm_grow.py"), "--every", "0"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "--every must be >= 1" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("text", ["{", "[1]", ""])
def test_a_damaged_training_json_is_one_error_naming_it(tmp_path, text):
    """A cut-off or hand-edited training.json beside the model raised json's JSONDecodeError (a list: TypeError)."""
    model = tmp_path / "m"
    shutil.copytree(TURNS, model)
    (model / "training.json").write_text(text)
    with pytest.raises(SystemExit, match="training.json"):
        llm_grow.grow(llm_grow.GrowOptions(model=str(model), out=str(tmp_path / "o")))
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()


def test_expand_blocks_refuses_every_below_one_from_python() -> None:
    model = build_model(TinyLMConfig(), build_tokenizer())
    with pytest.raises(ValueError, match="every must be >= 1, got 0"):
        llm_grow.expand_blocks(model, 0)
