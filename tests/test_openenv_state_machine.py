"""A Hypothesis state machine over the server's whole surface: every route of its OpenAPI schema with random bodies,
episodes played over HTTP beside one WebSocket session, and a model of what each episode must be. After every
step: no answer is a 5xx, every refusal is a clear 4xx (or a WebSocket error message), the episodes' step counts and
ends are the model's, and the server still answers ``/health``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv.core")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from countdown_gym.integrations.openenv import make_app  # noqa: E402

PROBLEM = {"numbers": [21, 16, 17, 26], "target": 46}
TURNS = ["21+16", "17+26", "37+43", "undo", "give up", "99+1", "21*", "", "x" * 5000, "21 + 16 = 37"]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=12),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                           max_leaves=8)
APP = make_app("CountdownMultiTurn-v0", split="test", max_sessions=2, max_turns=6)
ROUTES = sorted((path, method.upper()) for path, item in APP.openapi()["paths"].items() for method in item)


class ServerMachine(RuleBasedStateMachine):
    episodes = Bundle("episodes")

    def __init__(self) -> None:
        super().__init__()
        self.client = TestClient(APP)
        self.model: dict[str, dict] = {}  # episode_id -> {"steps": n, "done": bool}
        self.ws_cm = self.client.websocket_connect("/ws")
        self.ws = self.ws_cm.__enter__()
        self.ws_episode: dict | None = None

    def teardown(self) -> None:
        self.ws_cm.__exit__(None, None, None)
        self.client.close()

    # ---- HTTP --------------------------------------------------------------------------------------
    @rule(target=episodes, seed=st.integers(0, 2**64 - 1) | st.none(), fixed=st.booleans())
    def reset(self, seed, fixed):
        body = {"problem": PROBLEM} if fixed else ({"seed": seed} if seed is not None else {})
        r = self.client.post("/reset", json=body)
        assert r.status_code == 200, r.text
        eid = r.json()["observation"]["episode_id"]
        self.model[eid] = {"steps": 0, "done": False}
        return eid

    @rule(eid=episodes, turn=st.sampled_from(TURNS))
    def step(self, eid, turn):
        r = self.client.post("/step", json={"action": {"turn": turn}, "episode_id": eid})
        expected = self.model[eid]
        if expected["done"]:
            assert r.status_code == 409, r.text
            return
        assert r.status_code == 200, r.text
        expected["steps"] += 1
        expected["done"] = r.json()["done"]

    @rule(eid=episodes)
    def state(self, eid):
        r = self.client.get(f"/state/{eid}")
        assert r.status_code == 200 and r.json()["step_count"] == self.model[eid]["steps"], r.text

    @rule(eid=st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s and s not in ("", ".", "..")))
    def unknown_episode(self, eid):
        if eid in self.model:
            return
        r = self.client.post("/step", json={"action": {"turn": "1+2"}, "episode_id": eid})
        assert r.status_code == 404, r.text

    @rule(route=st.sampled_from(ROUTES), body=JSON_VALUES | st.text(max_size=30), raw=st.booleans())
    def any_route(self, route, body, raw):
        """Any route of the schema with any body: never a 5xx; a refusal is JSON with a readable detail."""
        path, method = route
        path = path.replace("{episode_id}", "nope")
        if raw:
            r = self.client.request(method, path, content=str(body), headers={"content-type": "application/json"})
        else:
            r = self.client.request(method, path, json=body)
        assert r.status_code < 500, (route, body, r.status_code, r.text[:300])
        if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
            assert r.json().get("detail") or r.json().get("error"), r.text[:300]

    # ---- WebSocket ----------------------------------------------------------------------------------
    @rule(seed=st.integers(0, 1000))
    def ws_reset(self, seed):
        self.ws.send_text(json.dumps({"type": "reset", "data": {"seed": seed}}))
        reply = self.ws.receive_json()
        assert reply["type"] == "observation", reply
        self.ws_episode = {"steps": 0, "done": False}

    @rule(turn=st.sampled_from(TURNS))
    def ws_step(self, turn):
        self.ws.send_text(json.dumps({"type": "step", "data": {"turn": turn}}))
        reply = self.ws.receive_json()
        if self.ws_episode is None or self.ws_episode["done"]:
            assert reply["type"] == "error" and reply["data"]["status"] == 409, reply
        else:
            assert reply["type"] == "observation", reply
            self.ws_episode["steps"] += 1
            self.ws_episode["done"] = reply["data"]["done"]

    @rule(frame=st.builds(json.dumps, JSON_VALUES) | st.text(max_size=40)
          | st.sampled_from(['{"type": "step", "data": {"turn": "1+2", "metadata": {"x": NaN}}}', "[" * 300]))
    def ws_garbage(self, frame):
        """Any frame that is not a well-formed message: an error answer, and the session goes on."""
        try:
            value = json.loads(frame)
        except ValueError:
            value = None
        if isinstance(value, dict) and value.get("type") in ("reset", "step", "state", "close"):
            return  # a message the protocol may accept: the other rules play those
        self.ws.send_text(frame)
        reply = self.ws.receive_json()
        assert reply["type"] == "error" and 400 <= reply["data"]["status"] < 500, reply

    # ---- after every step -----------------------------------------------------------------------------
    @invariant()
    def still_serving(self):
        assert self.client.get("/health").status_code == 200
        self.ws.send_text('{"type": "state"}')
        state = self.ws.receive_json()
        assert state["type"] == "state"
        if self.ws_episode is not None:
            assert state["data"]["step_count"] == self.ws_episode["steps"]


ServerMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None,
                                           suppress_health_check=list(HealthCheck))
test_the_whole_surface_under_random_sessions = ServerMachine.TestCase
