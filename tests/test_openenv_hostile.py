"""The OpenEnv server under hostile input: each case a reproduction of a defect once found, plus a WebSocket fuzzer.

HTTP and WebSocket requests go to the app in process (Starlette's TestClient); the time limit on half-sent
bodies and the ``serve`` command's own checks use a real socket.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv.core")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from countdown_gym.cli import main as cli_main  # noqa: E402
from countdown_gym.game.problem import Problem  # noqa: E402
from countdown_gym.game.turn_game import replay_turns  # noqa: E402
from countdown_gym.integrations.openenv import listen, make_app  # noqa: E402
from countdown_gym.integrations.openenv.listen import uvicorn_server  # noqa: E402
from countdown_gym.integrations.openenv.serve import main as serve_main  # noqa: E402
from countdown_gym.integrations.openenv.server import serve_in_thread  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = {"numbers": [21, 16, 17, 26], "target": 46}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client():
    with TestClient(make_app("CountdownMultiTurn-v0", split="test", max_sessions=4)) as c:
        yield c


def _episode(client: TestClient) -> str:
    r = client.post("/reset", json={"problem": PROBLEM})
    assert r.status_code == 200
    return r.json()["observation"]["episode_id"]


def _refused(r, status: int = 422) -> str:
    assert r.status_code == status, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert isinstance(detail, str) and detail
    return detail


def test_a_blank_body_is_answered_as_no_json(client):
    """Defect: a body of only whitespace passed the JSON check and was answered 422 ``3: JSON decode error``
    (FastAPI's position and words); now it is the JSON check's answer, as any other body that is not JSON."""
    for path in ("/reset", "/step", "/mcp"):
        detail = _refused(client.post(path, content=b" \n ", headers=JSON))
        assert detail.startswith("the body is not valid JSON: EOF while parsing"), (path, detail)


def test_nan_infinity_and_lone_surrogates_are_422_not_500(client):
    """Defect: FastAPI's validation answer could not serialise NaN or "\\ud800" and the server answered 500."""
    eid = _episode(client)
    for path, raw in [
        ("/reset", '{"seed": NaN}'), ("/reset", '{"seed": Infinity}'), ("/reset", '{"seed": -Infinity}'),
        ("/reset", '{"episode_id": "\\ud800"}'), ("/reset", '{"episode_id": "a\\udfff"}'),
        ("/step", '{"action": {"turn": "1+2"}, "timeout_s": NaN, "episode_id": "EID"}'.replace("EID", eid)),
        ("/step", '{"action": {"turn": "\\ud800"}, "episode_id": "EID"}'.replace("EID", eid)),
        ("/step", '{"action": {"turn": "1+2", "metadata": {"x": NaN}}, "episode_id": "EID"}'.replace("EID", eid)),
        ("/reset", "[" * 5000 + "]" * 5000), ("/reset", '{"seed": ' + "9" * 5000 + "}"),
        ("/reset", b'{"seed": 1, "episode_id": "\xff"}'),
    ]:
        detail = _refused(client.post(path, content=raw, headers=JSON))
        assert "\ud800" not in detail
    assert client.get(f"/state/{eid}").json()["step_count"] == 0  # none of those reached the episode


def test_websocket_lone_surrogate_reset_is_refused_and_not_stored(client):
    """Defect: a reset with episode_id "\\ud800" was stored although its answer failed, so the id stayed "in use"."""
    store = client.app.state.episodes
    before = len(store)
    with client.websocket_connect("/ws") as ws:
        ws.send_text('{"type": "reset", "data": {"episode_id": "\\ud800"}}')
        assert ws.receive_json()["data"]["code"] == "INVALID_JSON"
        ws.send_text(json.dumps({"type": "reset", "data": {"episode_id": "mine", "problem": PROBLEM}}))
        assert ws.receive_json()["data"]["observation"]["episode_id"] == "mine"
        ws.send_text(json.dumps({"type": "reset", "data": {"episode_id": "mine"}}))
        refused = ws.receive_json()["data"]
        assert refused["status"] == 409 and "in use" in refused["message"]
    assert len(store) == before + 1


MALFORMED = ["[1]", "5", '"x"', "null", "true", "{}", "[" * 5000 + "]" * 5000, '{"type": "reset", "data": ' + "1" * 4400 + "}",
             "{not json", "", '{"type": "nope"}', '{"type": 5}', '{"type": "step"}', '{"type": "step", "data": 5}',
             '{"type": "step", "data": {"turn": 5}}', '{"type": "step", "data": {"turn": "1+2", "x": 1}}',
             '{"type": "reset", "data": {"seed": "1"}}', '{"type": "reset", "data": [1]}', '{"type": "state", "data": 7}',
             '{"type": "reset", "extra": 1}', '{"type": "reset", "data": {"seed": NaN}}']


def test_malformed_websocket_messages_keep_the_session(client):
    """Defect: any of these messages (and a binary frame) ended the session; each is now an error answer."""
    with client.websocket_connect("/ws") as ws:
        for message in MALFORMED:
            ws.send_text(message)
            reply = ws.receive_json()
            assert reply["type"] == "error", message[:40]
            assert reply["data"]["code"] in ("INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR") and reply["data"]["message"]
        ws.send_bytes(b'{"type": "state"}')
        assert ws.receive_json()["data"]["code"] == "INVALID_JSON"
        ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))
        assert ws.receive_json()["type"] == "observation"
        ws.send_text(json.dumps({"type": "step", "data": {"turn": "21+16"}}))
        assert ws.receive_json()["data"]["observation"]["text"] == "= 37 [17,26,37]"


