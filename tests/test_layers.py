"""The package's shape: each folder imports only the folders under it, and modules stay small.

Read from the AST of every module, lazy imports inside functions included (and ``importlib.import_module`` /
``__import__`` with a literal name), so an arrow that runs back up cannot hide in a function body:

* inside ``countdown_gym/``, folder by folder, :data:`ALLOWED` (``docs/DESIGN.md``'s map): ``game`` imports nothing
  else of the package, ``data`` only ``game`` and ``dataclass_cli``, ``envs`` only those and ``data``, ``rewards`` only those and
  ``envs``, ``integrations`` never ``runkit``, ``cli`` or ``leaderboard``, ``runkit`` only ``dataclass_cli``;
* ``countdown_gym`` never imports ``critics`` or ``baselines``, and ``critics`` never imports ``baselines``:
  they build on the package (critic-backed parts of the package take the critic or trainer as an argument);
* no module over :data:`MAX_MODULE_LINES` lines in ``countdown_gym/``, ``critics/`` or ``baselines/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "countdown_gym"
UPPER = ("critics", "baselines")
"""Top-level packages that build on ``countdown_gym`` and so must never be imported by it."""
_IMPORT_CALLS = ("import_module", "__import__")

FACE = "countdown_gym"
"""The package's own ``__init__`` (its public names), as an import target."""

ALLOWED: dict[str, frozenset[str]] = {
    "game": frozenset(),
    "dataclass_cli": frozenset(),
    "data": frozenset({"game", "dataclass_cli"}),
    "envs": frozenset({"game", "data", "dataclass_cli"}),
    "rewards": frozenset({"game", "data", "envs", "dataclass_cli"}),
    "wrappers": frozenset({"rewards"}),
    "runkit": frozenset({"dataclass_cli"}),
    "inference": frozenset({"game"}),
    "integrations": frozenset({"game", "data", "envs", "rewards", "inference", "dataclass_cli"}),
    "leaderboard": frozenset({"game", "data", "envs", "rewards", "dataclass_cli", FACE}),
    "cli": frozenset({"game", "data", "envs", "rewards", "wrappers", "inference", "integrations", "runkit", "dataclass_cli",
                      "leaderboard", FACE}),
}
"""Folder (or foundation module) of ``countdown_gym`` -> what in the package it may import. The package's
``__init__.py`` and ``__main__.py`` stand above them all."""
TOP = ("__init__", "__main__")


def imported_modules(source: str, module: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every import in ``source`` (the code of ``module``): ``import x``, ``from x import
    y`` (as ``x.y``: ``y`` may be a module), relative forms resolved, at any depth (inside functions too), and
    ``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if name in _IMPORT_CALLS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, arg.value))
    return sorted(found)


def _is_upper(name: str) -> bool:
    return name.split(".")[0] in UPPER


def upward_imports(source: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """``(line, module)`` of every import of ``critics`` or ``baselines`` in ``source``."""
    return [(line, name) for line, name in imported_modules(source, "countdown_gym.x", filename) if _is_upper(name)]


def part_of(name: str) -> str | None:
    """The folder (or foundation module) of ``countdown_gym`` a dotted name lies in; :data:`FACE` for the package's
    own public names (``countdown_gym.__version__``); ``None`` outside the package."""
    parts = name.split(".")
    if parts[0] != "countdown_gym":
        return None
    if len(parts) == 1 or parts[1] in TOP:
        return FACE
    return parts[1] if (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file() else FACE


def _modules(folder: Path) -> list[tuple[Path, str]]:
    files = sorted(folder.rglob("*.py"))
    return [(p, ".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in files]


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


def test_the_scan_resolves_relative_and_package_imports() -> None:
    source = "from . import splits\nfrom ..game.rules import Rules\ndef f():\n    from countdown_gym import envs, __version__\n"
    names = [name for _, name in imported_modules(source, "countdown_gym.data.difficulty")]
    assert names == ["countdown_gym.data.splits", "countdown_gym.game.rules.Rules", "countdown_gym.__version__",
                     "countdown_gym.envs"]
    assert [part_of(n) for n in names] == ["data", "game", FACE, "envs"]


def test_the_folder_rules_run_one_way() -> None:
    """No folder may import a folder that may import it back (the rules themselves have no circle)."""
    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in ALLOWED.get(start, ()))

    assert [part for part in ALLOWED if reaches(part, part)] == []


def test_every_folder_of_the_package_has_a_rule() -> None:
    parts = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem not in TOP)}
    assert parts - set(ALLOWED) == set(), "give each new folder of countdown_gym its place in ALLOWED (and DESIGN.md)"


def layer_violations(source: str, module: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """``(line, what)`` of every import in ``source`` (the code of ``module`` of ``countdown_gym``) that
    :data:`ALLOWED` refuses to its folder; none for the package's own ``__init__.py`` and ``__main__.py``."""
    part = part_of(module)
    if part == FACE:
        return []
    return [(line, f"{part}/ imports {name} ({target})")
            for line, name in imported_modules(source, module, filename)
            if (target := part_of(name)) is not None and target != part and target not in ALLOWED[part]]


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("countdown_gym.integrations.trl", "def f():\n    from countdown_gym.cli import audit"),
        ("countdown_gym.integrations.openenv.server", "from countdown_gym import __version__"),
        ("countdown_gym.game.rules", "import importlib\nimportlib.import_module('countdown_gym.data.splits')"),
        ("countdown_gym.data.splits", "from ..envs import countdown"),
        ("countdown_gym.runkit.runs", "import countdown_gym.envs"),
    ],
)
def test_the_layer_check_finds_arrows_up(module: str, source: str) -> None:
    assert layer_violations(source, module), source


def test_each_folder_imports_only_the_folders_under_it() -> None:
    modules = _modules(PACKAGE)
    assert len(modules) > 30  # the scan sees the package
    offenders = [f"{path.relative_to(ROOT)}:{line}: {what}"
                 for path, module in modules
                 for line, what in layer_violations(path.read_text(encoding="utf-8"), module, str(path))]
    assert not offenders, "imports against the layering (countdown_gym/<folder> -> what it may import):\n" + "\n".join(offenders)


def test_countdown_gym_imports_neither_critics_nor_baselines() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path, _ in _modules(PACKAGE)
        for line, name in upward_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not offenders, "countdown_gym must not import critics or baselines:\n" + "\n".join(offenders)


def test_critics_never_import_baselines() -> None:
    modules = _modules(ROOT / "critics")
    assert modules
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path, module in modules
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module, str(path))
        if name.split(".")[0] == "baselines"
    ]
    assert not offenders, "critics build on countdown_gym only, never on baselines:\n" + "\n".join(offenders)


MAX_MODULE_LINES = 500


@pytest.mark.parametrize("folder", ["countdown_gym", "critics", "baselines"])
def test_no_module_is_over_500_lines(folder: str) -> None:
    too_big = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path, _ in _modules(ROOT / folder)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not too_big, f"split these modules by job (at most {MAX_MODULE_LINES} lines each):\n" + "\n".join(too_big)
