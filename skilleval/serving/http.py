"""JSON over HTTP to the servers a run talks to, through urllib3, the one HTTP client of
the package.

urllib3 rather than httpx or the openai SDK: a run keeps 32 requests in flight from 32
threads on a machine of a few cores, and a request's client CPU is what bounds its
throughput there. urllib3's request path costs less than half of httpx's (the stand-in
server, one thread: 0.24 ms against 0.53 ms, and 0.70 ms for the openai SDK; see
benchmarks/bench_http_throughput.py for a run's figures).

Nothing here retries or follows redirects: ``retries=False`` makes urllib3 raise the
first error itself (urllib3/util/retry.py, ``Retry.increment`` re-raises when ``total`` is
False), so the run's one retry layer (serving.outage) sees every failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import urllib.request
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from skilleval.errors import SkillevalError

LOCAL_KEY = "EMPTY"  # what a local server started without --api-key ignores


def api_key(env_name: str | None) -> str:
    """The key a protocol names by its variable; read from the environment only, never
    written anywhere."""
    if env_name is None:
        return LOCAL_KEY
    key = os.environ.get(env_name)
    if not key:
        raise SkillevalError(
            f"the protocol reads its API key from ${env_name}, which is not set; export it "
            "in the shell that runs snakemake (it is never written to config or results)"
        )
    return key


class HttpStatusError(Exception):
    """A reply outside 2xx that the caller did not expect."""


@dataclass(frozen=True)
class Reply:
    method: str
    url: str
    status: int
    headers: Any  # urllib3's HTTPHeaderDict: case-insensitive, as the server sent them
    body: bytes

    def raise_for_status(self) -> None:
        if not 200 <= self.status < 300:
            raise HttpStatusError(
                f"{self.method} {self.url} answered HTTP {self.status}: {self.text[:300]}"
            )

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; ValueError (json.JSONDecodeError) when it is not."""
        return json.loads(self.body)


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (http_proxy, https_proxy, no_proxy),
    read as the standard library reads them."""
    host = urlsplit(url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(urlsplit(url).scheme)


def tracking_pools(opened: weakref.WeakSet[HTTPConnection]) -> dict[str, type]:
    """urllib3's pool classes, by scheme, whose connections are added to ``opened`` as they
    connect (through the public ``ConnectionCls`` of a pool class)."""

    class Connection(HTTPConnection):
        def connect(self) -> None:
            super().connect()
            opened.add(self)

    class SecureConnection(HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            opened.add(self)

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Connection

    class SecurePool(urllib3.HTTPSConnectionPool):
        ConnectionCls = SecureConnection

    return {"http": Pool, "https": SecurePool}


class JsonClient:
    """Requests to one server, ``base_url`` joined with each path, over a pool of kept-alive
    connections as large as the threads that share it."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float,
        connections: int,
        headers: dict[str, str] | None = None,
        trust_env: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        proxy = proxy_for(self.base_url) if trust_env else None
        options: dict[str, Any] = {
            "num_pools": 1,
            "maxsize": connections,
            "timeout": urllib3.Timeout(timeout_s),
            "retries": False,
        }
        self.pool: urllib3.PoolManager = (
            urllib3.ProxyManager(proxy, **options) if proxy else urllib3.PoolManager(**options)
        )
        self.opened: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self.pool.pool_classes_by_scheme = tracking_pools(self.opened)

    def request(self, method: str, path: str, body: Any = None) -> Reply:
        """One request; urllib3's errors (urllib3.exceptions) pass to the caller."""
        url = self.base_url + path
        response = self.pool.request(
            method,
            url,
            body=None if body is None else json.dumps(body).encode(),
            headers=self.headers,
            redirect=False,
        )
        return Reply(method, url, response.status, response.headers, response.data)

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Reply:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Reply:
        return self.request("DELETE", path)

    def close(self) -> None:
        self.pool.clear()

    def abort(self) -> None:
        """Cut every connection, those a request is waiting on included: the waiting
        request fails at once (a transport error), and a server that watches its
        connections cancels what it was computing for it (vLLM, sglang, llama-server)."""
        for connection in list(self.opened):
            if connection.sock is not None:
                with contextlib.suppress(OSError):  # closed already
                    connection.sock.shutdown(socket.SHUT_RDWR)