@pytest.mark.parametrize("body", [{"seed": "1"}, {"seed": True}, {"seed": 1.0}, {"seed": -1}, {"seed": 2**64},
                                  {"episode_id": ""}, {"episode_id": 5}, {"problem": {"numbers": [21, "16"], "target": 46}},
                                  {"problem": {"numbers": [21, 16], "target": 10**30}},
                                  {"problem": {"numbers": [21, 16], "target": -5}},
                                  {"problem": {"numbers": [21, 16], "target": 2000}},
                                  {"problem": {"numbers": [21, 16], "target": 37.0}},
                                  {"problem": {"numbers": [21, True], "target": 22}}])
def test_types_are_not_coerced_and_targets_out_of_reach_are_refused(client, body):
    """Defect: "1" and true were taken as seeds and targets of 10**30 or -5 were accepted (422 is promised)."""
    _refused(client.post("/reset", json=body))
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": body}))
        assert ws.receive_json()["data"]["status"] == 422


def test_a_known_message_type_with_bad_data_is_a_validation_error_not_an_unknown_type(client):
    with client.websocket_connect("/ws") as ws:
        for message, code in (('{"type": "step", "data": "21+16"}', "VALIDATION_ERROR"),
                              ('{"type": "reset", "data": null}', "VALIDATION_ERROR"), ('{"type": "nope"}', "UNKNOWN_TYPE")):
            ws.send_text(message)
            assert ws.receive_json()["data"]["code"] == code, message


def test_the_target_rule_is_the_rules_result_range():
    """A negative target is refused under LongProc's rules (results >= 0) but played under TinyZero's (any sign)."""
    with TestClient(make_app("CountdownMultiTurn-v0", split="test", rules="tinyzero")) as c:
        r = c.post("/reset", json={"problem": {"numbers": [3, 8], "target": -5}})
        assert r.status_code == 200
        eid = r.json()["observation"]["episode_id"]
        assert c.post("/step", json={"action": {"turn": "3-8"}, "episode_id": eid}).json()["reward"] == 1.0


