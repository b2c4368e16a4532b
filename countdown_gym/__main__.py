"""``python -m countdown_gym <command>``: the ``countdown-gym`` console script."""

import sys

from countdown_gym.cli import main

sys.exit(main())
