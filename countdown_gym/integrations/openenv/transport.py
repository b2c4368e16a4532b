"""How requests reach the served environments: the HTTP routes, the WebSocket sessions and the body guard. Every
request is read strictly; a refusal is an answer (HTTP 4xx ``{"detail": ...}``, a WebSocket ``error`` message),
never a crash nor the end of a session (``docs/security.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Annotated, Any, Literal

import pydantic_core
from fastapi import Body, FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation
from pydantic import Field, TypeAdapter, ValidationError, create_model

from countdown_gym.dataclass_cli.strict import duplicate_key
from countdown_gym.integrations.openenv.models import ErrorAnswer, ResetRequest, Strict, step_request

log = logging.getLogger(__name__)


class RequestError(Exception):
    """A request the server refuses; ``status_code`` is the HTTP answer (the message is the detail)."""

    status_code: int = 422


class UnknownEpisode(RequestError):
    status_code = 404


class EpisodeConflict(RequestError):
    """A step before reset or after the episode ended, or a reset with an ``episode_id`` in use."""

    status_code = 409


def in_words(error: ValidationError | RequestValidationError) -> str:
    """A validation error in words, ``where: what; ...`` (its first five errors), never quoting the input (which may
    not even be printable)."""
    parts = []
    for e in error.errors()[:5]:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        what = str(e.get("msg", "invalid"))
        parts.append(f"{where}: {what}" if where else what)
    return "; ".join(parts) or "invalid request"


def read_json(text: str | bytes) -> Any:
    """``text`` read as strict JSON (RFC 8259: no ``NaN`` or ``Infinity``, no lone surrogate, no key twice in one
    object, at most 200 levels of nesting, integers of at most 4,300 digits); ``ValueError`` saying why it is not."""
    try:
        value = pydantic_core.from_json(text, allow_inf_nan=False)
    except ValueError as e:
        try:  # JSON but for the parser's NaN / Infinity extension?
            pydantic_core.from_json(text)
        except ValueError:
            raise e from None
        raise ValueError("NaN and Infinity are not JSON (RFC 8259)") from None
    if (error := duplicate_key(text, value)) is not None:
        raise ValueError(error)
    return value


# ---- HTTP -----------------------------------------------------------------------------------------------
_REFUSALS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorAnswer, "description": text} for status, text in (
        (400, "bad Content-Length"), (404, "unknown episode_id"),
        (408, "the body did not arrive within the server's time limit"),
        (409, "a step before reset or after the episode ended; a reset with an episode_id in use"),
        (413, "body above the server's size limit"),
        (422, "malformed body: not JSON, a wrong type, an unknown field, a value out of range"))
}


def add_http_routes(app: FastAPI, factory: Any, action_cls: type[Action], observation_cls: type[Observation]) -> None:
    """``POST /reset`` and ``POST /step`` (replacing openenv's, which coerce types) and the error answers."""
    step_model = step_request(action_cls)
    answer = create_model(f"{observation_cls.__name__}Answer", observation=(observation_cls, ...),  # its schema
                          reward=(float | None, None), done=(bool, False))

    async def reset(request: ResetRequest = Body(default_factory=ResetRequest)) -> Response:  # noqa: B008
        """Start an episode: a drawn problem (``seed`` seeds the draw) or ``problem``; answers its ``episode_id``."""
        return Response(factory().reset_answer(request), media_type="application/json")

    async def step(request: Any) -> Response:
        """Play ``action`` in the episode ``episode_id`` that /reset answered."""
        return Response(factory().step_answer(request.action, request.episode_id), media_type="application/json")

    step.__annotations__["request"] = step_model  # built here, so FastAPI cannot resolve it by name

    for path, endpoint, summary in (("/reset", reset, "Start an episode"), ("/step", step, "Play one action")):
        app.add_api_route(path, endpoint, methods=["POST"], response_model=answer, responses=_REFUSALS,
                          tags=["Environment Control"], summary=summary)

    async def refuse(request: Any, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestError)
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code)

    async def malformed(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)  # FastAPI's own answer echoes the input: JSON may not hold it
        kind = request.headers.get("content-type", "")
        sent, detail = (repr(kind[:80]) if kind else "none"), in_words(exc)
        if isinstance(exc.body, bytes):  # FastAPI read the body as no JSON: its content type is not a JSON one
            detail = f"the body must be sent as content-type: application/json, got {sent}"
        elif any(e["type"] == "missing" and tuple(e["loc"]) == ("body",) for e in exc.errors()):  # no body (/step)
            detail = ("the request has no body: send /step's JSON object, {\"action\": ..., \"episode_id\": ...}, "
                      f"with content-type: application/json (content-type sent: {sent})")
        return JSONResponse({"detail": detail}, status_code=422)

    app.add_exception_handler(RequestError, refuse)
    app.add_exception_handler(RequestValidationError, malformed)