def test_a_masked_action_under_invalid_action_raise_is_a_422_and_the_episode_goes_on():
    """Defect: with make_app("Countdown-v0", invalid_action="raise") a masked action was a 500 with a traceback."""
    with TestClient(make_app("Countdown-v0", split="test", invalid_action="raise"), raise_server_exceptions=False) as c:
        obs = c.post("/reset", json={"problem": PROBLEM}).json()["observation"]
        masked, legal = obs["action_mask"].index(0), obs["action_mask"].index(1)
        step = {"action": {"action": masked}, "episode_id": obs["episode_id"]}
        assert "is masked in state [21, 16, 17, 26]" in _refused(c.post("/step", json=step))
        assert c.post("/step", json={**step, "action": {"action": legal}}).status_code == 200
        with c.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))
            ws.receive_json()
            ws.send_text(json.dumps({"type": "step", "data": {"action": masked}}))
            assert ws.receive_json()["data"]["status"] == 422


def test_an_episode_id_with_a_slash_is_read_by_get_state(client):
    """Defect: reset took episode_id "exp1/ep3", but GET /state/exp1/ep3 (or exp1%2Fep3) was a 404 "Not Found"."""
    assert client.post("/reset", json={"episode_id": "exp1/ep3", "problem": PROBLEM}).status_code == 200
    for path in ("/state/exp1/ep3", "/state/exp1%2Fep3"):
        r = client.get(path)
        assert r.status_code == 200 and r.json()["episode_id"] == "exp1/ep3", (path, r.text[:200])


@pytest.mark.parametrize("episode_id", [".", "..", "exp1/..", "./ep3", "exp1/./ep3", "exp1/../ep3"])
def test_an_episode_id_a_url_would_normalise_is_refused(client, episode_id):
    """Defect: reset took episode_id "." or "..", but GET /state/. or /state/.. (the URL normalised) never read it."""
    assert "'.' or '..'" in _refused(client.post("/reset", json={"episode_id": episode_id, "problem": PROBLEM}))
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": {"episode_id": episode_id}}))
        assert ws.receive_json()["data"]["code"] == "VALIDATION_ERROR"
    assert episode_id not in client.app.state.episodes._episodes
    readable = episode_id.replace(".", "...")  # dots that are no "." or ".." part are fine
    assert client.post("/reset", json={"episode_id": readable, "problem": PROBLEM}).status_code == 200
    assert client.get(f"/state/{readable}").json()["episode_id"] == readable


def test_over_long_turns_are_answered_and_kept_cut(client):
    """Defect: a 4 KB turn was refused by the game but kept whole in the episode (4,096 episodes: +260 MB)."""
    eid = _episode(client)
    long_turn = "21+16" + " " * 4000
    r = client.post("/step", json={"action": {"turn": long_turn}, "episode_id": eid})
    local = replay_turns(Problem((21, 16, 17, 26), 46), [long_turn], max_turns=16)
    assert r.json()["observation"]["text"] == local.replies[0] and r.json()["observation"]["reason"] == "turn_too_long"
    env = client.app.state.episodes.get(eid).env.unwrapped
    assert [len(text) for who, text in env.conversation if who == "agent"] == [env.max_turn_chars + 1]
    # Defect: a turn above 4,096 characters was a 422, where the local env answers it turn_too_long; the body's size
    # limit still bounds it (a 10 MB turn is a 413: tests/test_openenv.py)
    played = [long_turn]
    for turn in ("x" * 4097, "21+16" + " " * 60_000):
        played.append(turn)
        local = replay_turns(Problem((21, 16, 17, 26), 46), played, max_turns=16).replies[-1]
        r = client.post("/step", json={"action": {"turn": turn}, "episode_id": eid})
        assert r.status_code == 200 and r.json()["observation"]["text"] == local, r.text[:200]
        with client.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))
            ws.receive_json()
            ws.send_text(json.dumps({"type": "step", "data": {"turn": turn}}))
            assert ws.receive_json()["data"]["observation"]["reason"] == "turn_too_long"


