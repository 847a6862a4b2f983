"""A lean keep-alive HTTP/1.1 connection for the synchronous SDK over plain `http://`.

An agent makes hundreds of small calls to one gateway; httpx builds URL, request and response
objects for each, which costs more CPU than the gateway's own work on a cheap read. This talks to
one host over one persistent socket with the standard library, and raises the same httpx
exceptions the SDK raised before, so callers that catch `httpx.HTTPError` keep working.
"""

from __future__ import annotations

import http.client
import select
import socket
import urllib.request
from urllib.parse import urlsplit

import httpx

Headers = list[tuple[str, str]]


def lean_target(base_url: str) -> tuple[str, int, str] | None:
    """(host, port, path prefix) when `base_url` can use the lean connection, else None.

    Only plain `http://` URLs without credentials qualify, and only when no proxy would apply
    (httpx honours the proxy environment variables, so those URLs stay on httpx).
    """
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname or parts.username or parts.password:
        return None
    host = parts.hostname
    proxies = urllib.request.getproxies()
    if (proxies.get("http") or proxies.get("all")) and not urllib.request.proxy_bypass(host):
        return None
    try:
        port = parts.port or 80
    except ValueError:
        return None
    return host, port, parts.path.rstrip("/")


class LeanConnection:
    """One persistent HTTP/1.1 connection to a gateway; reconnects when the server closed it.

    Not thread-safe, like the SDK client that owns it.
    """

    def __init__(self, host: str, port: int, prefix: str, timeout: float) -> None:
        """Remember where to connect (the socket opens on the first request)."""
        self._host = host
        self._port = port
        self._prefix = prefix
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is not None and conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._conn = conn
        return conn

    def request(self, method: str, target: str, headers: Headers, body: bytes) -> tuple[int, bytes]:
        """Send one request and return (status, body).

        Raises:
            httpx.ConnectError: The gateway cannot be reached (nothing was sent).
            httpx.ConnectTimeout: Connecting took longer than the timeout (nothing was sent).
            httpx.ReadTimeout: No answer within the timeout (the request may have been served).
            httpx.RemoteProtocolError: The connection broke before the answer (the request may
                have been served), e.g. the gateway stopped.
        """
        url = self._prefix + target
        conn = self._connection()
        where = f"{self._host}:{self._port}"
        if conn.sock is None:
            try:
                conn.connect()
            except TimeoutError as exc:
                self.close()
                raise httpx.ConnectTimeout(f"cannot reach {where}: {exc}") from exc
            except OSError as exc:
                self.close()
                raise httpx.ConnectError(f"cannot reach {where}: {exc}") from exc
            if conn.sock is not None:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            conn.putrequest(method, url, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            content = response.read()
        except TimeoutError as exc:
            self.close()
            raise httpx.ReadTimeout(f"no answer from {where} within the timeout") from exc
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise httpx.RemoteProtocolError(
                f"the connection to {where} broke before an answer: {exc!r}"
            ) from exc
        if response.will_close:
            self.close()
        return response.status, content

    def close(self) -> None:
        """Close the socket (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _closed_by_peer(sock: socket.socket) -> bool:
    # An idle keep-alive socket is readable only when the server closed it (or sent garbage):
    # either way it cannot carry the next request. httpcore makes the same check.
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
