"""Integer-only rule variants that the move tests run under (imported by the test modules)."""

from countdown_gym.game.rules import Rules

RULE_VARIANTS = [
    Rules.longproc(),
    Rules.longproc_positive(),
    Rules.classic(),
    Rules(name="nonneg", sign="nonnegative", value_limit=500),
    Rules(name="any-int", sign="any", value_limit=None),
    Rules(name="any-limit", sign="any", value_limit=100),
    Rules(name="any-limit-50", sign="any", value_limit=50),
    Rules(name="positive-limit", sign="positive", value_limit=30),
]