def test_a_content_length_of_thousands_of_digits_is_answered_not_a_500(client):
    """Defect: in process (no uvicorn parser in front), a Content-Length of 5,000 digits was a 500 (int() refuses
    over 4,300 digits)."""
    for declared, status in (("9" * 5000, 413), ("0" * 5000 + "2", 200), ("1" + "0" * 12, 413)):
        r = client.post("/reset", content=b"{}", headers={**JSON, "content-length": declared})
        assert r.status_code == status, (declared[:20], r.status_code, r.text[:200])


def test_a_half_sent_body_is_answered_408_within_the_time_limit():
    """Defect: a request whose body never finished arriving was held for 38 s or more."""
    with serve_in_thread(make_app("Countdown-v0", split="test", body_timeout_s=0.5)) as url:
        host, port = url.split("//")[1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"se")
            t0 = time.monotonic()
            answer = b""
            while chunk := s.recv(4096):  # the server answers, then closes the connection
                answer += chunk
            assert time.monotonic() - t0 < 5
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5 s" in answer


@pytest.mark.parametrize("argv", [["--log-level", "nosuch"], ["--body-timeout-s", "0"], ["--session-idle-s", "inf"],
                                  ["--max-turn-chars", "0"], ["--head-timeout-s", "0"], ["--max-connections", "-1"],
                                  ["--body-timeout-s", "1e308"], ["--head-timeout-s", "86401"],
                                  ["--session-idle-s", "86400.5"], ["--max-sessions", "99999999999999999999"],
                                  ["--max-connections", "65537"], ["--max-episodes", "1000001"],
                                  ["--max-body-bytes", str(16 * 2**20 + 1)], ["--max-turn-chars", "4097"],
                                  ["--max-turns", "4097"]])
def test_serve_refuses_bad_limit_and_log_flags(argv, capsys):
    """Defect: ``serve --log-level nosuch`` gave a KeyError traceback; ``--body-timeout-s 1e308`` (the guard off)
    and 20-digit counts (``up to 99999999999999999999 sessions``) were accepted."""
    assert cli_main(["serve", *argv]) == 2  # the dispatcher returns the command's exit code
    err = capsys.readouterr().err
    assert "countdown-gym serve" in err and "Traceback" not in err


@pytest.mark.parametrize("kwargs", [{"body_timeout_s": 1e308}, {"session_idle_s": 86401}, {"max_sessions": 10**20},
                                    {"max_body_bytes": 16 * 2**20 + 1}, {"max_episodes": 10**7},
                                    {"max_turn_chars": 4097}, {"max_turns": 10**9}])
def test_make_app_refuses_limits_past_their_bounds(kwargs):
    with pytest.raises(ValueError, match="at most 86400|must be an int in 1.."):
        make_app("CountdownMultiTurn-v0", split="test", **kwargs)


def test_uvicorn_server_refuses_limits_past_their_bounds():
    app = make_app("Countdown-v0", split="test")
    for kwargs in ({"head_timeout_s": 1e308}, {"max_connections": 65537}):
        with pytest.raises(ValueError, match="head_timeout_s must be|max_connections must be"):
            uvicorn_server(app, 1024, **kwargs)


def test_serve_banner_counts_only_the_sessions_the_connection_cap_allows():
    from countdown_gym.integrations.openenv.serve import ServeOptions

    assert ServeOptions(max_sessions=100, max_connections=10).sessions() == 10
    assert ServeOptions(max_sessions=5, max_connections=10).sessions() == 5


