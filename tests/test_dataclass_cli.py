"""countdown_gym.dataclass_cli (over tyro): one flag per dataclass field, nested classes, the syntaxes, help, errors, resume checks."""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import tyro

from countdown_gym.dataclass_cli import (
    changed_options,
    check_choice,
    flags,
    help_text,
    parse,
    parse_bool,
    run_script,
    to_argv,
    written_aside,
)

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Demo:
    """Demo options for the tests."""

    name: str = "run"
    """The run name; 100% free text."""
    steps: int = 3  # optimizer steps
    lr: float = 1e-3
    resume: bool = False
    progress: bool = True
    bf16: bool | None = None
    """bf16 on or off; auto = decide from the hardware."""
    sizes: tuple[int, ...] = (1, 2)
    arch: list[int] = field(default_factory=lambda: [64, 64])
    dead_ends: tuple[int, ...] = (0,)
    extra: dict[str, Any] = field(default_factory=dict)
    mode: Literal["fast", "slow"] = "fast"
    rules: str | None = None
    out: str = ""

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {self.steps}")


def test_defaults_and_scalars() -> None:
    assert parse(Demo, []) == Demo()
    d = parse(Demo, ["--name", "x", "--steps", "7", "--lr", "2e-5", "--out=o.jsonl"])
    assert (d.name, d.steps, d.lr, d.out) == ("x", 7, 2e-5, "o.jsonl")


def test_a_value_that_holds_another_commands_flags() -> None:
    """As with argparse: ``--name "--beta 0.01"`` (flags passed on to another command) is a value, not a flag."""
    assert parse(Demo, ["--name", "--beta 0.01", "--steps", "2"]) == Demo(name="--beta 0.01", steps=2)
    assert parse(Demo, ["--name=--beta"]).name == "--beta"


def test_underscore_spelling_is_accepted() -> None:
    assert parse(Demo, ["--dead_ends", "1,2", "--steps=4", "--no_progress"]) == Demo(dead_ends=(1, 2), steps=4, progress=False)


@pytest.mark.parametrize(
    ("argv", "value"),
    [(["--resume"], True), (["--no-resume"], False), (["--resume", "true"], True), (["--resume", "false"], False),
     (["--resume", "yes"], True), (["--resume", "no"], False), (["--resume", "1"], True), (["--resume", "0"], False),
     (["--resume", "TRUE"], True), (["--resume=off"], False), (["--resume", "--steps", "2"], True), ([], False)],
)
def test_bool_syntaxes(argv: list[str], value: bool) -> None:
    assert parse(Demo, argv).resume is value


def test_bool_default_true_can_be_switched_off() -> None:
    assert parse(Demo, ["--no-progress"]).progress is False
    assert parse(Demo, ["--progress", "false"]).progress is False


def test_a_bool_flag_before_a_positional_argument_leaves_it_alone() -> None:
    """``countdown-gym audit --check fn`` was a usage error (``--check: expected true/false, got 'fn'``): the bool
    flag took the positional argument as its value. Only a true/false word is its value when positionals follow."""

    @dataclass
    class Files:
        files: Annotated[tuple[str, ...], tyro.conf.Positional] = ()
        check: bool = False
        bf16: bool | None = None

    assert parse(Files, ["--check", "a.jsonl", "b"]) == Files(("a.jsonl", "b"), True)
    assert parse(Files, ["--check", "no", "--bf16", "auto", "a"]) == Files(("a",), False, None)
    assert parse(Files, ["--bf16", "a", "--check"]) == Files(("a",), True, True)


@pytest.mark.parametrize(
    ("argv", "value"),
    [([], None), (["--bf16", "auto"], None), (["--bf16", "true"], True), (["--bf16", "false"], False),
     (["--bf16"], True), (["--no-bf16"], False), (["--bf16=None"], None)],
)
def test_optional_bool(argv: list[str], value: bool | None) -> None:
    assert parse(Demo, argv).bf16 is value


def test_parse_bool() -> None:
    assert parse_bool("On") is True and parse_bool("off") is False
    assert parse_bool("auto", allow_auto=True) is None
    with pytest.raises(ValueError, match="true/false"):
        parse_bool("auto")


