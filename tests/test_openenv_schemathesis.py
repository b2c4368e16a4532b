"""Schemathesis against the server's own OpenAPI schema, in process (ASGI): every answer is 2xx or 4xx and
matches the schema, for generated valid and invalid requests to every route of both served environments."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv.core")
schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

from countdown_gym.integrations.openenv import make_app  # noqa: E402

# Every check but positive_data_acceptance: a schema cannot say which puzzles are playable (a legal first move,
# a reachable target under the rules), so a schema-valid problem may rightly be refused with 422.
SKIP = [positive_data_acceptance]
SCHEMAS = {env_id: schemathesis.openapi.from_asgi("/openapi.json", make_app(env_id, split="test"))
           for env_id in ("CountdownMultiTurn-v0", "Countdown-v0")}


@SCHEMAS["CountdownMultiTurn-v0"].parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_multiturn_server_answers_match_its_schema(case):
    case.call_and_validate(excluded_checks=SKIP)


@SCHEMAS["Countdown-v0"].parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_countdown_server_answers_match_its_schema(case):
    case.call_and_validate(excluded_checks=SKIP)
