"""Export the frozen splits to verl's parquet prompt format: a thin wrapper of
:mod:`countdown_gym.integrations.verl_export` (the code ships in the package; ``countdown-gym export --format verl``
runs the same).

    python scripts/export_verl.py --preset longproc-0.5k --prompt-style tinyzero --out data/verl
    python scripts/export_verl.py --interaction tool --out data/verl_tools

See the module's docstring for the columns.
"""

from __future__ import annotations

from countdown_gym.dataclass_cli import run_script
from countdown_gym.integrations.verl_export import TOOL_CONFIG, export, main, verl_rows

__all__ = ["TOOL_CONFIG", "export", "main", "verl_rows"]

if __name__ == "__main__":
    run_script(lambda: main(prog="scripts/export_verl.py"))
