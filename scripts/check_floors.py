"""Install the lowest versions that pyproject.toml's floors admit, then run checks under them.

    python scripts/check_floors.py --extras llm --out /tmp/floors-llm -- -c constraints/cpu.txt
    python scripts/check_floors.py --out /tmp/floors-core --run "python -m pytest tests/test_env_countdown.py"

The requirements of the core and of each ``--extras`` (their ``countdown-gym[...]`` references followed) are passed to
``uv pip install --resolution lowest-direct`` as direct requirements, with ``pytest`` and ``hypothesis`` for the checks,
in a fresh virtual environment ``<out>/venv``; arguments after ``--`` go to uv (constraints, ``--find-links``). The
installed versions of the direct requirements are written to ``<out>/versions.txt``, then ``pip check`` and each
``--run`` command run from the repository root with the environment's ``python`` first on ``PATH`` (the checkout's
packages are imported: pytest's ``pythonpath``, or ``PYTHONPATH``). Needs uv (``pip install uv``). The measured floors:
``docs/packaging.md``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from countdown_gym.dataclass_cli import run, run_script
from countdown_gym.runkit.runs import write_text_atomic

ROOT = Path(__file__).resolve().parents[1]
CHECK_TOOLS = ("pytest>=8", "hypothesis>=6.100")
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _name(requirement: str) -> str:
    """A requirement's normalised distribution name (PEP 503)."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _extras(requirement: str) -> set[str]:
    match = _REQUIREMENT.match(requirement)
    return {e.strip() for e in (match.group(2) or "").split(",") if e.strip()} if match else set()


def requirements(extras: list[str], pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The core requirements and those of ``extras``, self-references (``countdown-gym[x]``) followed, in order."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    out: list[str] = []
    seen: set[str] = set()

    def add(reqs: list[str]) -> None:
        for text in reqs:
            if _name(text) == project["name"]:
                for extra in sorted(_extras(text) - seen):
                    seen.add(extra)
                    add(optional[extra])
            elif text not in out:
                out.append(text)

    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise ValueError(f"unknown extras {unknown}; pyproject.toml has {sorted(optional)}")
    add(project["dependencies"])
    seen.update(extras)
    for extra in extras:
        add(optional[extra])
    return out


@dataclass
class FloorOptions:
    """Install the lowest versions the floors admit (uv --resolution lowest-direct) and run checks under them."""

    out: str
    """folder for the virtual environment and versions.txt"""
    extras: tuple[str, ...] = ()
    """extras besides the core (e.g. llm)"""
    run: tuple[str, ...] = ()
    """shell commands to run from the repository root inside the environment"""
    uv_args: tuple[str, ...] = field(default_factory=tuple)
    """further arguments for uv pip install (also everything after --)"""


def _floors(args: FloorOptions) -> int:
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    out = Path(args.out).resolve()
    venv = out / "venv"
    reqs = requirements(list(args.extras))
    subprocess.run([uv, "venv", "-q", "--clear", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "-q", "--python", str(python), "--resolution", "lowest-direct",
                    *reqs, *CHECK_TOOLS, *args.uv_args], check=True, cwd=ROOT)
    frozen = subprocess.run([uv, "pip", "freeze", "--python", str(python)], check=True, capture_output=True,
                            text=True).stdout.splitlines()
    names = {_name(r) for r in reqs}
    direct = [line for line in frozen if _name(line) in names]
    write_text_atomic(out / "versions.txt", "\n".join(direct) + "\n")
    print("\n".join(direct))
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv),
           "PYTHONPATH": str(ROOT)}
    failed = 0
    for command in (f"{uv} pip check --python {python}", *args.run):
        print(f"$ {command}", flush=True)
        failed += subprocess.run(command, shell=True, cwd=ROOT, env=env, check=False).returncode != 0
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Parse the options (``--`` passes the rest to uv), install, run the checks; 1 when one fails."""
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv

    def body(args: FloorOptions) -> int:
        args.uv_args = (*args.uv_args, *rest)
        return _floors(args)

    return run(FloorOptions, argv, body, prog="scripts/check_floors.py")


if __name__ == "__main__":
    run_script(main)