@pytest.mark.parametrize(
    ("argv", "sizes"),
    [(["--sizes", "3,4"], (3, 4)), (["--sizes", "3", "4"], (3, 4)), (["--sizes", "3,4", "5"], (3, 4, 5)),
     (["--sizes", "7"], (7,)), (["--sizes="], ()), (["--sizes", "-1", "2"], (-1, 2)),
     (["--sizes=-1,2"], (-1, 2))],
)
def test_sequences(argv: list[str], sizes: tuple[int, ...]) -> None:
    assert parse(Demo, argv).sizes == sizes


def test_list_keeps_its_container() -> None:
    d = parse(Demo, ["--arch", "256", "256", "--dead-ends", "0,1"])
    assert d.arch == [256, 256] and isinstance(d.arch, list)
    assert d.dead_ends == (0, 1)


def test_dict_json_literal_and_optional() -> None:
    d = parse(Demo, ["--extra", '{"top_p": 0.95, "n": [1, 2]}', "--mode", "slow", "--rules", "tinyzero"])
    assert d.extra == {"top_p": 0.95, "n": [1, 2]} and d.mode == "slow" and d.rules == "tinyzero"
    assert parse(Demo, ["--rules", "None"]).rules is None


@dataclass
class Shape:
    """Shape of the model."""

    width: int = 64
    """Units per layer."""
    depth: int = 2

    def __post_init__(self) -> None:
        if self.width % 2:
            raise ValueError(f"--width must be even, got {self.width}")


@dataclass
class Run:
    """A run with a nested model shape."""

    model: Shape = field(default_factory=lambda: Shape(width=32))
    """The model."""
    lr: float = 0.1
    resume: bool = False


def test_nested_dataclass_fields_are_flags_without_prefix() -> None:
    assert parse(Run, []) == Run(model=Shape(width=32))
    assert parse(Run, ["--width", "8", "--depth=3", "--lr", "1"]) == Run(Shape(8, 3), 1.0)
    assert [f.name for f in flags(Run)] == ["--width", "--depth", "--lr", "--resume"]
    text = " ".join(help_text(Run, prog="run").split())
    assert "The model." in text and "--width INT Units per layer. (default: 32)" in text  # the group: the field's docstring


def test_two_fields_with_one_flag_are_refused() -> None:
    @dataclass
    class Clash:
        model: Shape = field(default_factory=Shape)
        depth: int = 1

    with pytest.raises(TypeError, match="--depth"):
        parse(Clash, [])
    with pytest.raises(TypeError, match="not a dataclass"):
        parse(int, [])


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--steps", "1.5"], "--steps"),
     (["--lr", "fast"], "--lr"),
     (["--lr", "nan"], "not a finite number: 'nan'"),
     (["--lr", "inf"], "not a finite number: 'inf'"),
     (["--resume", "maybe"], "--resume: expected true/false, got 'maybe'"),
     (["--bf16", "sometimes"], "expected true/false/auto, got 'sometimes'"),
     (["--no-resume=true"], "--no-resume takes no value"),
     (["--sizes", "1,x"], "--sizes"),
     (["--extra", "{top_p: 1}"], "not valid JSON"),
     (["--extra", "[1, 2]"], "expected a JSON object"),
     (["--extra", "[" * 5000 + "]" * 5000], "nested too deeply"),
     (["--extra", '{"a": NaN}'], "NaN is not JSON"),
     (["--extra", '{"a": 1, "a": 2}'], "key 'a' appears twice"),
     (["--mode", "medium"], "medium"),
     (["--stepz", "3"], "--stepz"),
     (["--steps", "0"], "--steps must be >= 1, got 0"),  # the dataclass's own check
     (["--width", "3"], "--width must be even, got 3")],  # a nested dataclass's check
)
def test_errors_are_clean_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    cls = Run if argv[0] == "--width" else Demo
    with pytest.raises(SystemExit) as exc:
        parse(cls, argv, prog="demo")
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in " ".join(captured.err.replace("│", " ").split()), captured.err
    assert "Traceback" not in captured.err
    assert "usage: demo [-h] [OPTIONS]" in captured.err and "demo: error: " in captured.err  # the CLI's usage-error form
    assert message in str(exc.value)  # the exception names the problem too


