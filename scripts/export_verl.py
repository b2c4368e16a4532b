"""``countdown-gym export --format verl`` with ``--preset longproc-0.5k --out data/verl`` by default (the flags of
``countdown-gym export``; the columns: :mod:`countdown_gym.integrations.verl_export`).

    python scripts/export_verl.py --prompt-style tinyzero --out data/verl
    python scripts/export_verl.py --interaction tool --max-turns 16 --limit 100 --split test --out data/verl_tools
"""

import sys

from countdown_gym.cli.export import main
from countdown_gym.dataclass_cli import run_script

if __name__ == "__main__":
    run_script(lambda: main(["--format", "verl", "--preset", "longproc-0.5k", "--out", "data/verl", *sys.argv[1:]]))
