"""The build proxy: the one way out of a build container (:mod:`envs.images.buildnet` sets it
up), served in the pgs process on a Unix socket, one thread per connection.

It answers ``CONNECT host:443`` and plain ``GET``/``HEAD`` to port 80 only for the allowed
hosts, each name resolved here and every address that reaches this host or a private network
refused (:func:`refused`), so a DNS answer cannot redirect it; and ``GET /i/<n>/<path>``: the
n-th configured index (:class:`Index`), fetched here with its credentials and the host's
certificate authority, its links rewritten to come back through the relay and, with a moment,
the files uploaded later hidden (:mod:`envs.images.snapshot`). Anything else is a 403.
"""

from __future__ import annotations

import base64
import ipaddress
import itertools
import os
import select
import socket
import socketserver
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.images.snapshot import Pins

#: The relay's address inside the build container (the proxy rewrites index links to it).
RELAY_PORT = 3128
RELAY_ADDRESS = f"127.0.0.1:{RELAY_PORT}"
#: Connections the proxy serves at once (pip opens a few; apt one per mirror).
MAX_CONNECTIONS = 64
#: CONNECT is allowed to these ports only; plain HTTP (apt) to port 80.
TLS_PORTS = (443,)
#: Networks a name of an allowed host must never resolve to (plus the host's own addresses).
_PRIVATE = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/3",
        "::/128",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def refused(address: str) -> bool:
    """Whether a build may not connect to ``address``: loopback, private, link-local, multicast,
    unspecified, or one of this host's own addresses (its services listen there)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):  # an IPv4 address inside an IPv6 one
        ip = ip.ipv4_mapped or ip.sixtofour or ip
    if any(ip.version == net.version and ip in net for net in _PRIVATE):
        return True
    return str(ip) in _own_addresses()


def _own_addresses() -> set[str]:
    found = {"127.0.0.1", "::1"}
    with suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    with suppress(OSError):  # every IPv4 address of every interface, from the kernel's table
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line:
                found.add(before.split()[-1])
    with suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            raw = line.split()[0]
            found.add(str(ipaddress.ip_address(":".join(raw[i : i + 4] for i in range(0, 32, 4)))))
    return found


@dataclass(frozen=True)
class Index:
    """One package index the build may use: its URL without credentials, and those."""

    url: str
    auth: str | None

    @classmethod
    def parse(cls, url: str) -> Index:
        parts = urllib.parse.urlsplit(url.strip())
        auth = None
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        return cls(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")), auth)

    @property
    def origin(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.url).path.rstrip("/")


class Refused(Exception):
    """The proxy does not forward this request (a 403 with the reason)."""


def _connect(host: str, port: int, allowed: frozenset[str]) -> socket.socket:
    """A connection to an allowed host, at an address that is not refused."""
    if host.lower().rstrip(".") not in allowed:
        raise Refused(f"{host} is not one of the hosts a build may reach")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise Refused(f"cannot resolve {host}: {e}") from None
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        if refused(str(address[0])):
            continue
        sock = socket.socket(family, kind, proto)
        sock.settimeout(30)
        try:
            sock.connect(address)
        except OSError as e:
            sock.close()
            error = e
            continue
        sock.settimeout(None)
        return sock
    raise Refused(f"{host} resolves to no address a build may reach ({error or 'all refused'})")


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until one side closes."""
    sockets = [a, b]
    try:
        while True:
            ready, _, _ = select.select(sockets, [], [], 300)
            if not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)
    except OSError:
        return


