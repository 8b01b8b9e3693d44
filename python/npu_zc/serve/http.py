"""The HTTP API and live view: Starlette (routing, requests, responses) served by uvicorn.

Why these: both are pure Python and well kept (Encode's ASGI stack, what FastAPI stands on), so the service
installs wherever npu_zc does, free-threaded CPython included; Starlette alone is enough for six routes (no
schema layer to carry), and uvicorn runs on its own thread beside the inference threads. ``http.server`` has
no keep-alive pool, no request size limits and no graceful shutdown.

Routes: ``GET /health``, ``GET /streams``, ``POST /streams``, ``DELETE /streams/{name}``, ``GET /metrics``,
``GET /`` (the live view) and ``GET /live/{name}.jpg`` (a stream's newest tile). Errors are JSON
``{"error": sentence}`` with the status that fits (400 malformed, 401 no token, 404 unknown stream, 409
duplicate name or too many streams, 413 too large, 422 a bad stream).

With a token (``http.token``) every request carries it, ``Authorization: Bearer TOKEN`` or ``?token=TOKEN``
(what a browser's address bar can carry; the page passes it on), compared in constant time.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
import threading
from importlib import resources
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import Error
from .config import ConfigError, HttpConfig

if TYPE_CHECKING:
    from ..sinks.live import LiveView
    from ..sinks.metrics import Metrics


class Served(Protocol):
    """What the routes call: the service (:class:`npu_zc.serve.Service`), known here by its shape only."""

    metrics: Metrics
    live: LiveView | None

    def health(self) -> dict[str, Any]: ...

    def streams_info(self) -> list[dict[str, Any]]: ...

    def stream_names(self) -> list[str]: ...

    def add_stream(self, spec: Any) -> dict[str, Any]: ...

    def remove_stream(self, name: str) -> dict[str, Any]: ...

log = logging.getLogger("npu_zc.serve")

MAX_BODY = 64 * 1024
"""A POST body larger than this is refused (413): a stream's JSON is a few hundred bytes."""


def error(status: int, sentence: str) -> JSONResponse:
    return JSONResponse({"error": sentence}, status_code=status)


def status_of(exc: BaseException) -> int:
    """The HTTP status of a service error: 404 unknown stream, 409 duplicate or full, 422 a bad stream."""
    if isinstance(exc, KeyError):
        return 404
    if getattr(exc, "conflict", False):
        return 409
    return 422


def make_app(service: Served, config: HttpConfig) -> Starlette:
    token = config.token.encode() if config.token else None

    # Routes that only read what the service holds are coroutines: a plain function's request hops to a worker
    # thread and back (two thread switches, paid per tile). Those that compute or open sources stay off the loop.
    async def health(request: Request) -> Response:
        return JSONResponse(service.health())

    def streams(request: Request) -> Response:
        return JSONResponse({"streams": service.streams_info()})

    async def add(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return error(413, f"the request body has {len(body)} bytes; a stream is described in at most {MAX_BODY}")
        try:
            spec = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, f"the request body is not JSON: {exc}")
        except RecursionError:  # arrays or objects nested deeper than the decoder goes
            return error(400, "the request body is not JSON: nested deeper than the decoder goes")
        from starlette.concurrency import run_in_threadpool

        try:  # opening a network source waits for it (bounded by its timeout): off the event loop
            info = await run_in_threadpool(service.add_stream, spec)
        except (Error, ValueError, KeyError, OSError) as exc:
            return error(status_of(exc), _sentence(exc))
        return JSONResponse(info, status_code=201)

    async def remove(request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        name = request.path_params["name"]
        try:
            info = await run_in_threadpool(service.remove_stream, name)
        except (Error, ValueError, KeyError) as exc:
            return error(status_of(exc), _sentence(exc))
        return JSONResponse(info)

    def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.text(), media_type=CONTENT_TYPE_LATEST)

    def live(request: Request) -> Response:
        page = resources.files("npu_zc.serve").joinpath("live.html").read_text(encoding="utf-8")
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def tile(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in service.stream_names():
            return error(404, f"no stream is named {name!r}")
        if service.live is None:
            return error(404, "the live view is off")
        jpeg = service.live.jpeg(name)
        if jpeg is None:
            return Response(status_code=204, headers={"Cache-Control": "no-store"})
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    async def guard(request: Request) -> Response | None:
        """The token and the body's size: a refusal, or None to go on."""
        if token is not None:
            given = request.headers.get("authorization", "")
            given = given[7:] if given[:7].lower() == "bearer " else request.query_params.get("token", "")
            if not hmac.compare_digest(given.encode(), token):
                return JSONResponse({"error": "this service needs its token: Authorization: Bearer TOKEN (or ?token=TOKEN)"},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY:
            return error(413, f"the request body has {length} bytes; a stream is described in at most {MAX_BODY}")
        return None

    routes = [
        Route("/health", health), Route("/streams", streams, methods=["GET"]), Route("/streams", add, methods=["POST"]),
        Route("/streams/{name}", remove, methods=["DELETE"]), Route("/metrics", metrics), Route("/", live),
        Route("/live/{name}.jpg", tile),
    ]  # fmt: skip

    return Starlette(routes=routes, middleware=[Middleware(_Guarded, guard=guard)])


class _Guarded:
    """Plain ASGI middleware running ``guard`` before each request. Not Starlette's ``BaseHTTPMiddleware``: that
    runs every request in a task of its own with streams between (a cost paid per tile, many a second)."""

    def __init__(self, app: ASGIApp, guard: Callable[[Request], Awaitable[Response | None]]) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.guard(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _sentence(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__


def bind(config: HttpConfig) -> socket.socket:
    """The listening socket, bound before anything else starts: a port in use is one sentence, nothing started."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(config.host, config.port, family, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"http.host {config.host!r} is not an address of this machine ({exc.strerror})") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(infos[0][4])
    except OSError as exc:
        sock.close()
        if exc.errno == 98:
            raise ConfigError(f"http.port {config.port} on {config.host} is in use (another service listens there): "
                              "choose another port") from None  # fmt: skip
        raise ConfigError(f"http: cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class HttpServer:
    """uvicorn on its own thread, serving a socket bound by :func:`bind`."""

    def __init__(self, app: Starlette, sock: socket.socket) -> None:
        import uvicorn

        self.sock = sock
        self.port = int(sock.getsockname()[1])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                                    timeout_graceful_shutdown=3))  # fmt: skip
        self._thread = threading.Thread(target=self._run, name="npu_zc-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self.sock.close()


__all__ = ["HttpServer", "bind", "make_app"]
