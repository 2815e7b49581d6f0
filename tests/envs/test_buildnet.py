"""What an image build reaches: the package indexes and nothing else; nothing of the host is
stored in the image; the repository's install code can be left unrun.

The proxy is tested in-process through its real Unix socket; the builds are real (Docker, pip
from the index through the proxy) on a tiny repository whose ``setup.py`` tries to reach
listeners this test starts on 127.0.0.1 and on the Docker bridge's gateway (this host)."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envs.docker_util import labels
from envs.images import RepoImageSpec, build_repo_image
from envs.images.buildnet import build_env
from envs.images.buildproxy import BuildProxy, Index, refused
from envs.images.snapshot import JSON_TYPE
from tests.support.containers import one_off
from tests.support.repos import make_repo
from tests.support.textutil import cli_error

# -- the proxy, no Docker -----------------------------------------------------------------------


@given(st.ip_addresses(v=4, network="127.0.0.0/8") | st.ip_addresses(v=4, network="10.0.0.0/8"))
def test_loopback_and_private_addresses_are_refused(address: Any) -> None:
    assert refused(str(address))
    assert refused(f"::ffff:{address}")  # the same address, IPv4-mapped


def test_link_local_own_and_public_addresses() -> None:
    assert refused("169.254.169.254")  # cloud metadata
    assert refused("2002:7f00:1::")  # 127.0.0.1 inside a 6to4 address
    assert refused("172.17.0.1") and refused("192.168.1.1") and refused("fe80::1")
    own = socket.gethostbyname(socket.gethostname())
    assert refused(own)  # this host's own address: its services listen there
    assert not refused("151.101.0.223")


def ask(path: Path, request: bytes) -> bytes:
    """One request to the proxy's Unix socket, as the relay in a build container sends it."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP listener on 127.0.0.1 that records every connection it sees."""
    seen: list[str] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(str(peer))
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def proxy(tmp_path: Path, indexes: list[Index], allowed: set[str], **kw: Any) -> BuildProxy:
    server = BuildProxy(tmp_path / "proxy.sock", indexes, frozenset(allowed), **kw)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_proxy_refuses_other_hosts_and_names_resolving_here(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    server = proxy(tmp_path, [Index.parse("https://pypi.org/simple")], {"localhost"})
    try:
        sock = tmp_path / "proxy.sock"
        # An allowed name that resolves to this host: refused after resolution.
        assert b" 403 " in ask(sock, b"CONNECT localhost:443 HTTP/1.1\r\n\r\n")
        for target in (f"127.0.0.1:{port}", f"localhost:{port}", "example.com:443"):
            answer = ask(sock, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403 "), answer
        get = f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        assert ask(sock, get).startswith(b"HTTP/1.1 403 ")
        assert ask(sock, b"GET /i/7/simple/six/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403 ")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == []
    assert any("resolves to no address" in r for r in server.refusals)


PAGE = {
    "meta": {"api-version": "1.1"},
    "name": "docutils",
    "files": [
        {
            "filename": "docutils-0.21.2-py3-none-any.whl",
            "url": "ORIGIN/files/docutils-0.21.2-py3-none-any.whl",
            "upload-time": "2024-04-23T18:57:14Z",
        },
        {
            "filename": "docutils-0.22-py3-none-any.whl",
            "url": "ORIGIN/files/docutils-0.22-py3-none-any.whl",
            "upload-time": "2025-07-29T15:20:31Z",
        },
    ],
}


@pytest.fixture
def index() -> Iterator[tuple[str, list[str]]]:
    """A private index on 127.0.0.1 that wants credentials; yields its origin and the
    Authorization headers it received."""
    auth: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth.append(self.headers.get("Authorization") or "")
            origin = f"http://127.0.0.1:{self.server.server_port}"  # type: ignore[attr-defined]
            if self.path.startswith("/away/"):  # an index sending pip elsewhere
                self.send_response(302)
                self.send_header("Location", self.path.removeprefix("/away/"))
                self.end_headers()
                return
            if self.path.startswith("/files/"):
                body, kind = b"wheel bytes", "application/octet-stream"
            elif JSON_TYPE in (self.headers.get("Accept") or ""):
                body = json.dumps(PAGE).replace("ORIGIN", origin).encode()
                kind = JSON_TYPE
            else:
                body, kind = f'<a href="{origin}/files/x.whl">x</a>'.encode(), "text/html"
            self.send_response(200 if self.path != "/simple/nothing/" else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", auth
    server.shutdown()
    server.server_close()


def body_of(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


def test_the_index_is_relayed_with_its_credentials_links_back_and_filtered_by_moment(
    tmp_path: Path, index: tuple[str, list[str]], listener: tuple[int, list[str]]
) -> None:
    origin, auth = index
    configured = Index.parse(origin.replace("//", "//canary-user:canary-token@") + "/simple")
    server = proxy(tmp_path, [configured], set(), moment="2025-01-01T00:00:00Z")
    # What the build's commands get: no credential, no host address.
    env = build_env([configured], ca=False)
    assert env["PIP_INDEX_URL"] == "http://127.0.0.1:3128/i/0/simple"
    assert "canary" not in json.dumps(env) and origin not in json.dumps(env)
    sock = tmp_path / "proxy.sock"
    try:
        page = ask(
            sock, f"GET /i/0/simple/docutils/ HTTP/1.1\r\nAccept: {JSON_TYPE}\r\n\r\n".encode()
        )
        files = json.loads(body_of(page))["files"]
        assert [f["url"] for f in files] == [
            "http://127.0.0.1:3128/i/0/files/docutils-0.21.2-py3-none-any.whl"
        ]
        html = ask(sock, b"GET /i/0/simple/docutils/ HTTP/1.1\r\nAccept: text/html\r\n\r\n")
        assert body_of(html) == b'<a href="http://127.0.0.1:3128/i/0/files/x.whl">x</a>'
        wheel = ask(sock, b"GET /i/0/files/docutils-0.21.2-py3-none-any.whl HTTP/1.1\r\n\r\n")
        assert body_of(wheel) == b"wheel bytes"
        assert ask(sock, b"GET /i/0/simple/nothing/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
        # A redirect off the index is not followed (its credentials would go along).
        away = f"GET /i/0/away/http://localhost:{listener[0]}/ HTTP/1.1\r\n\r\n".encode()
        assert ask(sock, away).startswith(b"HTTP/1.1 403")
    finally:
        server.shutdown()
        server.server_close()
    assert set(auth) == {"Basic Y2FuYXJ5LXVzZXI6Y2FuYXJ5LXRva2Vu"}  # canary-user:canary-token
    assert listener[1] == []


# -- real builds --------------------------------------------------------------------------------

CANARIES = {
    "PIP_INDEX_URL": "https://pgs-canary-user:pgs-canary-index-token@pypi.org/simple",
    "HTTPS_PROXY": "http://pgs-canary-proxy-user:pgs-canary-proxy-pw@127.0.0.1:9",
    "HTTP_PROXY": "http://pgs-canary-proxy-user:pgs-canary-proxy-pw@127.0.0.1:9",
    "NO_PROXY": "pgs-canary-no-proxy.internal",
    "PIP_TRUSTED_HOST": "pgs-canary-trusted.internal",
    "GITHUB_TOKEN": "pgs-canary-github-token",
}

#: The repository's setup.py: tries the host's listeners directly and through the proxy, writes
#: what happened and the environment it saw, and a marker that it ran.
SETUP_PY = r"""
import json, os, socket, urllib.request
from setuptools import setup

ports = json.load(open("ports.json"))
results = {}
for name, (host, port) in ports.items():
    try:
        socket.create_connection((host, port), timeout=3).close()
        results["direct " + name] = "connected"
    except OSError as e:
        results["direct " + name] = repr(e)
    try:
        urllib.request.urlopen(f"http://{host}:{port}/", timeout=10)
        results["proxy " + name] = "connected"
    except Exception as e:
        results["proxy " + name] = repr(e)
try:
    urllib.request.urlopen("https://example.com/", timeout=10)
    results["other host"] = "connected"
except Exception as e:
    results["other host"] = repr(e)
os.makedirs("/opt/probe", exist_ok=True)
json.dump({"results": results, "env": dict(os.environ)}, open("/opt/probe/setup-ran.json", "w"))
setup()
"""

PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "probe"
version = "0.1"
dependencies = ["iniconfig"]

[tool.setuptools]
py-modules = ["probe"]
"""


#: Install commands of the repository's own: the listeners first, then the project.
PGS_YAML = """
image:
  install:
    - "mkdir -p /opt/probe; for t in {0} {1}; do (exec 3<>/dev/tcp/$t) 2>/dev/null
      && echo connected >> /opt/probe/yaml-ran || echo refused >> /opt/probe/yaml-ran; done"
    - python -m pip install -e .
"""


def bridge_gateway(client: Any) -> str:
    """The address of this host on Docker's default bridge (its gateway)."""
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(config.get("Gateway") or ipaddress.ip_network(config["Subnet"])[1])


@pytest.fixture(scope="module")
def host_listeners(docker_client: Any) -> Iterator[tuple[dict[str, tuple[str, int]], list[str]]]:
    """Listeners on 127.0.0.1 and on the bridge gateway (this host), recording connections."""
    seen: list[str] = []
    servers = [socket.create_server((h, 0)) for h in ("127.0.0.1", bridge_gateway(docker_client))]
    stop = threading.Event()

    def serve(server: socket.socket) -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(f"{server.getsockname()} <- {peer}")
            connection.close()

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    names = {
        "loopback": tuple(servers[0].getsockname()),
        "bridge gateway": tuple(servers[1].getsockname()),
    }
    yield names, seen
    stop.set()
    for thread in threads:
        thread.join()
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def probe_repo(tmp_path_factory: pytest.TempPathFactory, host_listeners: Any) -> Path:
    ports, _ = host_listeners
    return make_repo(
        tmp_path_factory.mktemp("buildnet") / "probe",
        {
            "setup.py": SETUP_PY,
            "pyproject.toml": PYPROJECT,
            "probe.py": "ANSWER = 42\n",
            "requirements.txt": "iniconfig\n",
            "ports.json": json.dumps(ports),
            ".pgs.yaml": PGS_YAML.format(*(f"{h}/{p}" for h, p in ports.values())),
        },
    )


def run(client: Any, image: str, command: str) -> str:
    with one_off(
        client, image, ["bash", "-c", command], network_mode="none", labels=labels()
    ) as container:
        assert container.wait(timeout=120)["StatusCode"] == 0
        return str(container.logs(stderr=False).decode())


def test_the_build_reaches_the_index_and_not_the_host_and_stores_nothing_of_it(
    docker_client: Any,
    base_image: str,
    probe_repo: Path,
    host_listeners: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    built = build_repo_image(probe_repo, client=docker_client)
    _, seen = host_listeners
    assert seen == [], "a build reached a listener of the host"
    probe = json.loads(run(docker_client, built.tag, "cat /opt/probe/setup-ran.json"))
    assert all(r != "connected" for r in probe["results"].values()), probe["results"]
    assert run(docker_client, built.tag, "cat /opt/probe/yaml-ran").split() == ["refused"] * 2
    # pip reached the index (through the proxy, with the host's credentials added there).
    imported = "python -c 'import iniconfig, probe; print(probe.ANSWER)'"
    assert run(docker_client, built.tag, imported).strip() == "42"
    assert "pgs-canary" not in json.dumps(probe["env"]), "a host value reached the build's code"
    # The history of the repository image holds its environment image's and the base's too.
    image = docker_client.images.get(built.tag)
    stored = json.dumps(image.attrs["Config"]) + json.dumps(docker_client.api.history(built.tag))
    assert "pgs-canary" not in stored
    env = image.attrs["Config"]["Env"]
    assert not [v for v in env if v.split("=")[0].upper().endswith(("_PROXY", "INDEX_URL"))]
    assert not [v for v in env if "/run/pgs-build" in v or "pgs-host-ca" in v]


def test_without_repo_install_no_code_of_the_repository_runs(
    docker_client: Any, base_image: str, probe_repo: Path
) -> None:
    built = build_repo_image(
        probe_repo, spec=RepoImageSpec(run_install=False), client=docker_client
    )
    probes = run(docker_client, built.tag, "ls /opt/probe 2>/dev/null | wc -l")
    assert probes.strip() == "0", "setup.py or .pgs.yaml's install ran"
    # Its declared dependency is there, and the source imports (a .pth file, not a build).
    imported = "cd / && python -c 'import iniconfig, probe; print(probe.ANSWER)'"
    assert run(docker_client, built.tag, imported).strip() == "42"
    assert "probe" not in run(docker_client, built.tag, "python -m pip list --format=freeze")


def test_no_repo_install_is_about_the_image_pgs_builds(
    capsys: pytest.CaptureFixture[str], small_repo: Path
) -> None:
    run_args = ["run", "--issue", "fix it", "--repo", str(small_repo), "--model", "m"]
    run_args += ["--no-repo-install"]
    line = cli_error(capsys, *run_args, "--image", "pgs-base:py3.9")
    assert "--no-repo-install is about the repository image pgs builds" in line
    line = cli_error(capsys, *run_args, "--sandbox", "local")
    assert "--no-repo-install is about a Docker image: it needs --sandbox docker" in line
