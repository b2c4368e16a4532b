"""The TRL reward functions of countdown_gym.integrations.trl: columns, completion forms, a real GRPO step."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from countdown_gym import Problem, Rules, verify
from countdown_gym.integrations.trl import (
    REWARD_FUNCTIONS,
    CriticReward,
    completion_text,
    format_reward,
    oracle_perfect_reward,
    oracle_reward,
    replay,
    sparse_reward,
)

P = Problem((21, 16, 17, 26), 46)
PJ = json.dumps(P.to_dict())
RIGHT = "21+16=37 [17,26,37]\n 26-17=9 [37,9]\n  37+9=46 [46]\n<answer>21 + 16 + (26 - 17)</answer>"
WRONG = "<answer>21 + 16 + 17 - 26</answer>"  # 28
UNTAGGED = "21 + 16 - 17 + 26"
COMPLETIONS = [RIGHT, WRONG, UNTAGGED]
COLUMNS = {"numbers": [[21, 16, 17, 26]] * 3, "target": [46] * 3}


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]  # TRL's conversational completion (grpo_trainer.py)


def test_numbers_and_target_columns_score_standard_completions() -> None:
    assert sparse_reward(["p"] * 3, COMPLETIONS, None, **COLUMNS) == [1.0, 0.0, 1.0]
    assert format_reward(["p"] * 3, COMPLETIONS, None, **COLUMNS) == [1.0, 1.0, 0.0]
    assert oracle_reward(["p"] * 3, COMPLETIONS, None, **COLUMNS)[0] == 1.0  # three valid moves that keep 46 reachable
    assert oracle_perfect_reward(["p"] * 3, COMPLETIONS, None, **COLUMNS)[0] == 1.0
    assert oracle_reward(["p"] * 3, COMPLETIONS, None, **COLUMNS)[1:] == [0.0, 0.0]  # no move lines


def test_conversational_completions_score_like_their_text() -> None:
    chats = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    for name, fn in REWARD_FUNCTIONS.items():
        assert fn(["p"] * 3, chats, None, **COLUMNS) == fn(["p"] * 3, COMPLETIONS, None, **COLUMNS), name
    # a tool-calling completion: several messages; the last assistant message is the answer
    multi = [{"role": "assistant", "content": "let me think"}, {"role": "tool", "content": "<answer>21+16-17+26</answer>"},
             {"role": "assistant", "content": [{"type": "text", "text": RIGHT}]}]
    assert sparse_reward(["p"], [multi], None, **{k: v[:1] for k, v in COLUMNS.items()}) == [1.0]
    assert completion_text(multi) == RIGHT


def test_problem_json_column_and_rules_column() -> None:
    assert sparse_reward(["p"] * 3, COMPLETIONS, None, problem=[PJ] * 3) == [1.0, 0.0, 1.0]
    # the problem column wins over numbers/target
    assert sparse_reward(["p"], [RIGHT], None, problem=[PJ], numbers=[[1, 2]], target=[3]) == [1.0]
    # rules as a preset name, a dict, or JSON (the trl_env dataset writes JSON)
    half = "<answer>(7 / 2) * 2</answer>"
    for rules in ("tinyzero", Rules.tinyzero().to_dict(), json.dumps(Rules.tinyzero().to_dict())):
        assert sparse_reward(["p"], [half], None, numbers=[[7, 2, 2]], target=[7], rules=[rules]) == [1.0]
    assert sparse_reward(["p"], [half], None, numbers=[[7, 2, 2]], target=[7]) == [0.0]  # LongProc: 7/2 is not an integer


def test_numpy_columns_from_a_dataset_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    assert sparse_reward(["p"], [RIGHT], None, numbers=[np.array([21, 16, 17, 26])], target=[np.int64(46)]) == [1.0]
    half = "<answer>(7 / 2) * 2</answer>"  # a numpy rules column was numpy's 'truth value ... is ambiguous'
    rules = np.array(["tinyzero", "longproc"])
    assert sparse_reward(["p"] * 2, [half] * 2, None, numbers=[[7, 2, 2]] * 2, target=[7] * 2, rules=rules) == [1.0, 0.0]


def test_bad_batches_raise_clear_errors() -> None:
    with pytest.raises(KeyError, match="'numbers' and 'target'"):
        sparse_reward(["p"], [RIGHT], None, trainer_state=None)
    with pytest.raises(ValueError, match="3 completions but 1 values in the 'target' column"):
        sparse_reward(["p"] * 3, COMPLETIONS, None, numbers=COLUMNS["numbers"], target=[46])
    with pytest.raises(ValueError, match="bad Countdown row"):
        sparse_reward(["p"], [RIGHT], None, numbers=[["a", 2]], target=[46])
    with pytest.raises(ValueError, match="Problem.to_dict"):
        sparse_reward(["p"], [RIGHT], None, problem=["{not json"])
    with pytest.raises(ValueError, match="Problem.to_dict"):
        sparse_reward(["p"], [RIGHT], None, problem=["[" * 5000 + "]" * 5000])
    with pytest.raises(TypeError, match="a completion must be a string or a list of chat messages"):
        sparse_reward(["p"], [42], None, problem=[PJ])
    with pytest.raises(TypeError, match="list of chat messages"):
        sparse_reward(["p"], [["just", "strings"]], None, problem=[PJ])


class _HalfCritic:
    """A scorer with the documented interface: score(states, targets) -> values in [-1, 1]."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, states, targets):
        self.calls += 1
        return [0.5] * len(states)