def test_ctrl_c_stops_the_server_at_once_while_requests_are_half_sent():
    """Defect: Ctrl-C waited for a half-sent body up to --body-timeout-s (for ever with 1e308); now such connections
    are closed at shutdown: one line on stderr, exit 130, within a few seconds."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    cmd = [sys.executable, "-m", "countdown_gym", "serve", "--env", "Countdown-v0", "--split", "test", "--port",
           str(port), "--body-timeout-s", "86400", "--head-timeout-s", "86400"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a shell's job
    held = []
    try:
        assert proc.stdout.readline().startswith("countdown-gym serve: Countdown-v0 on"), proc.stderr.read()
        for sent in (b"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{",
                     b"POST /step HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"a\":",
                     b"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-le"):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            held[-1].sendall(sent)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 5
    finally:
        proc.kill()
        for s in held:
            s.close()
    assert proc.returncode == 130 and err.strip() == "countdown-gym serve: interrupted", (proc.returncode, err)


def test_serve_on_a_port_in_use_or_a_bad_host_is_one_line_and_exit_2(capsys):
    """Defect: ``serve --port <in use>`` and ``--host 999.999.1.1`` printed the banner, then exited 3."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_main(["--env", "Countdown-v0", "--split", "test", "--port", str(port)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err
    assert serve_main(["--env", "Countdown-v0", "--split", "test", "--host", "999.999.1.1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "999.999.1.1" in err


def test_websocket_frames_with_nan_or_infinity_are_refused_and_not_played(client):
    """Defect: a step whose action held ``{"x": NaN}`` was played, where HTTP answers 422."""
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))
        assert ws.receive_json()["type"] == "observation"
        for literal in ("NaN", "Infinity", "-Infinity"):
            ws.send_text('{"type": "step", "data": {"turn": "21+16", "metadata": {"x": ' + literal + "}}}")
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON", reply
            assert "NaN" in reply["data"]["message"]
        ws.send_text(json.dumps({"type": "state"}))
        assert ws.receive_json()["data"]["step_count"] == 0  # none was played
        ws.send_text(json.dumps({"type": "step", "data": {"turn": "NaN Infinity"}}))  # inside a string: a turn
        assert ws.receive_json()["type"] == "observation"


def test_a_json_body_without_a_json_content_type_names_the_content_type(client):
    """Defect: ``curl -d '{"seed": 1}'`` (form content type) or no content type was answered 422 "Input should be a
    valid dictionary or object to extract fields from", which did not say what was wrong."""
    for headers in ({}, {"content-type": "application/x-www-form-urlencoded"}, {"content-type": "text/plain"}):
        for path, body in (("/reset", b'{"seed": 1}'), ("/step", b'{"action": {"turn": "1+2"}, "episode_id": "x"}')):
            detail = _refused(client.post(path, content=body, headers=headers))
            assert detail.startswith("the body must be sent as content-type: application/json, got "), detail
            assert detail.endswith(repr(headers["content-type"]) if headers else "none"), detail
    assert client.post("/reset", content=b'{"seed": 1}', headers={"content-type": "application/json; charset=utf-8"}
                       ).status_code == 200
    assert _refused(client.post("/reset", content=b"[1]", headers=JSON)).startswith("Input should be a valid")


def test_a_step_without_a_body_says_what_to_send(client):
    """Defect: ``POST /step`` with no body (``curl -X POST``: no content type either) was answered 422 "Field
    required", naming neither the body nor how to send it; a ``null`` body is still refused as no object."""
    for headers in ({}, {"content-type": "text/plain"}, JSON):
        detail = _refused(client.post("/step", headers=headers))
        assert detail.startswith("the request has no body: send /step's JSON object"), detail
        assert "content-type: application/json" in detail and '"action"' in detail, detail
    assert _refused(client.post("/step", content=b"null", headers=JSON)).startswith("Input should be a valid")