def test_help_text_defaults_and_description() -> None:
    text = " ".join(help_text(Demo, prog="demo").split())
    assert "Demo options for the tests." in text
    assert "--name STR The run name; 100% free text. (default: run)" in text
    assert "--steps INT optimizer steps (default: 3)" in text  # trailing comment when there is no docstring
    assert "--lr FLOAT (default: 0.001)" in text
    assert "--resume, --no-resume (default: False)" in text
    assert "--bf16 {true,false,auto} bf16 on or off; auto = decide from the hardware. (default: auto)" in text
    assert "(default: 1 2)" in text and "(default: 64 64)" in text
    assert "--extra JSON (default: '{}')" in text and "--mode {fast,slow} (default: fast)" in text
    assert "Something else." in help_text(Demo, description="Something else.")


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(Demo, ["--help"], prog="demo")
    assert exc.value.code in (0, None) and "--dead-ends" in capsys.readouterr().out


def test_help_into_a_pipe_closed_early_exits_quietly() -> None:
    """``script --help | head -1``: no BrokenPipeError traceback, exit code 141 (128 + SIGPIPE), as for any output."""
    import subprocess
    import sys

    code = ("import dataclasses; from countdown_gym.dataclass_cli import parse\n"
            "@dataclasses.dataclass\nclass O:\n" + "".join(f"    option_{i}: int = {i}\n" for i in range(2000))
            + "parse(O, ['--help'], prog='demo')")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**__import__("os").environ, "COLUMNS": "80"})
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"usage: demo")
    proc.stdout.close()  # as head does after its line
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141 and b"Traceback" not in err, err.decode()


@pytest.mark.parametrize(
    "demo",
    [
        Demo(),
        Demo(name="a b", steps=7, lr=2e-4, resume=True, progress=False, bf16=False, sizes=(3,), arch=[8, 16, 32],
             dead_ends=(2, 0), extra={"top_p": 0.95, "k": [1, 2]}, mode="slow", rules="classic", out="runs/x y"),
        Demo(bf16=True, name="100% free", sizes=(), rules=None),
        Demo(name="-x", out="--o", rules="-r", lr=-0.5),  # a value that starts like a flag: was "--name -x", unreadable
    ],
)
def test_to_argv_round_trips(demo: Demo) -> None:
    argv = to_argv(demo)
    assert parse(Demo, argv) == demo
    assert parse(Demo, shlex.split(shlex.join(argv))) == demo  # and through a shell command line


def test_to_argv_writes_only_changed_fields() -> None:
    assert to_argv(Demo()) == []
    assert to_argv(Demo(steps=5, progress=False)) == ["--steps", "5", "--no-progress"]
    assert to_argv(Demo(steps=5, out="o"), skip=("out",)) == ["--steps", "5"]
    assert to_argv(Run(Shape(width=32, depth=4))) == ["--depth", "4"]  # a nested field's default: the enclosing default's
    assert parse(Run, to_argv(Run(Shape(8, 1), resume=True))) == Run(Shape(8, 1), resume=True)
    with pytest.raises(TypeError, match="dataclass instance"):
        to_argv(Demo)


# ---- the ported scripts: documented commands parse as before -----------------------------------------------


def test_llm_grpo_documented_commands() -> None:
    pytest.importorskip("trl")
    from baselines.llm_grpo import parse_options

    o = parse_options(shlex.split("--model Qwen/Qwen2.5-1.5B-Instruct --prompt-style tinyzero --use-vllm --vllm-mode colocate "
                                  "--vllm-gpu-memory-utilization 0.3"))
    assert (o.model, o.prompt_style, o.use_vllm, o.vllm_mode, o.vllm_gpu_memory_utilization) == (
        "Qwen/Qwen2.5-1.5B-Instruct", "tinyzero", True, "colocate", 0.3)
    o = parse_options(["--output-dir", "runs/x", "--threads", "1", "--resume", "--quiet", "--beta", "0.01"])  # compare_llm_rewards
    assert (o.resume, o.quiet, o.beta, o.bf16) == (True, True, 0.01, None)
    assert parse_options(["--resume", "true", "--bf16", "false"]).bf16 is False


