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
MODULES = sorted(m.name for m in pkgutil.iter_modules(baselines.__path__))
# modules whose imports need an optional extra
NEEDS = {"sb3_policy": "sb3_contrib", "sb3_ppo": "sb3_contrib", "sb3_vec_env": "sb3_contrib", "compare_rewards": "matplotlib",
         "tiny_lm": "transformers", "llm_eval": "transformers", "llm_sft": "transformers", "llm_callbacks": "transformers",
         "llm_expert_iteration": "transformers", "llm_rewards": "torch", "step_credit": "trl"}


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
    """Save an untrained MaskablePPO with the per-action policy imported as ``module`` (in a fresh interpreter)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    sys_path = [str(ROOT / "baselines"), str(ROOT)] if module == "sb3_policy" else [str(ROOT)]  # the old scripts' sys.path
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys_path!r}
        import gymnasium as gym
        import countdown_gym
        from sb3_contrib import MaskablePPO
        from {module} import MoveFeatures, PerActionPolicy
        env = MoveFeatures(gym.make("Countdown-v0"), lookahead=1)
        MaskablePPO(PerActionPolicy, env, n_steps=8, batch_size=8, policy_kwargs={{"hidden": 8}}, device="cpu").save({str(tmp_path / "m.zip")!r})
        print(PerActionPolicy.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == module
    return tmp_path / "m.zip"


def test_sb3_models_name_the_stable_module_and_old_saves_load(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from baselines.sb3.policy import PerActionPolicy, load_model

    new = _save_policy(tmp_path / "new", "baselines.sb3.policy")
    assert type(load_model(new, device="cpu").policy) is PerActionPolicy
    # a model saved when the module was imported as a bare `sb3_policy` (before `baselines` was a package)
    old = _save_policy(tmp_path / "old", "sb3_policy")
    check = textwrap.dedent(f"""
        import warnings
        from sb3_contrib import MaskablePPO
        warnings.simplefilter("ignore")
        try:
            MaskablePPO.load({str(old)!r}, device="cpu")
        except Exception as e:
            print("fails", type(e).__name__)
    """)
    out = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.stdout.startswith("fails"), (out.stdout, out.stderr)  # without the alias: the bare name is not importable
    model = load_model(old, device="cpu")
    assert type(model.policy) is PerActionPolicy and sys.modules["sb3_policy"] is sys.modules["baselines.sb3.policy"]
