"""The package's shape: layers point one way (nothing in ``countdown_gym/`` imports ``critics`` or ``baselines``), small modules.

``critics``, ``baselines`` and the leaderboard files build on ``countdown_gym``; an import the other
way (even a lazy one inside a function) would make the core package depend on them. Critic-backed
parts of the package take the critic or trainer as an argument instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "countdown_gym"
UPPER = ("critics", "baselines")
"""Top-level packages that build on ``countdown_gym`` and so must never be imported by it."""
_IMPORT_CALLS = ("import_module", "__import__")


def _is_upper(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in UPPER


def upward_imports(source: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """``(line, module)`` of every import of an upper package in ``source``: ``import x``,
    ``from x import y`` (at any depth, inside functions too) and ``importlib.import_module("x")`` /
    ``__import__("x")`` with a literal name."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_upper(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_upper(node.module):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if name in _IMPORT_CALLS and isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _is_upper(arg.value):
                found.append((node.lineno, arg.value))
    return sorted(found)


@pytest.mark.parametrize(
    "source",
    [
        "import critics",
        "import numpy, baselines.lm.tiny_lm as t",
        "from critics.clipo import CLIPOTrainer",
        "def f():\n    if True:\n        from baselines import sb3_policy",
        "import importlib\nimportlib.import_module('critics.models')",
        "__import__('baselines')",
    ],
)
def test_the_scan_finds_every_import_form(source: str) -> None:
    assert upward_imports(source), source


def test_the_scan_ignores_look_alikes() -> None:
    source = '"""from critics import load_critic (a docstring)"""\nimport criticsx\nfrom .critics import x\n'
    assert upward_imports(source) == []


def test_countdown_gym_imports_neither_critics_nor_baselines() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 30  # the scan sees the package
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports {module}"
        for path in files
        for line, module in upward_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not offenders, "countdown_gym must not import critics or baselines:\n" + "\n".join(offenders)


MAX_MODULE_LINES = 650


def test_no_package_module_is_over_650_lines() -> None:
    too_big = [
        f"{path.relative_to(PACKAGE.parent)}: {n} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_big, f"split these modules by job (at most {MAX_MODULE_LINES} lines each):\n" + "\n".join(too_big)