def test_llm_grpo_options_that_grpo_config_takes_as_they_are(tmp_path: Path) -> None:
    """Every field marked ``grpo(...)`` names a GRPOConfig field, and the run's GRPOConfig gets its value unchanged."""
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from baselines.lm.grpo_config import grpo_config_kwargs
    from baselines.lm.grpo_options import GRPORun, Options

    opts = Options(steps=7, learning_rate=1e-5, beta=0.02, temperature=0.9, loss_type="grpo", scale_rewards="batch", seed=3,
                   num_generations=4, max_completion_length=64, quiet=True, interaction="single-pass")
    fields = opts.grpo_fields()
    assert set(fields) <= {f.name for f in dataclasses.fields(GRPOConfig)}
    assert {"max_steps", "learning_rate", "beta", "temperature", "loss_type", "disable_tqdm"} <= set(fields)
    kwargs = grpo_config_kwargs(GRPORun.of(dataclasses.replace(opts, output_dir=str(tmp_path))))
    assert {name: kwargs[name] for name in fields} == fields


def test_llm_sft_and_llm_eval_documented_commands() -> None:
    pytest.importorskip("transformers")
    from baselines import llm_eval, llm_sft
    from baselines.lm.tiny_lm import TinyLMConfig

    cfg = parse(llm_sft.SFTConfig, shlex.split(
        "--out /tmp/runs/B --threads 1 --batch-size 16 --lr 2e-3 --warmup-steps 30 --schedule time --max-minutes 58 "
        "--max-steps 100000 --eval-every 150 --eval-problems 100 --max-new-tokens 200 --checkpoint-every 50 "
        "--fresh-problems 20000 --dead-ends 0 --resume true"))
    assert (cfg.out, cfg.lr, cfg.max_minutes, cfg.dead_ends, cfg.resume) == ("/tmp/runs/B", 2e-3, 58.0, (0,), True)
    ev = parse(llm_eval.EvalConfig, shlex.split(
        "--model runs/sft/final --split validation --k 0 --max_new_tokens 160"))
    assert (ev.model, ev.split, ev.k, ev.max_new_tokens) == ("runs/sft/final", "validation", 0, 160)
    sft = llm_sft.SFTConfig(model=TinyLMConfig(hidden=64, heads=2))  # the model flags: a nested TinyLMConfig
    assert parse(llm_sft.SFTConfig, ["--hidden", "64", "--heads", "2"]) == sft
    assert to_argv(sft) == ["--hidden", "64", "--heads", "2"]


