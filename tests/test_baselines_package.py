"""`baselines` is one package: every module loads once, scripts run by path and with -m, old SB3 saves load."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import baselines

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(m.name for m in pkgutil.iter_modules(baselines.__path__) if not m.ispkg)  # the scripts
# modules whose imports need an optional extra
NEEDS = {"sb3_ppo": "sb3_contrib", "compare_rewards": "matplotlib",
         "tiny_lm": "transformers", "llm_eval": "transformers", "llm_sft": "transformers", "llm_callbacks": "transformers",
         "llm_expert_iteration": "transformers", "llm_grow": "transformers", "llm_rewards": "torch", "step_credit": "trl"}


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}


def test_every_module_is_loaded_once() -> None:
    for name in MODULES:
        if name in NEEDS:
            pytest.importorskip(NEEDS[name])
        importlib.import_module(f"baselines.{name}")
    by_file: dict[str, set[int]] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().parent == ROOT / "baselines":
            by_file.setdefault(Path(path).name, set()).add(id(module))
    assert {f"{m}.py" for m in MODULES} <= set(by_file)
    twice = {name: len(ids) for name, ids in by_file.items() if len(ids) > 1}
    assert not twice, f"loaded more than once (a bare `import x` beside `baselines.x`?): {twice}"
    bare = [name for name in MODULES if name in sys.modules and sys.modules[name] is not sys.modules[f"baselines.{name}"]]
    assert not bare


def test_modules_import_each_other_as_baselines_x() -> None:
    # a fresh interpreter: importing every module leaves no bare-name module behind
    code = textwrap.dedent(f"""
        import importlib, sys
        for name in {MODULES!r}:
            try:
                importlib.import_module("baselines." + name)
            except ImportError as e:
                if getattr(e, "name", "") and e.name.split(".")[0] in ("sb3_contrib", "transformers", "trl", "matplotlib"):
                    continue
                raise
        print(sorted(n for n in {MODULES!r} if n in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("how", ["path", "module"])
def test_scripts_run_by_path_and_as_module(how: str, tmp_path: Path) -> None:
    """``python baselines/x.py`` (the docs' command) and ``python -m baselines.x``, from the repository root and elsewhere."""
    command = [str(ROOT / "baselines" / "reference_agents.py")] if how == "path" else ["-m", "baselines.reference_agents"]
    cwd = tmp_path if how == "path" else ROOT  # by path it works from any directory
    out = subprocess.run([sys.executable, *command, "--help"], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "--agent" in out.stdout


def _save_policy(tmp_path: Path, module: str) -> Path:
    """Save an untrained MaskablePPO whose per-action policy class lives in a module named ``module`` (in a fresh
    interpreter): ``baselines.sb3.policy``, or a name the policy had before (the same source loaded under it)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    code = textwrap.dedent(f"""
        import importlib, importlib.util, sys
        if {module!r} == "baselines.sb3.policy":
            policy = importlib.import_module({module!r})
        else:
            spec = importlib.util.spec_from_file_location({module!r}, {str(ROOT / "baselines" / "sb3" / "policy.py")!r})
            policy = sys.modules[{module!r}] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(policy)
        import gymnasium as gym
        import countdown_gym
        from sb3_contrib import MaskablePPO
        env = policy.MoveFeatures(gym.make("Countdown-v0"), lookahead=1)
        MaskablePPO(policy.PerActionPolicy, env, n_steps=8, batch_size=8, policy_kwargs={{"hidden": 8}},
                    device="cpu").save({str(tmp_path / "m.zip")!r})
        print(policy.PerActionPolicy.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == module
    return tmp_path / "m.zip"


@pytest.mark.parametrize("module", ["baselines.sb3.policy", "sb3_policy", "baselines.sb3_policy"])
def test_sb3_models_load_under_the_policys_module_of_now_and_before(module: str, tmp_path: Path) -> None:
    """``sb3_policy``: saved before ``baselines`` was a package; ``baselines.sb3_policy``: before ``baselines/sb3/``."""
    pytest.importorskip("sb3_contrib")
    from baselines.sb3.policy import PerActionPolicy, load_model, saved_policy_module

    saved = _save_policy(tmp_path, module)
    assert saved_policy_module(saved) == module
    if module != "baselines.sb3.policy":  # plain SB3 cannot resolve the old module
        check = textwrap.dedent(f"""
            import warnings
            from sb3_contrib import MaskablePPO
            warnings.simplefilter("ignore")
            try:
                MaskablePPO.load({str(saved)!r}, device="cpu")
            except Exception as e:
                print("fails", type(e).__name__)
        """)
        out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=_env(), capture_output=True, text=True,
                             timeout=300)
        assert out.stdout.startswith("fails"), (out.stdout, out.stderr)
    model = load_model(saved, device="cpu")
    assert type(model.policy) is PerActionPolicy and model.policy.hidden == 8
    assert module == "baselines.sb3.policy" or module not in sys.modules  # through custom_objects, no module made
    model.save(tmp_path / "again.zip")  # saved again, it names today's module
    assert saved_policy_module(tmp_path / "again.zip") == "baselines.sb3.policy"