class _Handler(socketserver.BaseRequestHandler):
    server: BuildProxy

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        text, _, body = head.partition(b"\r\n\r\n")
        lines = text.decode("latin-1").split("\r\n")
        method, target, *_ = ([*lines[0].split(" "), "", ""])[:3]
        headers = [line for line in lines[1:] if line]
        try:
            if method == "CONNECT":
                self._connect(target)
            elif target.startswith("/i/") or target.startswith(f"http://{RELAY_ADDRESS}/i/"):
                self._index(method, target.removeprefix(f"http://{RELAY_ADDRESS}"), headers)
            elif target.startswith("http://"):
                self._forward(method, target, headers, body)
            else:
                raise Refused(f"{method} {target[:200]} is not a proxy request")
        except Refused as e:
            self.server.refusals.append(str(e))
            self._answer(403, str(e).encode(), "text/plain")

    def _answer(self, status: int, body: bytes, kind: str) -> None:
        with suppress(OSError):
            self.request.sendall(
                f"HTTP/1.1 {status} pgs\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )

    def _connect(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        if not port.isdigit() or int(port) not in TLS_PORTS:
            raise Refused(f"CONNECT {target}: only port 443 is allowed")
        upstream = _connect(host.strip("[]"), int(port), self.server.allowed)
        with upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pump(self.request, upstream)

    def _forward(self, method: str, target: str, headers: list[str], body: bytes) -> None:
        """Plain HTTP (apt's mirror): the request passed on in origin form, answer streamed."""
        parts = urllib.parse.urlsplit(target)
        if method not in ("GET", "HEAD") or (parts.port or 80) != 80:
            raise Refused(f"{method} {target[:200]}: only GET and HEAD to port 80")
        upstream = _connect(parts.hostname or "", 80, self.server.allowed)
        path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        kept = [h for h in headers if not h.lower().startswith(("proxy-", "connection:"))]
        request = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""])
        with upstream:
            upstream.sendall(request.encode("latin-1") + body)
            _pump(self.request, upstream)

    def _index(self, method: str, target: str, headers: list[str]) -> None:
        number, _, rest = target.removeprefix("/i/").partition("/")
        indexes = self.server.indexes
        if method not in ("GET", "HEAD") or not number.isdigit() or int(number) >= len(indexes):
            raise Refused(f"{method} {target[:200]}: no such index")
        index = indexes[int(number)]
        wanted = {
            k.strip().lower(): v.strip()
            for k, _, v in (h.partition(":") for h in headers)
            if k.strip().lower() in ("accept", "range")
        }
        request = urllib.request.Request(index.origin + "/" + rest, method=method)
        for key, value in wanted.items():
            request.add_header(key.capitalize(), value)
        if index.auth:
            request.add_header("Authorization", index.auth)
        try:
            answer = self.server.opener.open(request, timeout=120)
        except urllib.error.HTTPError as e:
            answer = e
        except OSError as e:
            self._answer(502, f"{index.origin}: {e}".encode(), "text/plain")
            return
        with answer:
            kind = answer.headers.get("Content-Type", "application/octet-stream")
            page = kind.startswith(("text/html", "application/vnd.pypi.simple"))
            if page or answer.status != 200:
                data = answer.read()
                if page and answer.status == 200:
                    data = self._page(data, kind, int(number))
                self._answer(answer.status, data, kind)
                return
            length = answer.headers.get("Content-Length")
            head = f"HTTP/1.1 200 pgs\r\nContent-Type: {kind}\r\nConnection: close\r\n"
            if length:
                head += f"Content-Length: {length}\r\n"
            self.request.sendall((head + "\r\n").encode())
            while block := answer.read(1 << 16):
                self.request.sendall(block)

    def _page(self, data: bytes, kind: str, number: int) -> bytes:
        """A project page: filtered by the moment (JSON), links into the index made relative
        to the relay (so pip fetches them here, with the credentials added)."""
        from envs.images.snapshot import JSON_TYPE, visible

        moment = self.server.moment
        if moment and kind.startswith(JSON_TYPE):
            import json

            data = json.dumps(visible(json.loads(data), moment, self.server.pins)).encode()
        origin = self.server.indexes[number].origin.encode()
        return data.replace(origin + b"/", f"http://{RELAY_ADDRESS}/i/{number}/".encode())


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Redirects within the index's origin only (PyPI sends ``/simple/Django/`` to
    ``/simple/django/``): never elsewhere, where its credentials would follow."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.netloc) != (new.scheme, new.netloc):
            raise urllib.error.HTTPError(newurl, 403, "redirect off the index", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class BuildProxy(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The build's only way out, on a Unix socket (see the module's docstring)."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        # A thread per connection, but never more than MAX_CONNECTIONS: code in the build
        # cannot make the pgs process start threads without end.
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def __init__(
        self,
        path: Path,
        indexes: list[Index],
        allowed: frozenset[str],
        *,
        moment: str | None = None,
        pins: Pins | None = None,
        ca: str | None = None,
    ) -> None:
        super().__init__(str(path), _Handler)
        os.chmod(path, 0o666)  # the container's user need not be this process's
        self.indexes, self.allowed, self.moment = indexes, allowed, moment
        #: Versions kept visible whatever the moment (exact pins of the build).
        self.pins: Pins = pins or {}
        #: Why requests were refused, in order (for tests and error messages).
        self.refusals: list[str] = []
        context = ssl.create_default_context(cafile=ca)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        # Straight to the index: the host's own proxy variables are not used (see the docs).
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=context),
            _SameOrigin(),
        )
