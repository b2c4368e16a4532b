"""What a chat model actually sees, per prompt style and per renderer: TRL's GRPOTrainer, llm_grpo.py and
llm_eval.py, verl's chat-template path and verifiers, under the real Qwen2.5-Instruct chat template.

The assistant turn is opened exactly once; TinyZero's pre-filled turn ("Let me solve this step by step.\\n<think>")
is continued where it is kept (a rendered text prompt), never closed and reopened.
"""

from __future__ import annotations

import pytest

from countdown_gym import load_split
from countdown_gym.game.text_format import (
    PROMPT_STYLES,
    TINYZERO_ASSISTANT_PREFIX,
    build_prompt,
    chat_messages,
    format_list,
    render_chat_prompt,
)

pytest.importorskip("trl")
from qwen_chat import ASSISTANT_HEADER, qwen_tokenizer, tiny_qwen2  # noqa: E402

P = load_split("tinyzero", "test")[0]
LP = load_split("longproc-0.5k", "test")[0]
PROBLEMS = {"longproc": LP, "tinyzero": P, "compact": LP}


def tinyzero_instruct(p) -> str:
    """TinyZero's examples/data_preprocess/countdown.py, template_type 'qwen-instruct', verbatim."""
    return (
        "<|im_start|>system\nYou are a helpful assistant. You first thinks about the reasoning process in the mind and "
        "then provides the user with the answer.<|im_end|>\n<|im_start|>user\n Using the numbers "
        f"{format_list(p.numbers)}, create an equation that equals {p.target}. You can use basic arithmetic operations "
        "(+, -, *, /) and each number can only be used once. Show your work in <think> </think> tags. And return the "
        "final answer in <answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>.<|im_end|>\n"
        "<|im_start|>assistant\nLet me solve this step by step.\n<think>"
    )


@pytest.fixture(scope="module")
def tok():
    corpus = [build_prompt(p, s) for s, p in PROBLEMS.items()] + [tinyzero_instruct(P)]
    return qwen_tokenizer(corpus)


def test_the_local_template_is_trls_copy_of_qwen25s() -> None:
    from qwen_chat import qwen25_template
    from trl import chat_template_utils

    assert qwen25_template() == chat_template_utils.qwen2_5_chat_template


def opened_once(text: str) -> bool:
    return text.count("<|im_start|>assistant") == 1


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_chat_messages_end_with_the_user_turn(style: str, tok) -> None:
    messages = chat_messages(PROBLEMS[style], style)
    assert messages[-1]["role"] == "user" and all(m["role"] != "assistant" for m in messages)
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert opened_once(text) and text.endswith(ASSISTANT_HEADER)


def test_tinyzero_prefill_is_opt_in_and_continued(tok) -> None:
    messages = chat_messages(P, "tinyzero", prefill=True)
    assert messages[-1] == {"role": "assistant", "content": TINYZERO_ASSISTANT_PREFIX}
    assert render_chat_prompt(P, tok) == tinyzero_instruct(P)
    # the failure this guards against: a renderer that adds the generation prompt after the pre-fill
    broken = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert broken.count("<|im_start|>assistant") == 2 and "<think><|im_end|>" in broken
    assert chat_messages(LP, "longproc", prefill=True) == chat_messages(LP, "longproc")  # tinyzero only


def test_render_chat_prompt_leaves_out_a_bos_the_tokenizer_adds(tok) -> None:
    class Wrapped:  # a tokenizer whose template writes a BOS and whose tokenizer adds one too (Llama-style)
        bos_token, bos_token_id = "<|endoftext|>", tok.convert_tokens_to_ids("<|endoftext|>")

        def apply_chat_template(self, messages, **kw):
            return self.bos_token + tok.apply_chat_template(messages, **kw)

        def __call__(self, text, **kw):
            return {"input_ids": [self.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]}

    assert render_chat_prompt(P, Wrapped()) == tinyzero_instruct(P)


@pytest.fixture(scope="module")
def trainer(tok, tmp_path_factory):
    """A real TRL GRPOTrainer (nothing trained): its _tokenize_prompts is how it renders every batch."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("grpo")), max_steps=1, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=8, use_cpu=True, report_to=[], save_strategy="no")
    return GRPOTrainer(model=tiny_qwen2(tok), processing_class=tok, args=args,
                       train_dataset=Dataset.from_list([{"prompt": "x"}] * 2), reward_funcs=[lambda completions, **k: [0.0] * len(completions)])


def trl_sees(trainer, prompts: list) -> list[str]:
    ids, _, _ = trainer._tokenize_prompts(prompts)
    return [trainer.processing_class.decode(i, skip_special_tokens=False) for i in ids]


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_trl_grpo_trainer_opens_the_assistant_turn_once(style: str, trainer) -> None:
    (seen,) = trl_sees(trainer, [chat_messages(PROBLEMS[style], style)])
    assert opened_once(seen) and seen.endswith(ASSISTANT_HEADER)


@pytest.mark.parametrize("style", ["longproc", "tinyzero"])
def test_llm_grpo_prompts_under_trl_and_validation(style: str, trainer, tok) -> None:
    from baselines.lm.generation import prompt_ids
    from countdown_gym.game.text_format import trainer_prompt

    p = PROBLEMS[style]
    prompt = trainer_prompt(p, style, tok)
    (seen,) = trl_sees(trainer, [prompt])
    assert opened_once(seen)
    if style == "tinyzero":
        assert isinstance(prompt, str) and seen == tinyzero_instruct(p)  # TinyZero's pre-fill, continued
    else:
        assert seen.endswith(ASSISTANT_HEADER)
    (val,) = prompt_ids(tok, [prompt])  # the validation pass tokenizes as TRL does
    assert tok.decode(val, skip_special_tokens=False) == seen
    raw = trainer_prompt(p, style, tok, chat_template=False)  # --no-chat-template: the base-model text
    assert raw == build_prompt(p, style) and "<|im_start|>" not in trl_sees(trainer, [raw])[0]


@pytest.mark.parametrize("style", ["longproc", "tinyzero"])
def test_llm_eval_prompts(style: str, tok) -> None:
    from baselines.llm_eval import make_prompts

    (text,) = make_prompts([PROBLEMS[style]], tok, style)
    assert opened_once(text)
    assert text == (tinyzero_instruct(P) if style == "tinyzero" else
                    tok.apply_chat_template(chat_messages(LP, style), tokenize=False, add_generation_prompt=True))


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_verl_rows_under_verls_chat_template_path(style: str, tok) -> None:
    from countdown_gym.integrations.verl_export import verl_rows

    (row,) = verl_rows([PROBLEMS[style]], "tinyzero", "test", style)
    assert row["prompt"] == chat_messages(PROBLEMS[style], style)
    # verl's RLHFDataset renders a row's messages with add_generation_prompt=True
    text = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert opened_once(text) and text.endswith(ASSISTANT_HEADER)
    if style == "tinyzero":
        assert text == tinyzero_instruct(P)[: -len(TINYZERO_ASSISTANT_PREFIX)]


def test_verifiers_prompts_are_system_and_user(tok) -> None:
    pytest.importorskip("verifiers")
    from countdown_gym import load_environment

    env = load_environment(num_train_examples=1, num_eval_examples=1)
    row = env.get_eval_dataset()[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    text = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert text == tinyzero_instruct(P)[: -len(TINYZERO_ASSISTANT_PREFIX)]