def add_mcp_route(app: FastAPI) -> None:
    """``POST /mcp``, OpenEnv's JSON-RPC 2.0 endpoint for MCP tools, answered strictly: these environments have none
    and keep no MCP sessions. A body that is not a JSON-RPC request is an ``INVALID_REQUEST`` answer, never a 500."""
    from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse

    async def mcp(request: Request) -> JSONResponse:
        """JSON-RPC 2.0: ``tools/list`` (no tools); every other method is an error answer."""
        body = await request.body()  # strict JSON within the size and time limits: BodyGuard has read it
        if not body.lstrip().startswith(b"{"):  # also an empty body
            raise RequestError("the body must be a JSON object: a JSON-RPC 2.0 request")
        try:
            call = JsonRpcRequest.model_validate_json(body, strict=True)
        except ValidationError as e:
            answer = JsonRpcResponse.error_response(JsonRpcErrorCode.INVALID_REQUEST,
                                                    f"not a JSON-RPC 2.0 request: {in_words(e)}")
        else:
            if call.method == "tools/list":
                answer = JsonRpcResponse.success(result={"tools": []}, request_id=call.id)
            else:  # tools/call, openenv/session/create|close and any other method
                answer = JsonRpcResponse.error_response(
                    JsonRpcErrorCode.METHOD_NOT_FOUND, f"method {call.method[:80]!r} is not served: this environment "
                    "has no MCP tools and keeps no MCP sessions; play over /reset and /step or a /ws session",
                    request_id=call.id)
        return JSONResponse(answer.model_dump(exclude_none=True))

    body_schema = {"type": "object", "description": "a JSON-RPC 2.0 request (jsonrpc, method, params, id); any "
                                                    "other object is answered with a JSON-RPC error"}
    app.add_api_route("/mcp", mcp, methods=["POST"], tags=["MCP"], summary="MCP tools (JSON-RPC 2.0): none here",
                      response_model=None, responses={200: {"model": JsonRpcResponse}, **_REFUSALS},
                      openapi_extra={"requestBody": {"required": True,
                                                     "content": {"application/json": {"schema": body_schema}}}})


class BodyGuard:
    """ASGI middleware in front of every HTTP request: a body above ``limit`` bytes is answered 413 (read no further),
    one not received within ``timeout_s`` seconds 408, one not strict JSON (:func:`read_json`) 422. It also absorbs the
    ``WebSocketDisconnect`` of closing a WebSocket the client already closed (which uvicorn would log as an error)."""

    def __init__(self, app: Any, limit: int, timeout_s: float) -> None:
        self.app, self.limit, self.timeout_s = app, limit, timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            with contextlib.suppress(WebSocketDisconnect):
                await self.app(scope, receive, send)
            return None
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        digits = (declared or b"").lstrip(b"0")  # over 12 digits: above any limit (and int() refuses 4,300)
        if declared is not None and (not declared.isdigit() or len(digits) > 12 or int(digits or b"0") > self.limit):
            bad = not declared.isdigit()
            return await self._refuse(scope, receive, send, 400 if bad else 413,
                                      "bad Content-Length" if bad else self._too_big())
        chunks: list[bytes] = []
        try:
            async with asyncio.timeout(self.timeout_s):
                size, more = 0, True
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunks.append(message.get("body", b""))
                    size += len(chunks[-1])
                    if size > self.limit:
                        return await self._refuse(scope, receive, send, 413, self._too_big())
                    more = message.get("more_body", False)
        except TimeoutError:
            return await self._refuse(scope, receive, send, 408,
                                      f"the request body did not arrive within {self.timeout_s:g} s")
        body = b"".join(chunks)
        if body:  # none: a reset's defaults (a blank body is not JSON)
            try:
                read_json(body)
            except ValueError as e:
                return await self._refuse(scope, receive, send, 422, f"the body is not valid JSON: {e}")
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    def _too_big(self) -> str:
        return f"request body above the server's limit of {self.limit} bytes"

    async def _refuse(self, scope: dict[str, Any], receive: Any, send: Any, status: int, detail: str) -> None:
        close = {"connection": "close"} if status in (400, 408, 413) else None  # the rest of the body is unread
        await JSONResponse({"detail": detail}, status_code=status, headers=close)(scope, receive, send)


