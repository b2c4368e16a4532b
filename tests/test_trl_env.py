"""TRL environment_factory integration: the tools, reset/get_reward, the dense reward functions, and
GRPO steps through TRL's real tool-call loop with a tiny local Qwen2 (no download)."""

from __future__ import annotations

import json
import re
import sys

import pytest

from countdown_gym import Problem, Rules
from countdown_gym.game.turn_game import UNDO_MOVE, replay_turns
from countdown_gym.integrations.trl_env import (
    TOOL_NAMES,
    CountdownToolEnv,
    critic_reward,
    dataset_row,
    make_dataset,
    oracle_reward,
    process_rank,
    tool_prompt,
)
from countdown_gym.rewards.terms import TRANSITION_KEYS
from countdown_gym.rewards.variants import get_variant

P = Problem((6, 2, 5, 3), 8)
ROW = {"numbers": [6, 2, 5, 3], "target": 8}


# ---- (a) tools, reset, get_reward, bad input ---------------------------------------------------------------


def test_import_stays_light() -> None:
    import subprocess

    code = (
        "import sys, countdown_gym.integrations.trl_env as m; "
        "print(sorted(k for k in ('torch', 'transformers', 'trl', 'datasets') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_solving_episode_records_transitions_and_rewards_one() -> None:
    env = CountdownToolEnv()
    text = env.reset(**ROW, prompt=[{"role": "user", "content": ""}])  # TRL passes every column, prompt included
    assert text == tool_prompt(P, env.max_turns)
    assert "target 8" in text and "[6,2,5,3]" in text and "move(a, op, b)" in text
    assert env.get_reward() == 0.0  # nothing played yet
    assert env.move(6, "-", 2) == "= 4 [5,3,4]"
    assert env.numbers() == "[5,3,4] target 8, 15 turns left"  # free: no turn used
    assert env.move(5, "-", 3) == "= 2 [4,2]"
    assert env.move(4.0, "*", "2") == "= 8 [8] solved"  # a JSON float and a string operand are read as numbers
    assert env.solved and env.get_reward() == 1.0
    assert [t["move"] for t in env.transitions] == [(6, "-", 2, 4), (5, "-", 3, 2), (4, "*", 2, 8)]
    for t in env.transitions:
        assert set(TRANSITION_KEYS) <= set(t) and t["valid"] and t["target"] == 8
    assert env.transitions[-1]["next_state"] == (8,)
    # the same turns through the game's own replay give the same records and verdict
    replay = replay_turns(P, ["6-2", "5-3", "4*2"])
    assert replay.transitions == env.transitions and replay.reward == env.get_reward()


def test_illegal_moves_undo_and_give_up() -> None:
    env = CountdownToolEnv()
    env.reset(**ROW)
    assert env.undo() == "error nothing_to_undo [6,2,5,3]"
    assert env.move(9, "+", 1) == "error operand_unavailable [6,2,5,3]"
    assert env.move(6, "/", 4) == "error operand_unavailable [6,2,5,3]"
    assert env.move(5, "/", 2) == "error non_integer_result [6,2,5,3]"
    assert env.move(6, "^", 2) == "error malformed [6,2,5,3]"
    assert env.move(None, "+", 2) == "error malformed [6,2,5,3]"  # type: ignore[arg-type]
    assert env.move("1" * 300, "+", 2) == "error turn_too_long [6,2,5,3]"
    assert env.move(6, "+", 2) == "= 8 [5,3,8]"
    assert env.undo() == "undone [6,2,5,3]"
    assert env.transitions[-1]["move"] == UNDO_MOVE and env.transitions[-1]["next_state"] == (6, 2, 5, 3)
    assert env.give_up() == "gave up [6,2,5,3]"
    assert env.get_reward() == 0.0 and not env.solved
    # every call after the end is a clear error string, never an exception
    for reply in (env.move(6, "-", 2), env.undo(), env.give_up(), env.numbers()):
        assert reply == "error episode_over [6,2,5,3] gave up"
    assert env.episode.turns == 10 and env.episode.invalid_turns == 7
    assert [c[0] for c in env.calls][-4:] == ["move", "undo", "give_up", "numbers"]



def test_an_int_past_strs_digit_limit_is_a_refused_move() -> None:
    """move(10**5000, ...) raised Python's 4,300-digit int->str ValueError from inside tool_turn; a tool never raises."""
    env = CountdownToolEnv()
    env.reset(**ROW)
    huge = 10**5000
    assert env.move(huge, "+", 2) == env.move(6, "+", huge) == env.move(6, huge, 2) == "error malformed [6,2,5,3]"  # type: ignore[arg-type]
    assert env.calls[0][1] == "<a number of over 4300 digits>+2" and env.episode.invalid_turns == 3


def test_process_rank_names_a_rank_too_large_to_print() -> None:
    """process_rank(10**5000, 1) raised Python's int->str digit limit while writing its own message."""
    with pytest.raises(ValueError, match="got rank <a number of over 4300 digits> and world_size 1"):
        process_rank(10**5000, 1)

def test_turn_limit_ends_the_episode() -> None:
    env = CountdownToolEnv(max_turns=2)
    env.reset(**ROW)
    assert env.move(6, "+", 2) == "= 8 [5,3,8]"
    assert env.move(5, "+", 3) == "= 8 [8,8] turn limit"
    assert env.move(8, "/", 8) == "error episode_over [8,8] turn limit"
    assert env.get_reward() == 0.0
    assert env.numbers() == "error episode_over [8,8] turn limit"


def test_tools_before_reset_and_reset_starts_over() -> None:
    env = CountdownToolEnv()
    assert env.move(1, "+", 2).startswith("error no_episode")
    assert env.numbers().startswith("error no_episode")
    assert env.get_reward() == 0.0 and env.state is None
    env.reset(**ROW)
    env.move(6, "-", 2)
    env.reset(numbers=[21, 16, 17, 26], target=46)
    assert env.transitions == [] and env.state == (21, 16, 17, 26) and env.calls == []


def test_rules_column_json_dict_and_preset() -> None:
    env = CountdownToolEnv()
    tiny = json.dumps(Rules.tinyzero().to_dict())
    env.reset(numbers=[5, 2, 3], target=3, rules=tiny)
    assert env.episode.rules == Rules.tinyzero()
    assert env.move(5, "/", 2) == "= 5/2 [3,5/2]"  # fractions are legal under tinyzero rules
    assert env.move("5/2", "+", "1/2").startswith("error operand_unavailable")
    env.reset(numbers=[5, 2, 3], target=3, rules="tinyzero")
    assert env.episode.rules == Rules.tinyzero()
    env.reset(numbers=[5, 2, 3], target=3, rules=None)
    assert env.episode.rules == Rules.longproc()


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({}, "needs 'numbers' and 'target'"),
        ({"numbers": [1, 2]}, r"missing \['target'\]"),
        ({"numbers": "12", "target": 3}, "sequence of ints"),
        ({"numbers": [1, 2], "target": "x"}, "target must be an int"),
        ({"numbers": [1, 2.5], "target": 3}, "must be an int"),
        ({"numbers": [4], "target": 4}, "at least 2 numbers"),
        ({"numbers": [1, 2], "target": 3, "rules": "{not json"}, "not valid JSON"),
        ({"numbers": [1, 2], "target": 3, "rules": "nope"}, "unknown rules preset"),
        ({"numbers": [1, 2], "target": 3, "rules": {"bogus": 1}}, "unknown Rules fields"),
    ],
)
def test_malformed_rows_are_clear_value_errors(row: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CountdownToolEnv().reset(**row)


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        CountdownToolEnv(max_turns=0)
    with pytest.raises(ValueError, match="max_turn_chars"):
        CountdownToolEnv(max_turn_chars=True)  # type: ignore[arg-type]


def test_tool_schemas_as_trl_builds_them() -> None:
    import inspect

    from transformers.utils import get_json_schema

    env = CountdownToolEnv()
    # TRL's rule: the class's public functions, minus reset and get_reward, are the tools
    tools = [n for n, _ in inspect.getmembers(CountdownToolEnv, inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert sorted(tools) == sorted(TOOL_NAMES)
    move = get_json_schema(env.move)["function"]
    assert move["name"] == "move" and move["parameters"]["required"] == ["a", "op", "b"]
    assert move["parameters"]["properties"]["op"]["enum"] == ["+", "-", "*", "/"]
    assert move["parameters"]["properties"]["a"]["type"] == ["integer", "string"]
    for name in ("undo", "give_up", "numbers"):
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["parameters"]["properties"] == {} and schema["description"]


def test_dense_reward_functions_read_the_environments() -> None:
    solved, wandered, other = CountdownToolEnv(), CountdownToolEnv(), object()
    solved.reset(**ROW)
    for move in ((6, "-", 2), (5, "-", 3), (4, "*", 2)):
        solved.move(*move)
    wandered.reset(**ROW)
    wandered.move(6, "+", 2)  # a dead end: 8 is not reachable from [5,3,8]
    wandered.undo()  # back to the start: reachable
    wandered.move(9, "*", 1)  # refused
    envs = [solved, wandered, other]
    perfect, reachable = oracle_reward("perfect"), oracle_reward("reachable")
    assert perfect.__name__ == "oracle_perfect" and reachable.__name__ == "oracle_reachable"
    assert perfect([None] * 3, environments=envs, trainer_state=None) == [1.0, pytest.approx(1 / 3), None]
    assert reachable([None] * 3, environments=envs) == [1.0, pytest.approx(-1 / 3), None]
    replay = replay_turns(P, ["6+2", "undo", "9*1"])
    assert perfect([None], environments=[wandered]) == [get_variant("oracle-perfect").completion_score(replay)]

    class Half:
        def score(self, states, targets):
            import numpy as np

            return np.full(len(states), 0.5)

    critic = critic_reward(Half())
    assert critic.__name__ == "critic"
    assert critic([None] * 3, environments=envs) == [0.5, pytest.approx((0.5 + 0.5 - 1.0) / 3), None]
    assert critic([None], environments=[wandered]) == [get_variant("critic").completion_score(replay, Half())]
    with pytest.raises(ValueError, match="environment_factory"):
        perfect([None], environments=None)
    with pytest.raises(ValueError, match="unknown reward variant 'oracle-dense'"):
        oracle_reward("dense")
    with pytest.raises(ValueError, match="score"):
        critic_reward(object())  # type: ignore[arg-type]


def test_make_dataset_rows() -> None:
    ds = make_dataset([P, ((21, 16, 17, 26), 46), {"numbers": [5, 2, 3], "target": 3, "rules": "tinyzero"}])
    assert ds.column_names == ["prompt", "numbers", "target", "rules"]
    assert ds[0]["prompt"] == [{"role": "user", "content": ""}]
    assert ds[1]["numbers"] == [21, 16, 17, 26] and ds[1]["target"] == 46
    assert Rules.from_dict(json.loads(ds[2]["rules"])) == Rules.tinyzero()
    env = CountdownToolEnv()
    for row in ds:  # every row resets an environment, as TRL does it
        assert "Countdown" in env.reset(**row)
    assert dataset_row(P)["rules"] == ds[0]["rules"]
    with pytest.raises(ValueError, match="at least one"):
        make_dataset([])
    with pytest.raises(ValueError):
        make_dataset([((4,), 4)])
    with pytest.raises(ValueError, match=r"\|target\| must be < 2\*\*63, got 10"):  # was pyarrow's OverflowError
        make_dataset([P, ((6, 2), 10**20)])


# ---- (b) end to end: GRPO steps through TRL's real tool-call loop ------------------------------------------

SCRIPTS: dict[tuple[tuple[int, ...], int], list[list[tuple[str, dict] | str]]] = {}
"""Per puzzle, the scripted rollouts: a list of turns, each a tool call (name, arguments) or a final text."""

SOLVE_A = [("move", {"a": 6, "op": "-", "b": 2}), ("move", {"a": 5, "op": "-", "b": 3}),
           ("move", {"a": 4, "op": "*", "b": 2}), "Solved."]
WANDER_A = [("move", {"a": 6, "op": "+", "b": 2}), ("undo", {}), ("move", {"a": 9, "op": "*", "b": 1}),
            ("numbers", {}), "I stop here."]
SOLVE_B = [("move", {"a": 21, "op": "+", "b": 16}), ("move", {"a": 26, "op": "-", "b": 17}),
           ("move", {"a": 37, "op": "+", "b": 9}), "Done."]
GIVE_UP_B = [("move", {"a": 26, "op": "+", "b": 17}), ("give_up", {}), "Gave up."]
SCRIPTS[((6, 2, 5, 3), 8)] = [SOLVE_A, WANDER_A]
SCRIPTS[((21, 16, 17, 26), 46)] = [SOLVE_B, GIVE_UP_B]


def _turn_text(turn: tuple[str, dict] | str) -> str:
    """A scripted turn exactly as the Qwen chat templates render an assistant message."""
    if isinstance(turn, str):
        return turn
    name, args = turn
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def _build_tokenizer(template: str = "qwen2_5"):
    """A byte-level BPE tokenizer trained here on the rendered prompts, with TRL's copy of a Qwen chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl import chat_template_utils

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    env = CountdownToolEnv()
    tools = [getattr(env, n) for n in TOOL_NAMES]
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    bootstrap = PreTrainedTokenizerFast(tokenizer_object=raw)
    bootstrap.chat_template = getattr(chat_template_utils, f"{template}_chat_template")
    corpus = [
        bootstrap.apply_chat_template([{"role": "user", "content": env.reset(numbers=list(k[0]), target=k[1])}],
                                      tools=tools, tokenize=False, add_generation_prompt=True)
        for k in SCRIPTS
    ] + [_turn_text(t) for scripts in SCRIPTS.values() for s in scripts for t in s]
    raw.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=640, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  padding_side="left")
    tok.chat_template = bootstrap.chat_template  # TRL recognises it and adds its Qwen response parser
    return tok


def _scripted_processor(tokenizer):
    """A LogitsProcessor that makes the model write the scripted turns (everything else goes through TRL)."""
    import torch
    from transformers import LogitsProcessor

    header, end = "<|im_start|>assistant\n", tokenizer.eos_token
    puzzle_re = re.compile(r"reach the target (\d+) from the numbers \[([0-9,]+)\]")

    class Scripted(LogitsProcessor):
        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            forced = torch.full_like(scores, float("-inf"))
            for row, ids in enumerate(input_ids.tolist()):
                text = tokenizer.decode(ids, skip_special_tokens=False).replace(tokenizer.pad_token, "")
                m = puzzle_re.search(text)
                key = (tuple(int(x) for x in m.group(2).split(",")), int(m.group(1)))
                turns = text.split(header)[1:]  # [0] is the system and user part
                done, current = [t.split(end)[0] for t in turns[:-1]], turns[-1]
                scripts = [s for s in SCRIPTS[key] if [_turn_text(t) for t in s[: len(done)]] == done]
                wanted = [_turn_text(s[len(done)]) + end for s in scripts if len(s) > len(done)]
                wanted = [w for w in wanted if w.startswith(current) and w != current]
                if not wanted:  # off script, or the turn is over (a finished row is padded from here on)
                    next_id = tokenizer.eos_token_id
                else:
                    rest = wanted[row % len(wanted)][len(current):]  # rows of a group take different scripts
                    next_id = tokenizer(rest, add_special_tokens=False)["input_ids"][0]
                forced[row, next_id] = 0.0
            return forced

    return Scripted()


def _tiny_qwen2(tokenizer):
    import torch
    from transformers import LogitsProcessorList, Qwen2Config, Qwen2ForCausalLM

    class SteeredQwen2(Qwen2ForCausalLM):
        """A real Qwen2 whose generate() applies a logits processor (TRL calls generate with its own config)."""

        steer = None

        def generate(self, *args, **kwargs):
            kwargs["logits_processor"] = LogitsProcessorList([self.steer])
            return super().generate(*args, **kwargs)

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = SteeredQwen2(config)
    model.steer = _scripted_processor(tokenizer)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def _run_grpo(tmp_path, max_steps: int, problems: list[Problem] | None, template: str = "qwen2_5", generations: int = 2,
              factory=CountdownToolEnv, batch: int | None = None):
    """GRPO steps through TRL's tool loop; ``problems=None``: no train_dataset (``factory`` draws the problems)."""
    import torch
    from trl import GRPOConfig, GRPOTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine's cores are shared; restored below
    tokenizer = _build_tokenizer(template)
    model = _tiny_qwen2(tokenizer)
    seen: dict[str, list] = {"loss_inputs": [], "rewards": []}

    class Recording(GRPOTrainer):
        def _compute_loss(self, model, inputs):
            seen["loss_inputs"].append({k: inputs[k].detach().clone() for k in
                                        ("completion_ids", "completion_mask", "tool_mask")})
            return super()._compute_loss(model, inputs)

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            seen["rewards"].append({
                "names": list(self.reward_func_names),
                "per_func": rewards.detach().clone(),
                "envs": [(e.problem, list(e.calls), e.get_reward()) for e in self.environments],
                "completions": completions,
            })
            return rewards

    args = GRPOConfig(
        output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=batch or generations,
        num_generations=generations,
        max_completion_length=400, max_tool_calling_iterations=8, learning_rate=1e-3, logging_steps=1,
        report_to="none", save_strategy="no", use_cpu=True, shuffle_dataset=False, seed=0,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = Recording(
        model=model, args=args, processing_class=tokenizer,
        train_dataset=None if problems is None else make_dataset(problems),
        reward_funcs=[oracle_reward("perfect")], environment_factory=factory,
    )
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    return trainer, tokenizer, seen


def _script_of(problem: Problem, calls: list[tuple[str, str, str]]) -> list:
    """The scripted rollout whose tool calls an environment received."""
    names = [c[0] for c in calls]
    (script,) = [s for s in SCRIPTS[(problem.numbers, problem.target)]
                 if names == [t[0] for t in s if not isinstance(t, str)]]
    return script


def _check_run(trainer, tokenizer, seen, steps: int) -> None:
    assert len(seen["rewards"]) == steps and len(seen["loss_inputs"]) == steps
    outcomes = set()
    for batch, loss_inputs in zip(seen["rewards"], seen["loss_inputs"], strict=True):
        # (2) the reward TRL uses is the environment's verdict, and it is the game's own replay verdict
        assert batch["names"] == ["oracle_perfect", "CountdownToolEnv"]  # get_reward joins as a column
        by_replies = {}
        for row, (problem, calls, env_reward) in enumerate(batch["envs"]):
            script = _script_of(problem, calls)
            replay = replay_turns(problem, [text for name, text, _ in calls if name != "numbers"])
            assert [r for name, _, r in calls if name != "numbers"] == replay.replies
            assert batch["per_func"][row, 1].item() == env_reward == replay.reward
            assert env_reward == (1.0 if script in (SOLVE_A, SOLVE_B) else 0.0)
            assert batch["per_func"][row, 0].item() == pytest.approx(get_variant("oracle-perfect").completion_score(replay))
            # TRL parsed every tool call, ran it on this environment, and ended on the final text turn
            messages = batch["completions"][row]
            assert [m["tool_calls"][0]["function"]["name"] for m in messages if m.get("tool_calls")] == \
                [c[0] for c in calls]
            assert [m["content"] for m in messages if m["role"] == "tool"] == [c[2] for c in calls]
            assert messages[-1] == {"role": "assistant", "content": script[-1]}
            outcomes.add(env_reward)
            by_replies[tuple(c[2] for c in calls)] = script
        # (1) the environment's tokens (tool results and the template around them) carry zero loss weight,
        # the model's own tokens (its tool calls and final text) carry weight
        ids, cmask, tmask = loss_inputs["completion_ids"], loss_inputs["completion_mask"], loss_inputs["tool_mask"]
        assert tmask.shape == ids.shape
        for row in range(ids.shape[0]):  # TRL shuffles the rows: match them by content
            live = cmask[row] == 1
            trained = tokenizer.decode(ids[row][live & (tmask[row] == 1)], skip_special_tokens=False)
            masked = tokenizer.decode(ids[row][live & (tmask[row] == 0)], skip_special_tokens=False)
            replies = tuple(re.findall(r"<tool_response>\n(.*?)\n</tool_response>", masked))
            script = by_replies[replies]
            assert trained == "".join(_turn_text(t) + tokenizer.eos_token for t in script)
            assert masked.count("<tool_response>") == len(replies) == len(script) - 1
    assert outcomes == {0.0, 1.0}
    logged = [h["rewards/CountdownToolEnv/mean"] for h in trainer.state.log_history
              if "rewards/CountdownToolEnv/mean" in h]
    assert logged == [pytest.approx(b["per_func"][:, 1].mean().item()) for b in seen["rewards"]]


EXPERIMENTAL = "ignore:You are using 'environment_factory':UserWarning"


@pytest.mark.filterwarnings(EXPERIMENTAL)
@pytest.mark.parametrize("template", ["qwen2_5", "qwen3"])
def test_grpo_steps_through_trls_tool_loop(tmp_path, template: str) -> None:
    trainer, tokenizer, seen = _run_grpo(tmp_path, 2, [P, Problem((21, 16, 17, 26), 46)], template)
    assert (trainer.chat_template is None) == (template == "qwen2_5")  # TRL swaps in its Qwen3 training template
    _check_run(trainer, tokenizer, seen, 2)


@pytest.mark.slow
@pytest.mark.filterwarnings(EXPERIMENTAL)
def test_grpo_longer_run_larger_groups(tmp_path) -> None:
    problems = [P, Problem((21, 16, 17, 26), 46)] * 3
    trainer, tokenizer, seen = _run_grpo(tmp_path, 6, problems, "qwen2_5", generations=4)
    _check_run(trainer, tokenizer, seen, 6)


# ---- (c) no dataset: the environment draws its own problems -------------------------------------------------


def _solving_script(problem: Problem) -> list:
    """Tool calls that solve ``problem`` (each move keeps the target reachable), then a final text."""
    from countdown_gym.game.rules import format_number
    from countdown_gym.game.solver import reachable, successors

    state, calls = problem.numbers, []
    while len(state) > 1:
        move, state = next((m, s) for m, s in successors(state, problem.rules) if reachable(s, problem.target, problem.rules))
        a, op, b, _ = move
        calls.append(("move", {"a": format_number(a), "op": op, "b": format_number(b)}))
    return [*calls, "Solved."]


def test_problem_draw_groups_tiers_curriculum_and_errors() -> None:
    from countdown_gym.data.curriculum import Curriculum
    from countdown_gym.data.difficulty import tier
    from countdown_gym.integrations.trl_env import ProblemDraw

    draw = ProblemDraw(preset="tinyzero", seed=3, num_generations=4)
    drawn = [draw.next() for _ in range(12)]
    assert all(drawn[4 * g] == drawn[4 * g + k] for g in range(3) for k in range(4))  # one problem per group
    assert len({drawn[0], drawn[4], drawn[8]}) == 3 and all(p.rules == Rules.tinyzero() for p in drawn)
    again = ProblemDraw(preset="tinyzero", seed=3, num_generations=4)
    assert [again.next() for _ in range(12)] == drawn  # seeded
    hard = ProblemDraw(preset="longproc-0.5k", split="validation", tier="hard", seed=0)
    assert {tier(hard.next(), "longproc-0.5k") for _ in range(20)} == {"hard"}
    cur = Curriculum(preset="tinyzero", split="train", mode="adaptive", window=2)
    env = CountdownToolEnv(curriculum=cur, seed=0)
    assert "Countdown: reach the target" in env.reset(prompt=[{"role": "user", "content": ""}])  # TRL's placeholder row
    env.give_up()
    assert env.get_reward() == 0.0 and sum(cur.episodes.values()) == 1  # the outcome reached the curriculum
    env.get_reward()
    assert sum(cur.episodes.values()) == 1  # once per episode
    assert env.reset(**ROW).startswith("Countdown: reach the target 8")  # a real row still wins
    # environments built with the same arguments share one draw; others do not
    a, b = CountdownToolEnv(preset="hard", seed=5, num_generations=2), CountdownToolEnv(preset="hard", seed=5, num_generations=2)
    assert a.draw is b.draw and CountdownToolEnv(preset="hard", seed=6, num_generations=2).draw is not a.draw
    a.reset(), b.reset()
    assert a.problem == b.problem
    for kwargs, match in [({"num_generations": 0}, "num_generations"), ({"seed": "x"}, "seed"),
                          ({"tier": "extreme"}, "unknown tier"), ({"preset": "nope"}, "unknown preset"),
                          ({"tier": "easy", "curriculum": "adaptive"}, "either tier"), ({"curriculum": 3}, "curriculum must"),
                          ({"preset": ["tinyzero"]}, "unknown preset"), ({"seed": [0]}, "seed must")]:  # were 'unhashable'
        with pytest.raises(ValueError, match=match):
            CountdownToolEnv(**kwargs)
    with pytest.raises(ValueError, match="without a dataset, build the environment"):
        CountdownToolEnv().reset(prompt=[{"role": "user", "content": ""}])


@pytest.mark.parametrize("split", ["generate", "bogus", None])
def test_problem_draw_takes_only_a_frozen_split(split) -> None:
    from countdown_gym.integrations.trl_env import ProblemDraw

    with pytest.raises(ValueError, match="split must be a frozen split"):
        ProblemDraw(preset="tinyzero", split=split)


@pytest.mark.filterwarnings(EXPERIMENTAL)
def test_two_grpo_steps_with_train_dataset_omitted(tmp_path, monkeypatch) -> None:
    """GRPOTrainer(train_dataset omitted, environment_factory=partial(CountdownToolEnv, preset=..., ...)): TRL's
    placeholder rows reach reset() without numbers, each GRPO group plays one drawn problem, the tools run on it."""
    from functools import partial

    from countdown_gym.integrations.trl_env import ProblemDraw

    args = {"preset": "tinyzero", "split": "validation", "tier": "easy", "seed": 11, "num_generations": 2}
    ahead = ProblemDraw(**args)
    problems = [ahead.next() for _ in range(8)][::2]  # 2 steps x 2 groups: the problems the run will draw
    for p in problems:
        monkeypatch.setitem(SCRIPTS, (p.numbers, p.target), [_solving_script(p), GIVE_UP_B[1:]])
    trainer, tokenizer, seen = _run_grpo(tmp_path, 2, None, factory=partial(CountdownToolEnv, **args), batch=4)
    assert trainer.state.global_step == 2 and len(seen["rewards"]) == 2
    played = [[e[0] for e in batch["envs"]] for batch in seen["rewards"]]
    assert played == [[problems[0]] * 2 + [problems[1]] * 2, [problems[2]] * 2 + [problems[3]] * 2]
    for batch in seen["rewards"]:
        rewards = [e[2] for e in batch["envs"]]
        assert rewards == [1.0, 0.0, 1.0, 0.0]  # each group: the solving script, then give_up
        assert batch["per_func"][:, 1].tolist() == rewards
        for problem, calls, _ in batch["envs"]:
            assert calls[-1][2].endswith(("solved", "gave up [" + ",".join(map(str, problem.numbers)) + "]"))