def test_a_key_twice_in_one_object_is_refused_over_http(client):
    """Defect: ``{"seed": "x", "seed": 1}`` was read as seed 1 (the last value won, the first never checked), two
    ``problem`` keys played the second; other JSON readers keep the first."""
    eid = _episode(client)
    for path, raw in [
        ("/reset", '{"seed": "x", "seed": 1}'), ("/reset", '{"seed": 1, "\\u0073eed": 2}'),
        ("/reset", '{"problem": {"numbers": [1, 2], "target": 3}, "problem": {"numbers": [3, 5], "target": 8}}'),
        ("/reset", '{"problem": {"numbers": [3, 5], "target": 8, "target": 2}}'),
        ("/step", '{"action": {"turn": "21+16"}, "episode_id": "EID", "episode_id": "EID"}'.replace("EID", eid)),
        ("/step", '{"action": {"turn": "21+16", "metadata": {"a": [{"b": 1, "b": 2}]}}, "episode_id": "EID"}'
         .replace("EID", eid)),
        ("/mcp", '{"jsonrpc": "2.0", "method": "tools/list", "method": "tools/call", "id": 1}'),
    ]:
        assert "appears twice in one object" in _refused(client.post(path, content=raw, headers=JSON)), raw
    assert client.get(f"/state/{eid}").json()["step_count"] == 0  # none reached the episode
    r = client.post("/reset", content='{"episode_id": "a:b", "problem": {"numbers": [3, 5], "target": 8}}',
                    headers=JSON)  # a colon inside a string is no key
    assert r.status_code == 200 and r.json()["observation"]["episode_id"] == "a:b"


def test_a_key_twice_in_one_object_is_refused_over_websocket(client):
    """Defect: ``{"type": "reset", "type": "step", ...}`` was dispatched as a step (the last ``type`` won)."""
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))
        assert ws.receive_json()["type"] == "observation"
        for message in ('{"type": "reset", "data": {"seed": 1}, "data": {"seed": 2}}',
                        '{"type": "reset", "type": "step", "data": {"turn": "21+16"}}',
                        '{"type": "step", "data": {"turn": "21+16", "metadata": {"x": 1, "\\u0078": 2}}}',
                        '{"type": "step", "data": {"turn": "21+16", "turn": "21+17"}}',
                        '{"type": "step", "data": {"turn": "21+16"}, "data": {"turn": 5}, "x": NaN}'):
            ws.send_text(message)
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON", (message, reply)
        ws.send_text(json.dumps({"type": "state"}))
        assert ws.receive_json()["data"]["step_count"] == 0  # none was played
        ws.send_text('{"type": "step", "data": {"turn": "21+16", "metadata": {"note": "a: b", "c": {"d": ":"}}}}')
        assert ws.receive_json()["data"]["observation"]["text"] == "= 37 [17,26,37]"  # colons in strings: played


def test_the_mcp_route_is_strict_bounded_and_opens_no_session(client):
    """Defect: ``/mcp`` bypassed every limit: an object as params.session_id was a 500, its WebSockets ignored
    --max-sessions and --session-idle-s, sessions from openenv/session/create were never freed, a 5,000-deep array
    ended the session. This environment has no MCP tools: POST /mcp answers JSON-RPC and opens nothing, and the
    /mcp WebSocket is gone."""
    def rpc(body) -> dict:
        r = client.post("/mcp", json=body)
        assert r.status_code == 200 and r.json()["jsonrpc"] == "2.0", r.text
        return r.json()

    assert rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"] == {"tools": []}
    for method in ("openenv/session/create", "openenv/session/close", "tools/call", "nope"):
        answer = rpc({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"session_id": {"a": 1}}})
        assert answer["error"]["code"] == -32601 and answer["id"] == 2
    for bad in ({}, {"jsonrpc": "2.0", "method": 5}, {"jsonrpc": "2.0", "method": "tools/list", "params": [1]}):
        assert rpc(bad)["error"]["code"] == -32600
    for not_an_object in ("[1]", "5", ""):
        _refused(client.post("/mcp", content=not_an_object, headers=JSON))
    _refused(client.post("/mcp", content="[" * 5000 + "]" * 5000, headers=JSON))
    _refused(client.post("/mcp", content='{"jsonrpc": "2.0", "method": "tools/list", "id": NaN}', headers=JSON))
    _refused(client.post("/mcp", content=b"x" * 70_000, headers=JSON), 413)
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/mcp") as ws:
        ws.receive_json()


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(4096):
        out += chunk
    return out