# ---- WebSocket --------------------------------------------------------------------------------------------
class _Reset(Strict):
    type: Literal["reset"]
    data: ResetRequest = Field(default_factory=ResetRequest)


class _StateOrClose(Strict):
    type: Literal["state", "close"]
    data: dict[str, Any] | None = None


_OBSERVATION = b'{"type":"observation","data":%s}'


def _error(message: str, code: str, status: int, **more: Any) -> bytes:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, "status": status, **more}}).encode()


class Sessions:
    """The WebSocket sessions (``/ws``): at most ``max_sessions`` at once, each closed after ``idle_s`` of silence."""

    def __init__(self, factory: Any, action_cls: type[Action], max_sessions: int, idle_s: float) -> None:
        self.factory, self.max_sessions, self.idle_s = factory, max_sessions, idle_s
        step = create_model(f"{action_cls.__name__}Message", __base__=Strict,  # data: the action
                            type=(Literal["step"], ...), data=(action_cls, ...))
        self.adapter = TypeAdapter(Annotated[_Reset | step | _StateOrClose, Field(discriminator="type")])
        """The WebSocket messages openenv's clients send: ``reset``, ``step``, ``state``, ``close``."""
        self.active = 0

    def answer(self, env: Environment, text: str) -> tuple[bytes, bool]:
        """The reply to one message and whether the session ends."""
        try:
            message = self.adapter.validate_python(read_json(text))
        except ValidationError as e:
            kinds = {x["type"] for x in e.errors(include_url=False, include_input=False, include_context=False)}
            if kinds & {"union_tag_invalid", "union_tag_not_found"}:
                return _error(f"invalid message: {in_words(e)} (a message is {{'type': 'reset' | 'step' | 'state' | "
                              f"'close', 'data': ...}})", "UNKNOWN_TYPE", 422), False
            return _error(f"invalid message: {in_words(e)}", "VALIDATION_ERROR", 422), False
        except ValueError as e:
            return _error(f"invalid message: {e}", "INVALID_JSON", 422), False
        try:
            if message.type == "step":
                return _OBSERVATION % env.step_answer(message.data), False
            if message.type == "reset":
                return _OBSERVATION % env.reset_answer(message.data), False
            if message.type == "state":
                return b'{"type":"state","data":%s}' % env.state.model_dump_json().encode(), False
            return b"", True
        except RequestError as e:
            code = "VALIDATION_ERROR" if e.status_code == 422 else "EXECUTION_ERROR"
            return _error(str(e), code, e.status_code), False
        except Exception:  # a defect of the server: logged, answered, and the session goes on
            log.exception("error answering a WebSocket message")
            return _error("internal error answering this message (logged by the server)", "EXECUTION_ERROR", 500), False

    async def __call__(self, websocket: WebSocket) -> None:
        await websocket.accept()
        if self.active >= self.max_sessions:
            await websocket.send_text(_error(f"the server holds its limit of {self.max_sessions} sessions; retry later",
                                             "CAPACITY_REACHED", 503, active_sessions=self.active,
                                             max_sessions=self.max_sessions).decode())
            await websocket.close(1013)
            return
        self.active += 1
        env = self.factory()
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        last, idle = [loop.time()], [False]

        def watchdog() -> None:  # one timer per session, not one per message (asyncio.timeout costs ~15 us)
            quiet = loop.time() - last[0]
            if quiet >= self.idle_s:
                idle[0] = True
                task.cancel()
            else:
                timer[0] = loop.call_later(self.idle_s - quiet, watchdog)

        timer = [loop.call_later(self.idle_s, watchdog)]
        receive, send = websocket.receive, websocket.send
        try:
            while True:
                message = await receive()
                last[0] = loop.time()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:
                    reply, end = _error("binary frames are not read: send each message as JSON text",
                                        "INVALID_JSON", 422), False
                else:
                    reply, end = self.answer(env, text)
                if end:
                    await websocket.close(1000)
                    return
                await send({"type": "websocket.send", "text": reply.decode()})
        except asyncio.CancelledError:
            if not idle[0]:
                raise
            task.uncancel()
            await websocket.close(1000, "idle")
        finally:
            timer[0].cancel()
            self.active -= 1
            env.close()