def test_critic_reward_takes_any_scorer() -> None:
    critic = _HalfCritic()
    reward = CriticReward(critic)
    got = reward(["p"] * 3, [_chat(c) for c in COMPLETIONS], None, **COLUMNS)
    assert got == [pytest.approx(0.5), 0.0, 0.0] and critic.calls == 1  # moves only in the first completion
    assert reward.__name__ == "critic_reward"
    with pytest.raises(ValueError, match="score\\(states, targets\\)"):
        CriticReward(object())  # type: ignore[arg-type]


def test_a_scorer_passed_as_given_itself_is_refused_clearly() -> None:
    # reward_function("critic", critic) (not {"critic": critic}) was an AttributeError: 'Critic' has no 'get'
    from countdown_gym.integrations.trl import reward_function

    with pytest.raises(TypeError, match="scorers must be a mapping of kind -> object.*got _HalfCritic"):
        reward_function("critic", _HalfCritic())


def test_replay_accepts_problem_json_or_dict() -> None:
    assert replay(PJ, RIGHT).verdict.correct
    assert replay({"numbers": [21, 16, 17, 26], "target": 46}, _chat(RIGHT)).verdict.correct
    assert replay(P, RIGHT).transitions[0]["move"] == (21, "+", 16, 37)


def test_a_problem_column_with_a_key_twice_is_refused_not_read_last_wins() -> None:
    twice = '{"numbers": [1, 1, 1, 1], "numbers": [21, 16, 17, 26], "target": 46}'  # used to read the second list
    with pytest.raises(ValueError, match="appears twice"):
        replay(twice, RIGHT)
    with pytest.raises(ValueError, match="'problem' column"):
        replay('{"numbers": [21, 16, 17, 26], "target": NaN}', RIGHT)


def test_verify_scores_the_last_assistant_message() -> None:
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "<answer>21+16-17+26</answer>"},
            {"role": "assistant", "content": "<answer>21+16+17-26</answer>"}, {"role": "user", "content": "again"},
            {"role": "assistant", "content": RIGHT}]
    assert verify(P, conv).correct
    assert verify(P, conv[:3]).reason == "wrong_value"  # the user's text is never judged
    assert verify(P, tuple(conv)).correct
    assert verify(P, conv[:2]).reason == "no_answer"  # no assistant message
    assert verify(P, [{"role": "assistant", "content": None, "tool_calls": []}]).reason == "no_answer"
    v = verify(P, ["<answer>21+16-17+26</answer>"])  # a list that is not chat messages
    assert v.reason == "invalid_input" and "list of chat messages" in v.message
    assert verify(P, [{"content": RIGHT}]).reason == "invalid_input"  # messages need a role
    # message objects with attributes (OpenAI's and verifiers' pydantic messages) read the same way
    from types import SimpleNamespace

    parts = [SimpleNamespace(type="text", text="<answer>21+16-17+26</answer>")]
    assert verify(P, [SimpleNamespace(role="user", content="q"), SimpleNamespace(role="assistant", content=parts)]).correct


def test_importing_the_module_imports_no_torch() -> None:
    code = ("import sys, countdown_gym.integrations.trl\n"
            "bad = [m for m in ('torch', 'trl', 'transformers', 'critics') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- through TRL's GRPOTrainer -----------------------------------------------------------------


def test_one_grpo_step_with_a_conversational_numbers_target_dataset(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from baselines.lm.tiny_lm import TinyLMConfig, build_model, build_tokenizer

    torch.manual_seed(0)
    tok = build_tokenizer()
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    model = build_model(TinyLMConfig(arch="llama", hidden=32, layers=2, heads=2, intermediate=64, max_positions=256), tok)
    problems = [Problem((21, 16, 17, 26), 46), Problem((6, 2, 5, 3), 8)]
    dataset = Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"Numbers: {list(p.numbers)} Target: {p.target}"}],
         "numbers": list(p.numbers), "target": p.target} for p in problems
    ])
    seen: dict[str, object] = {}

    def record(prompts, completions, completion_ids, **kwargs):  # sees exactly what TRL passes the other functions
        seen.update(completions=completions, **kwargs)
        return [0.0] * len(completions)

    critic = _HalfCritic()
    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=16, use_cpu=True, report_to=[], logging_steps=1, save_strategy="no")
    trainer = GRPOTrainer(model=model, processing_class=tok, args=args, train_dataset=dataset,
                          reward_funcs=[sparse_reward, format_reward, oracle_reward, oracle_perfect_reward,
                                        CriticReward(critic), record])
    trainer.train()
    completions = seen["completions"]
    assert isinstance(completions, list) and completions[0][0]["role"] == "assistant"  # conversational
    assert {tuple(n) for n in seen["numbers"]} <= {tuple(p.numbers) for p in problems}
    logged = {k for row in trainer.state.log_history for k in row}
    for name in ("sparse_reward", "format_reward", "oracle_reachable_reward", "oracle_perfect_reward", "critic_reward"):
        assert f"rewards/{name}/mean" in logged, name