def test_half_sent_request_heads_are_answered_408_and_closed():
    """Defect: a connection with part of a request head, or none, was held forever despite --body-timeout-s."""
    with serve_in_thread(make_app("Countdown-v0", split="test"), head_timeout_s=0.5) as url:
        host, port = url.split("//")[1].rsplit(":", 1)
        for sent in (b"", b"GET /hea", b"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-le"):
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(sent)
                t0 = time.monotonic()
                time.sleep(0.2)
                s.sendall(b"x")  # a byte now and then does not renew the time limit
                answer = _read_all(s)
                assert time.monotonic() - t0 < 5, sent
            assert answer.startswith(b"HTTP/1.1 408"), (sent, answer[:80])
        with socket.create_connection((host, int(port)), timeout=10) as s:  # a complete request is unaffected
            s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            assert _read_all(s).startswith(b"HTTP/1.1 200")


def test_many_half_sent_requests_cannot_crowd_out_a_complete_one():
    """Defect: 150 half-sent requests under ``ulimit -n 128`` made /health fail; beyond the connection cap the
    oldest connection still sending its head is closed."""
    with serve_in_thread(make_app("Countdown-v0", split="test"), head_timeout_s=60, max_connections=8) as url:
        host, port = url.split("//")[1].rsplit(":", 1)
        hogs = [socket.create_connection((host, int(port)), timeout=10) for _ in range(30)]
        try:
            for h in hogs:
                h.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n")  # never finished
            for _ in range(3):
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                    assert _read_all(s).startswith(b"HTTP/1.1 200")
            closed = 0
            for h in hogs:
                h.settimeout(2)
                try:
                    closed += h.recv(1) == b""
                except ConnectionResetError:  # closed before the server read the hog's bytes: a reset, not an end
                    closed += 1
                except TimeoutError:
                    pass
            assert closed >= 30 - 8  # the oldest ones made room
        finally:
            for h in hogs:
                h.close()


def _frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A WebSocket frame as a client sends it (masked; payload under 126 bytes)."""
    mask = os.urandom(4)
    return struct.pack("!BB", (0x80 if fin else 0) | opcode, 0x80 | len(payload)) + mask + bytes(
        b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize("log_level", ["info", "warning"])
def test_a_text_frame_that_is_not_utf8_is_closed_1007_with_one_log_line_not_a_traceback(log_level):
    """Defect: uvicorn logged an ERROR with a UnicodeDecodeError traceback for each text message of invalid UTF-8
    (one frame or two), so any client could fill the server's log; now one INFO line (none at --log-level warning)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    with serve_in_thread(make_app("Countdown-v0", split="test"), log_level=log_level) as url:
        logging.getLogger("uvicorn.error").addHandler(handler)  # after uvicorn configured its loggers
        host, port = url.split("//")[1].rsplit(":", 1)
        try:
            for frames in ([_frame(1, b"\xff\xfe")], [_frame(1, b'{"type": "st\xc3', fin=False), _frame(0, b'\xff"}')]):
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    key = base64.b64encode(os.urandom(16))
                    s.sendall(b"GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                              b"sec-websocket-key: " + key + b"\r\nsec-websocket-version: 13\r\n\r\n")
                    assert s.recv(4096).startswith(b"HTTP/1.1 101 ")
                    s.sendall(b"".join(frames))
                    assert _read_all(s) == b"\x88\x02\x03\xef"  # a close frame, code 1007
            time.sleep(0.2)
        finally:
            logging.getLogger("uvicorn.error").removeHandler(handler)
    assert not [r for r in records if r.exc_info or r.levelno >= logging.WARNING], [r.getMessage() for r in records]
    assert sum("not UTF-8" in r.getMessage() for r in records) == (2 if log_level == "info" else 0)


def _ws_connect(host: str, port: str) -> socket.socket:
    """A raw WebSocket connection to ``/ws``, its handshake answered."""
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: "
              + base64.b64encode(os.urandom(16)) + b"\r\nsec-websocket-version: 13\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 101 ")
    return s