def test_critics_train_documented_command(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from critics.train import parse_args

    cfg = parse_args(shlex.split('--cache-dir "" --time-limit 14.5 --out runs/critic-v2-ship --no-calibrate'))
    assert (cfg.cache_dir, cfg.time_limit, cfg.out, cfg.calibrate) == ("", 14.5, "runs/critic-v2-ship", False)
    with pytest.raises(SystemExit) as exc:
        parse_args(["--hindsight", "2"])
    assert exc.value.code == 2 and "--hindsight must be in [0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["v2", "v3"])
def test_shipped_critics_are_reproduced_by_their_commands(name: str) -> None:
    """The command stored with a shipped critic parses to the options and the architecture it was trained with."""
    pytest.importorskip("torch")
    import json

    from critics.models import ModelConfig
    from critics.train import parse_args

    meta = json.loads((ROOT / "critics" / "checkpoints" / name / "config.json").read_text())
    cfg = parse_args(shlex.split(meta["command"])[3:])  # after "python -m critics.train"
    assert cfg.model_config() == ModelConfig(**meta["model"])  # fields added since: their defaults
    assert changed_options(meta["train_config"], cfg) == []  # stored flat, before the model fields were nested


def test_replaces_the_sb3_parser() -> None:
    pytest.importorskip("sb3_contrib")
    from baselines import sb3_ppo

    argv = ["--reward", "oracle-perfect", "--total-timesteps", "200000", "--seed", "1", "--no-progress", "--resume"]
    mlp = ["--policy", "mlp", "--vec-env", "dummy", "--net-arch", "128", "128"]  # --net-arch is the MlpPolicy's
    args = parse(sb3_ppo.Args, [*argv, *mlp])
    assert args == sb3_ppo.parse_args([*argv, *mlp])
    assert parse(sb3_ppo.Args, ["--net-arch", "128,128", *mlp[:4]]).net_arch == [128, 128]


def test_check_min_names_the_flag() -> None:
    from countdown_gym.dataclass_cli import check_min

    @dataclass
    class Opts:
        eval_every: int = 0
        lr: float = float("nan")

    check_min(Opts(eval_every=3, lr=0.0), 0, "eval_every", "lr")
    with pytest.raises(ValueError, match=r"^--eval-every must be >= 1, got 0$"):
        check_min(Opts(), 1, "eval_every")
    with pytest.raises(ValueError, match=r"^--lr must be >= 0, got nan$"):
        check_min(Opts(), 0, "lr")


def test_changed_options_names_what_a_resume_would_change() -> None:
    @dataclasses.dataclass
    class Run:
        lr: float = 1e-3
        sizes: tuple[int, ...] = (1, 2)
        steps: int = 10
        added_later: str = "x"

    saved = {"lr": 1e-3, "sizes": [1, 2], "steps": 10}  # as JSON stores it; no added_later field yet
    assert changed_options(saved, Run(steps=99), allowed=("steps",)) == []
    assert changed_options(saved, Run(lr=0.01, sizes=(3,), added_later="y")) == [
        "--lr 0.001 (now 0.01)", "--sizes 1,2 (now 3)", "--added-later x (now y)"]
    # a hand-edited options.json ("0.001", "1,2") was reported as "--lr 0.001 (now 0.001)": no difference shown
    assert changed_options({"lr": "0.001", "sizes": "1,2", "steps": 10}, Run()) == [
        '--lr "0.001" (now 0.001)', '--sizes "1,2" (now [1, 2])']


def test_changed_options_reads_nested_and_flat_saved_options() -> None:
    assert changed_options({"width": 32, "depth": 2, "lr": 0.1}, Run()) == []  # stored before the fields were nested
    assert changed_options({"model": {"width": 32, "depth": 2}, "lr": 0.1}, Run(Shape(32, 5))) == ["--depth 2 (now 5)"]
    assert changed_options({"lr": 0.1}, Run(Shape(16))) == ["--width 32 (now 16)"]  # a missing field: its default
    assert changed_options({"lr": 0.1}, Run(Shape(16)), allowed=("width",)) == []


def test_check_unused_names_the_flags_a_mode_ignores() -> None:
    from countdown_gym.dataclass_cli import check_unused

    check_unused(Run(Shape(16)), "--x", skip=("width",))
    check_unused(Run(lr=0.5), "--x", only=("width",))
    with pytest.raises(ValueError, match=r"^--depth, --lr have no effect with --x: drop them$"):
        check_unused(Run(Shape(32, 3), lr=0.5), "--x")


@pytest.mark.parametrize(("script", "argv", "message"), [
    ("compare_rewards", ["--replot", "--seeds", "5"], "--seeds has no effect with --replot"),
    ("compare_rewards", ["--replot", "--n-epochs", "3"], "--n-epochs has no effect with --replot"),  # an sb3_ppo flag
    ("compare_llm_rewards", ["--replot", "--steps", "7", "--runs-dir", "x"], "--steps, --runs-dir have no effect with --replot"),
    ("sb3_ppo", ["--evaluate-model", "m.zip", "--resume"], "--resume has no effect with --evaluate-model"),
    ("llm_eval", ["--k", "0", "--temperature", "0.5"], "--temperature has no effect with --k 0"),
])
def test_flags_a_mode_ignores_are_usage_errors(script: str, argv: list[str], message: str, capsys) -> None:
    """--replot with training flags, --evaluate-model with --resume, --k 0 with --temperature: each ran, the flag ignored."""
    pytest.importorskip("sb3_contrib")
    pytest.importorskip("transformers")
    import importlib

    module = importlib.import_module(f"baselines.{script}")
    with pytest.raises(SystemExit) as exc:
        {"llm_eval": lambda: parse(module.EvalConfig, argv), "sb3_ppo": lambda: module.parse_args(argv)}.get(
            script, lambda: module.main(argv))()
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_check_choice_names_the_flag() -> None:
    @dataclasses.dataclass
    class Run:
        loss_type: str = "grpo"

    check_choice(Run(), "loss_type", ("grpo", "dapo"))
    with pytest.raises(ValueError, match=r"--loss-type must be one of \['grpo', 'dapo'\], got 'x'"):
        check_choice(Run("x"), "loss_type", ("grpo", "dapo"))


@pytest.mark.parametrize(("result", "code"), [(None, 0), (3, 3), (True, 0), ({"interrupted": True}, 130), ({"x": 1}, 0)])
def test_run_script_exits_with_the_scripts_code(result, code) -> None:
    with pytest.raises(SystemExit) as exc:
        run_script(lambda: result)
    assert exc.value.code == code


def test_run_script_turns_a_ctrl_c_into_one_line_and_130(capsys: pytest.CaptureFixture[str]) -> None:
    def pressed() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exc:
        run_script(pressed)
    assert exc.value.code == 130 and capsys.readouterr().err.strip().endswith(": interrupted")


def test_run_script_stopped_by_a_closed_pipe_exits_141_not_0() -> None:
    """``python train.py | head``: the run stops when head leaves; it was exit code 0, a success it was not."""
    import subprocess
    import sys

    code = ("from countdown_gym.dataclass_cli import run_script\n"
            "def main():\n    for i in range(10**6):\n        print('step', i, flush=True)\n    return 0\n"
            "run_script(main)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"step 0\n"
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141 and not err, err.decode()


def test_run_script_turns_an_os_error_into_one_line_and_1(capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    def full() -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/x/model.zip")

    with pytest.raises(SystemExit) as exc:
        run_script(full)
    assert exc.value.code == 1
    assert capsys.readouterr().err.strip().endswith("error: No space left on device: /x/model.zip")


def test_written_aside_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    import errno
    import os

    path = tmp_path / "out.jsonl"
    path.write_text("old\n")
    with pytest.raises(OSError, match="No space"), written_aside(path) as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert path.read_text() == "old\n" and list(tmp_path.iterdir()) == [path]
    os.mkfifo(tmp_path / "out.jsonl.tmp")  # a stale temporary name: removed, never opened
    with written_aside(path) as tmp:
        tmp.write_text("new\n")
    assert path.read_text() == "new\n" and list(tmp_path.iterdir()) == [path]
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "x").write_text("1")
    with written_aside(folder) as tmp:
        tmp.mkdir()
        (tmp / "y").write_text("2")
    assert [p.name for p in folder.iterdir()] == ["y"] and not (tmp_path / "d.old").exists()
    (tmp_path / "out.jsonl.old").write_text("mine\n")  # a file's own .old name is the user's: left alone
    with written_aside(path) as tmp:
        tmp.write_text("newer\n")
    assert (tmp_path / "out.jsonl.old").read_text() == "mine\n"


def test_a_device_or_socket_is_never_replaced_by_a_file(tmp_path: Path) -> None:
    """--results-json /dev/null (or reward_analysis --page /dev/null), run as root, replaced the device by a file."""
    import socket

    from countdown_gym.dataclass_cli import write_together

    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:  # a special file as a device is, made without root
        s.bind(str(path))
        for write in (lambda: written_aside(path).__enter__(), lambda: write_together({tmp_path / "a": "x", path: "y"})):
            with pytest.raises(OSError, match="a device or a socket, not a file"):
                write()
        assert path.is_socket() and sorted(p.name for p in tmp_path.iterdir()) == ["sock"]


def test_written_aside_puts_the_old_folder_back_when_the_new_one_cannot_take_its_place(tmp_path, monkeypatch) -> None:
    import os

    folder = tmp_path / "best"
    folder.mkdir()
    (folder / "x").write_text("1")
    replace = os.replace

    def failing(src, dst):
        if str(src).endswith(".tmp"):
            raise KeyboardInterrupt  # a Ctrl-C between the two renames
        replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(KeyboardInterrupt), written_aside(folder) as tmp:
        tmp.mkdir()
        (tmp / "y").write_text("2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"] and (folder / "x").read_text() == "1"

    def interrupted_after(when):  # the Ctrl-C lands as a rename returns: after the first, the folder was gone (only
        def rename(src, dst):     # best.old left); after the second, an OSError hid it
            replace(src, dst)
            if str(src).endswith(when):
                raise KeyboardInterrupt
        return rename

    for when, kept in (("best", "x"), (".tmp", "y")):
        monkeypatch.setattr(os, "replace", interrupted_after(when))
        with pytest.raises(KeyboardInterrupt), written_aside(folder) as tmp:
            tmp.mkdir()
            (tmp / "y").write_text("2")
        assert [p.name for p in folder.iterdir()] == [kept]  # the old folder or the new one


def test_run_script_turns_safetensors_io_errors_into_one_line_but_not_other_errors(capsys) -> None:
    """safetensors raises its own type for a full disk (an SFT save on a full tmpfs was a 20-line traceback)."""
    safetensors = pytest.importorskip("safetensors")

    def full() -> None:
        raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    with pytest.raises(SystemExit) as exc:
        run_script(full)
    assert exc.value.code == 1 and "error: writing weights: Error while serializing: I/O error" in capsys.readouterr().err

    def bug() -> None:
        raise safetensors.SafetensorError("invalid header")  # not an I/O error: a defect keeps its traceback

    with pytest.raises(safetensors.SafetensorError):
        run_script(bug)


@pytest.mark.parametrize(("text", "match"), [
    ('{"a": 1, "a": 2}', "key 'a' appears twice"),
    (b'[{"x": {"b": 1, "c": ":", "b": 3}}]', "key 'b' appears twice"),  # deeper, with a colon in a string
    ('{"a": NaN}', "NaN is not JSON"),
    ('{"lookahead": 1e999}', "1e999 is too large"),  # was read as inf: a flag's "floats must be finite" bypassed
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_the_one_strict_json_reader_refuses_what_rfc_8259_does_not_allow(text, match) -> None:
    """Rows, flags, requests and submission lines all read JSON here: a key twice was last-wins in two of the three
    copies this replaced, and nesting a RecursionError each caller had to catch."""
    from countdown_gym.dataclass_cli.strict import duplicate_key, strict_json

    with pytest.raises(ValueError, match=match):
        strict_json(text)
    assert (duplicate_key(text) is not None) == ("twice" in match)


def test_strict_json_reads_plain_json_and_says_not_json_as_the_json_module_does() -> None:
    from countdown_gym.dataclass_cli import strict_json

    assert strict_json('{"a": {"b": ":"}, "c": [1, 2.5]}') == {"a": {"b": ":"}, "c": [1, 2.5]}
    with pytest.raises(json.JSONDecodeError):  # load_problems reads a CSV cell that is not JSON as text
        strict_json("abc")


def test_written_aside_recovers_a_folder_swap_a_kill_cut_short(tmp_path: Path) -> None:
    """A SIGKILL between the swap's two renames left only <folder>.old (the folder gone, the .old kept for good);
    one after them left <folder>.old beside the new folder, never removed."""
    folder, old = tmp_path / "tokenizer", tmp_path / "tokenizer.old"
    old.mkdir()
    (old / "x").write_text("1")
    with pytest.raises(OSError), written_aside(folder) as tmp:
        raise OSError("disk full")
    assert (folder / "x").read_text() == "1" and not old.exists()  # the old folder is back, whole
    old.mkdir()
    with written_aside(folder) as tmp:
        tmp.mkdir()
        (tmp / "y").write_text("2")
    assert [p.name for p in folder.iterdir()] == ["y"] and not old.exists()
