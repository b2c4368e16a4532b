"""`baselines` is one package: every module loads once, scripts run by path and with -m, old SB3 saves load."""

from __future__ import annotations

import json
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


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}


def test_every_module_is_loaded_once_under_its_baselines_name() -> None:
    # a fresh interpreter (tests that submit baselines/reference_agents.py by path load it under its bare name on
    # purpose, which an in-process check would see): each module file loaded once, no bare-name module left behind
    code = textwrap.dedent(f"""
        import importlib, json, sys
        from pathlib import Path
        for name in {MODULES!r}:
            try:
                importlib.import_module("baselines." + name)
            except ImportError as e:
                if getattr(e, "name", "") and e.name.split(".")[0] in ("sb3_contrib", "transformers", "trl", "matplotlib"):
                    continue
                raise
        folder = Path("baselines").resolve()
        files = [Path(m.__file__).name for m in list(sys.modules.values())
                 if getattr(m, "__file__", None) and Path(m.__file__).resolve().parent == folder]
        print(json.dumps({{"twice": sorted({{f for f in files if files.count(f) > 1}}),
                          "bare": sorted(n for n in {MODULES!r} if n in sys.modules)}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"twice": [], "bare": []}


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