def test_a_client_that_never_reads_its_answers_is_dropped_and_frees_its_session(monkeypatch):
    """Defect: a WebSocket client sending messages and reading none of the answers held its connection and its
    session slot for good (past --session-idle-s: the closing message itself waited to be sent), so max_sessions
    such clients shut everyone else out; now answers unread for SEND_TIMEOUT_S drop the connection."""
    monkeypatch.setattr(listen, "SEND_TIMEOUT_S", 0.3)
    app = make_app("CountdownMultiTurn-v0", split="test", max_sessions=1, session_idle_s=0.5)
    sessions = next(r for r in app.router.routes if getattr(r, "path", None) == "/ws").endpoint
    with serve_in_thread(app) as url:
        host, port = url.split("//")[1].rsplit(":", 1)
        hog = _ws_connect(host, port)
        hog.setblocking(False)
        burst, t0 = _frame(1, b'{"type": "reset", "data": {"seed": 1}}') * 100, time.monotonic()
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            while time.monotonic() - t0 < 30:
                with contextlib.suppress(BlockingIOError):
                    hog.send(burst)
                time.sleep(0.001)
        assert time.monotonic() - t0 < 30  # dropped by the server
        hog.close()
        while sessions.active and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        with _ws_connect(host, port) as s:  # the slot serves the next client
            s.sendall(_frame(1, b'{"type": "state"}'))
            assert b'"type":"state"' in s.recv(4096)


# ---- the fuzzer -------------------------------------------------------------------------------------------
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)
_typed = st.fixed_dictionaries({"type": st.sampled_from(["reset", "step", "state", "mcp", ""])},
                               optional={"data": _json | st.fixed_dictionaries({}, optional={
                                   "turn": st.text(max_size=30) | _json, "seed": _json, "episode_id": _json,
                                   "problem": _json | st.fixed_dictionaries({"numbers": st.lists(st.integers(), max_size=5),
                                                                            "target": st.integers()})})})
_frames = (st.builds(json.dumps, _json | _typed) | st.text(max_size=200) | st.binary(max_size=200)
           | st.builds(json.dumps, _typed).map(lambda s: s[: len(s) // 2]))  # cut in half


def test_websocket_fuzz_every_frame_gets_one_clear_answer_and_the_session_stays(client):
    """Random and malformed frames (any JSON, messages of every type with random data, text, binary, cut JSON)."""
    with client.websocket_connect("/ws") as ws:

        @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
        @given(frame=_frames)
        def one_frame(frame):
            if isinstance(frame, str):
                try:
                    value = json.loads(frame)
                except ValueError:
                    value = None
                assume(not (isinstance(value, dict) and value.get("type") == "close"))
                ws.send_text(frame)
            else:
                ws.send_bytes(frame)
            reply = ws.receive_json()
            assert reply["type"] in ("observation", "state", "error")
            if reply["type"] == "error":
                assert reply["data"]["message"] and reply["data"]["code"] and 400 <= reply["data"]["status"] < 500

        one_frame()
        ws.send_text(json.dumps({"type": "reset", "data": {"problem": PROBLEM}}))  # the session still plays
        assert ws.receive_json()["data"]["observation"]["target"] == 46


def test_an_idle_websocket_session_is_closed_and_frees_its_slot():
    """A session silent for session_idle_s is closed (1000, "idle"); its slot serves the next client."""
    with TestClient(make_app("Countdown-v0", split="test", max_sessions=1, session_idle_s=0.3)) as c:
        with c.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert ws.receive_json()["type"] == "observation"
            time.sleep(0.2)
            ws.send_text(json.dumps({"type": "state"}))  # activity restarts the clock
            assert ws.receive_json()["type"] == "state"
            t0 = time.monotonic()
            closed = ws.receive()
            assert closed["type"] == "websocket.close" and (closed["code"], closed["reason"]) == (1000, "idle")
            assert 0.2 < time.monotonic() - t0 < 5
        with c.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {"seed": 2}}))
            assert ws.receive_json()["type"] == "observation"
