"""Every third-party module the project imports is installed by what pyproject.toml declares: a module that only
happens to be on the machine (scipy was imported by baselines/compare_llm_rewards.py but declared nowhere) fails
here, not on a user's fresh machine. CI also runs the suite in a fresh virtual environment (.ci/run)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("countdown_gym", "baselines", "critics", "benchmarks", "scripts")
NOT_INSTALLED_HERE = {"verl": "its own environment (it pins an older transformers)",
                      "vllm": "the vllm extra, GPU machines only (trl[vllm])"}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def imported_modules() -> dict[str, set[str]]:
    """Top-level module -> the files that import it (at any depth: lazy imports inside functions count)."""
    out: dict[str, set[str]] = {}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
                for name in names:
                    out.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return out


def installed_by_declarations() -> set[str]:
    """The distributions that installing every extra of pyproject.toml brings in (what is installed here of them)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    todo += [Requirement(r) for reqs in project["optional-dependencies"].values() for r in reqs]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = _name(req.name)
        if name == "countdown-gym" or (name, tuple(sorted(req.extras))) in seen:
            continue
        seen.add((name, tuple(sorted(req.extras))))
        seen.add(name)
        try:
            deps = requires(req.name) or []
        except PackageNotFoundError:
            continue
        for text in deps:
            dep = Requirement(text)
            envs = [{"extra": e} for e in req.extras] or [{"extra": ""}]
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append(dep)
    return {s for s in seen if isinstance(s, str)}


def test_every_imported_module_is_declared():
    # a script's folder is on sys.path: the benchmarks' shared module (_common) is local
    local = {*FOLDERS, "tests", "__future__", *(p.stem for p in (ROOT / "benchmarks").glob("*.py"))}
    by_module = packages_distributions()
    declared = installed_by_declarations()
    missing = []
    for module, files in sorted(imported_modules().items()):
        if module in sys.stdlib_module_names or module in local or module in NOT_INSTALLED_HERE:
            continue
        dists = by_module.get(module)
        if not dists or not any(_name(d) in declared for d in dists):
            missing.append(f"{module} ({', '.join(dists or ['not installed'])}), imported by {', '.join(sorted(files)[:3])}")
    assert not missing, "declare these in pyproject.toml (the extra of the code that imports them):\n" + "\n".join(missing)
