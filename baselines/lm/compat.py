"""Start-up compatibility checks of a GRPO run, before any model loads: one clear line per problem (the critic vs
the preset, the chat template vs the prompt style and the stop tokens, the tokenizer's EOS, the process layout)."""

from __future__ import annotations

from typing import Any

from countdown_gym import dataclass_cli


def check_critic_fits(preset: str) -> None:
    """A usage error when the shipped critic cannot score the preset's states (too many numbers, or fractions)."""
    from countdown_gym.data.generator import PRESETS
    from critics import load_critic

    limit = load_critic().config.max_numbers
    config = PRESETS[preset]
    if config.max_numbers > limit:
        dataclass_cli.usage_error(f"--rewards critic: the shipped critic scores states of at most {limit} numbers, but "
                                  f"preset {preset!r} has problems of up to {config.max_numbers}; choose another reward or "
                                  f"a critic trained with max_numbers >= {config.max_numbers} (python -m critics.train "
                                  f"--preset {preset} ...)")
    if not config.rules.integer_only:
        dataclass_cli.usage_error(f"--rewards critic: the critic is trained on integer states, but preset {preset!r} "
                                  f"plays rules {config.rules.name!r}, whose states hold fractions; choose another reward "
                                  "or preset")


def check_layout(strategy: str) -> None:
    """Exit for a process layout whose processes do not each hold the whole model (validation needs it)."""
    if name := {"zero3": "DeepSpeed ZeRO-3", "fsdp": "FSDP"}.get(strategy):
        raise SystemExit(f"{name} shards the weights, but validation generates on each process alone and saves the "
                         "best model from the main one: launch with DDP or DeepSpeed ZeRO-1/2 (--zero_stage 2)")


def check_tokenizer(tokenizer: Any, model: str, prompt_style: str, chat_template: bool) -> None:
    """Exit when the tokenizer cannot end completions, or its chat template cannot carry ``prompt_style``."""
    from transformers import GenerationConfig

    from countdown_gym.game.problem import Problem
    from countdown_gym.game.text_format import render_chat_prompt

    if tokenizer.eos_token is None:
        raise SystemExit(f"--model {model}: the tokenizer has no EOS token, so no completion would end before "
                         "--max-completion-length (TRL stops at the EOS, and pads with it when there is no pad token)")
    if prompt_style == "compact" or not chat_template or not getattr(tokenizer, "chat_template", None):
        return
    try:
        render_chat_prompt(Problem((1, 2, 3, 4), 10), tokenizer, prompt_style)
        mark = "Countdown-answer-end"
        turn = tokenizer.apply_chat_template([{"role": "user", "content": "?"}, {"role": "assistant", "content": mark}],
                                             tokenize=False)
    except Exception as exc:  # noqa: BLE001 - jinja raises its own exceptions (TemplateError, and ValueError...)
        raise SystemExit(f"--model {model}: its chat template rejects the {prompt_style} prompt "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]}); pass --no-chat-template") from None
    after = turn.split(mark, 1)[1].strip()
    if not after:
        return  # the template adds nothing after the answer: the model's EOS ends it
    try:  # TRL stops at the tokenizer's EOS and the model's generation config's
        eos = GenerationConfig.from_pretrained(model).eos_token_id
    except (OSError, ValueError):
        eos = None
    stops = {tokenizer.eos_token_id, *([eos] if isinstance(eos, int) else (eos or []))} - {None}
    first = tokenizer(after, add_special_tokens=False)["input_ids"][:1]
    if first and first[0] not in stops:
        raise SystemExit(f"--model {model}: its chat template ends the assistant's turn with "
                         f"{tokenizer.convert_ids_to_tokens(first[0])!r}, but the run stops at "
                         f"{tokenizer.eos_token!r}: a base model's tokenizer with an instruct template? Its completions "
                         "would run on to --max-completion-length; use the instruct model, or --no-chat-template")


def check_tool_tokenizer(tokenizer: Any, model: str) -> None:
    """Exit when TRL's tool loop cannot run with the tokenizer: no EOS, or no chat template whose tool calls TRL can
    render and parse."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    check_tokenizer(tokenizer, model, "compact", False)
    if not getattr(tokenizer, "chat_template", None) or not supports_tool_calling(tokenizer):
        raise SystemExit(f"--model {model}: --interaction tools needs a chat template that renders tool calls and "
                         "their results (an instruct model such as Qwen2.5-Instruct); this tokenizer has none")
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            raise SystemExit(f"--model {model}: TRL cannot parse tool calls written in this chat template (it parses "
                             "the templates it ships: Qwen2.5, Qwen3, Llama 3.1/3.2, ...); set the tokenizer's "
                             "response_template, or use a model with one of those templates") from None
