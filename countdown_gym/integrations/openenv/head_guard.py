"""The server's connection guard, below the ASGI app: a time limit on request heads and a cap on connections.

uvicorn holds a connection that sends part of a request head (or nothing at all) for as long as the client keeps
it open, so a few hundred such connections use up the process's file descriptors and every other request fails.
:func:`guarded_protocol` gives uvicorn's own HTTP protocol (``h11`` or ``httptools``, whichever it would pick) two
limits:

* **head timeout**: a connection waiting for a request head (just opened, or part of a head received after an
  earlier answer) gets ``head_timeout_s`` seconds to complete it, counted from its first wait, not renewed by each
  byte; then it is answered 408 and closed. An idle connection between requests is uvicorn's keep-alive timeout's.
* **connection cap**: at most ``max_connections`` connections at once (HTTP and WebSocket); one more closes the
  oldest connection still waiting for a head, or, when none is waiting, is itself closed at once. So half-sent
  requests can never crowd out a complete one.
* **shutdown**: on Ctrl-C a connection still sending a request body is closed at once, not waited for.

Bodies are :class:`~countdown_gym.integrations.openenv.transport.BodyGuard`'s (size, time, strict JSON).
"""

from __future__ import annotations

import asyncio
from typing import Any

_TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def guarded_protocol(head_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the two limits above (a class per server: the waiting list is its own)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    waiting: dict[Any, None] = {}
    """Connections waiting for a request head, oldest first."""

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                oldest = next(iter(waiting), None)
                if oldest is None:  # every other connection is busy: this one waits for none of them
                    transport.close()
                    return
                oldest._head_arrived()  # out of the waiting list now, not when its close completes
                oldest.transport.close()
            self._wait_for_head()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle or self not in self.connections:  # a request head, or a WebSocket upgrade
                self._head_arrived()
            elif self.cycle is None or self.cycle.response_complete:  # still in a head
                self._wait_for_head()

        def shutdown(self) -> None:
            """Server shutdown (Ctrl-C): a connection still sending its request body is closed now; uvicorn's own
            ``shutdown`` would wait for the body, up to the body timeout, before the server could stop."""
            cycle = self.cycle
            if cycle is not None and cycle.more_body and not cycle.response_started:
                self._head_arrived()
                self.transport.close()
            else:
                super().shutdown()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def _wait_for_head(self) -> None:
            if self._head_timer is None:
                waiting[self] = None
                self._head_timer = asyncio.get_running_loop().call_later(head_timeout_s, self._head_timed_out)

        def _head_arrived(self) -> None:
            waiting.pop(self, None)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            waiting.pop(self, None)
            if not self.transport.is_closing():
                self.transport.write(_TIMEOUT_ANSWER)
                self.transport.close()

    return GuardedHTTPProtocol


def default_max_connections() -> int:
    """The connection cap that keeps file descriptors free for the process itself: the soft ``RLIMIT_NOFILE``
    less 32, at least 8 and at most 4,096."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1024
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, min(4096, soft - 32))
