"""The network of an image build: the package indexes and nothing else.

A build runs code pgs does not trust (a repository's ``setup.py``, ``.pgs.yaml`` install
commands, a tool bundle's ``install.sh``, packages' own build scripts). Its container gets no
network at all (``network_mode="none"``: only ``lo``), and one way out: a folder of the host
bind-mounted read-only at :data:`MOUNT`, holding a Unix socket served by the build proxy
(:class:`~envs.images.buildproxy.BuildProxy`) in the pgs process for the duration of the
build. A small relay inside the container (:data:`RELAY`, started as the container's first
process) listens on ``127.0.0.1:3128`` and hands each connection to that socket, so pip, git,
curl and apt use it as an ordinary HTTP proxy (``HTTPS_PROXY``, ``http_proxy``...). The proxy
answers:

- ``CONNECT host:443`` and ``GET http://host/...`` (apt) only for the allowed hosts
  (:func:`allowed_hosts`: the configured indexes, ``files.pythonhosted.org``, the Debian mirror,
  ``PGS_BUILD_HOSTS``); the name is resolved here and every address that reaches this host or
  a private network (:func:`~envs.images.buildproxy.refused`) is refused, so a DNS answer
  cannot redirect it;
- ``GET /i/<n>/<path>``: the n-th configured index (pip's ``index-url``, then
  ``extra-index-url``s), fetched here with its credentials and the host's certificate authority;
  links into the index are rewritten to come back here, and with a moment the files uploaded
  later are hidden, exact pins excepted (:mod:`envs.images.snapshot`). pip in the build sees
  ``http://127.0.0.1:3128/i/0/simple``: no credential, token or host address ever enters it.

Everything else is refused with 403. The build-time settings (proxy variables, index URL,
``PIP_CERT`` & co. pointing at the CA in the mount) are given to each ``docker exec`` only and
the mount is not part of a commit, so nothing of the host lands in a layer, the image's config
or its history.

Not protected: the allowed hosts themselves (code in the build can send what it read to them,
but no credential of the host is in its reach), and the packages an index serves.
"""

from __future__ import annotations

import configparser
import os
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from envs.images.buildproxy import RELAY_ADDRESS, RELAY_PORT, BuildProxy, Index
from envs.images.snapshot import Pins

#: Where the build's folder (socket, relay, CA, step script) is mounted inside the container.
MOUNT = "/run/pgs-build"
SOCKET_NAME = "proxy.sock"
DEFAULT_INDEX = "https://pypi.org/simple"
#: Hosts a build reaches besides the indexes: PyPI's files, and the Debian mirror for the apt
#: commands of SWE-bench specs (``pre_install``).
DEFAULT_HOSTS = ("pypi.org", "files.pythonhosted.org", "deb.debian.org", "security.debian.org")
#: Variables pointing tools at the host's certificate authority, inside the build.
CA_VARIABLES = (
    "PIP_CERT",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
)

#: The relay inside the build container: TCP on 127.0.0.1:3128 -> the mounted Unix socket.
RELAY = f"""
import socket, threading
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect("{MOUNT}/{SOCKET_NAME}")
    except OSError:
        client.close()
        return
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    pump(upstream, client)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", {RELAY_PORT}))
listener.listen(128)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
"""
#: Shell run before a build's steps: wait (a few seconds at most) for the relay to listen.
WAIT_FOR_RELAY = (
    "for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"
    f"{RELAY_PORT}) 2>/dev/null && break; sleep 0.1; done"
)


def _pip_config() -> dict[str, str]:
    """pip's ``index-url`` and ``extra-index-url`` from its configuration files (global, user,
    site, ``PIP_CONFIG_FILE``; later ones win, as pip reads them)."""
    home = Path.home()
    files = [
        Path("/etc/xdg/pip/pip.conf"),
        Path("/etc/pip.conf"),
        home / ".pip" / "pip.conf",
        Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf",
    ]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    found: dict[str, str] = {}
    for path in files:
        parser = configparser.ConfigParser(interpolation=None)
        with suppress(OSError, configparser.Error):
            parser.read(path)
        for section in ("global", "install", "download"):
            for key in ("index-url", "extra-index-url"):
                if parser.has_option(section, key):
                    found[key] = parser.get(section, key)
    return found


def configured_indexes() -> list[Index]:
    """The host's indexes as pip would use them: ``PIP_INDEX_URL`` else pip's configuration
    else PyPI, then the extra ones."""
    config = _pip_config()
    main = os.environ.get("PIP_INDEX_URL") or config.get("index-url") or DEFAULT_INDEX
    extra = os.environ.get("PIP_EXTRA_INDEX_URL") or config.get("extra-index-url") or ""
    return [Index.parse(u) for u in [main, *extra.split()] if u.strip()]


def allowed_hosts(indexes: list[Index]) -> frozenset[str]:
    """Host names a build may reach: the indexes', :data:`DEFAULT_HOSTS`, and those listed in
    ``PGS_BUILD_HOSTS`` (comma or space separated; set on the host, never by a repository)."""
    extra = os.environ.get("PGS_BUILD_HOSTS", "").replace(",", " ").split()
    names = {urllib.parse.urlsplit(i.url).hostname or "" for i in indexes}
    return frozenset(h.lower() for h in {*names, *DEFAULT_HOSTS, *extra} if h)


def ca_bundle() -> str | None:
    """The host's CA bundle: pip's own setting first, as the host reaches the index with it."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        path = os.environ.get(name)
        if path and Path(path).is_file():
            return path
    default = "/etc/ssl/certs/ca-certificates.crt"
    return default if Path(default).is_file() else None


@dataclass(frozen=True)
class BuildNetwork:
    """What a build container needs: its mount (host folder -> :data:`MOUNT`, read-only) and the
    environment of each of its commands (never of the container or the image)."""

    folder: Path
    env: Mapping[str, str]
    proxy: BuildProxy | None


def build_env(indexes: list[Index], ca: bool) -> dict[str, str]:
    """The variables of each build command: the relay as proxy, the indexes through it."""
    proxy = f"http://{RELAY_ADDRESS}"
    urls = [f"{proxy}/i/{n}{index.path}" for n, index in enumerate(indexes)]
    env = {
        **{k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PIP_INDEX_URL": urls[0],
    }
    if urls[1:]:
        env["PIP_EXTRA_INDEX_URL"] = " ".join(urls[1:])
    if ca:
        env |= dict.fromkeys(CA_VARIABLES, f"{MOUNT}/ca.crt")
    return env


@contextmanager
def build_network(
    folder: Path, *, network: bool, moment: str | None = None, pins: Pins | None = None
) -> Iterator[BuildNetwork]:
    """Serve the proxy on ``folder/proxy.sock`` while the block runs (nothing when ``network``
    is False), with the relay and the host's CA beside it. With ``moment`` the index is shown as
    it was then, the versions ``pins`` names excepted (:mod:`envs.images.snapshot`)."""
    if not network:
        yield BuildNetwork(folder, {}, None)
        return
    indexes = configured_indexes()
    ca = ca_bundle()
    if ca:
        shutil.copyfile(ca, folder / "ca.crt")
    (folder / "relay.py").write_text(RELAY)
    server = BuildProxy(
        folder / SOCKET_NAME, indexes, allowed_hosts(indexes), moment=moment, pins=pins, ca=ca
    )
    # A short poll: shutdown() waits for it, at the end of every build.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield BuildNetwork(folder, build_env(indexes, ca is not None), server)
    finally:
        server.shutdown()
        server.server_close()
        (folder / SOCKET_NAME).unlink(missing_ok=True)
