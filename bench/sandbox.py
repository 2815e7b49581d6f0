"""Sandbox speed, side by side with one `docker exec` per command (what mini-swe-agent does).

    .venv/bin/python bench/sandbox.py [--n 200] [--image pgs-base:py3.9]

Prints p50/p95 round trip of `true` through DockerSandbox (and of a bare helper request, which
starts no process: the transport alone), through `docker exec` with the CLI
(mini-swe-agent's DockerEnvironment: `docker exec -w DIR CID bash -lc CMD`) and through the SDK's
exec_run; container start time; cold and warm repository-image build; reading a 1 MB file.
The process containment (every process a command started ends with it), measured side by side:
`true` with it on (the default) and off (`contain_processes=False`: only the command's process
group is killed, as before), and with it on for a command that leaves a process in a session of
its own (the helper then scans /proc, freezes and kills).
The persistent shell session (``agent.shell: persistent``), side by side: `true` in a session
whose state (after a `cd`, an `export`, a function and an alias) each command restores and
saves again.
What the seal reads (what a sandbox's set-up wrote), side by side: the writable layer listed on
this machine and `docker diff`.
What a container's start costs the machine (CPU seconds of every process: the daemon, the
storage driver, the shim), side by side: the helper's files sent on its stdin (pgs now) and
copied in as an archive before the start (pgs before: the daemon mounts the container's file
system and re-execs itself for it).
Last lines: start_cpu_saving=<archive CPU / stdin CPU, per start>,
seal_listing_speedup=<docker diff p50 / listing p50>,
exec_speedup=<docker exec p50 / ours p50>,
persistent_over_fresh=<`true` in a session p50 / fresh p50>,
containment_overhead_ratio=<containment on p50 / off p50, for `true`>.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import docker_changes
from envs.channel import HELPER_SCRIPT, helper_files
from envs.docker_io import SocketChannel, tar_path
from envs.docker_sandbox import HELPER_DIR, DockerSandbox, DockerSandboxConfig
from envs.docker_util import container_labels, docker_client, remove_container
from envs.images import RepoImageSpec, build_repo_image, ensure_base_image
from tests.support.repos import make_repo


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def row(name: str, xs: list[float]) -> None:
    print(f"{name:<34} p50 {statistics.median(xs) * 1e3:8.2f} ms   p95 {pct(xs, 95) * 1e3:8.2f} ms")


def machine_cpu() -> float:
    """CPU seconds every process of the machine has used (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:8]]
    return (sum(ticks[:3]) + ticks[5] + ticks[6]) / os.sysconf("SC_CLK_TCK")


def start_copied(client: Any, image: str) -> None:
    """A helper container started as pgs did before: its files copied in as a tar archive."""
    container = client.containers.create(
        image,
        entrypoint=["python3", "-u", f"{HELPER_DIR}/{HELPER_SCRIPT}"],
        init=True,
        stdin_open=True,
        auto_remove=True,
        network_mode="none",
        labels=container_labels("bench"),
    )
    try:
        # The helper's files and nothing else (no __pycache__), as the old start copied them.
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in helper_files().items():
                (Path(tmp) / name).write_bytes(data)
            archive = tar_path(Path(tmp), os.path.basename(HELPER_DIR))
        container.put_archive(os.path.dirname(HELPER_DIR), archive)
        sock = client.api.attach_socket(
            container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        channel = SocketChannel(sock)
        container.start()
        assert b"ready" in channel.readline(60)
        channel.close()
    finally:
        remove_container(client, container.id)


def start_cpu(client: Any, image: str, rounds: int) -> tuple[float, float]:
    """Machine CPU seconds per container start and removal: (stdin, archive), interleaved."""
    stdin = copied = 0.0
    for _ in range(rounds):
        before = machine_cpu()
        DockerSandbox(DockerSandboxConfig(image=image)).close()
        middle = machine_cpu()
        start_copied(client, image)
        stdin, copied = stdin + middle - before, copied + machine_cpu() - middle
    return stdin / rounds, copied / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--n", type=int, default=60, help="rounds; each: 4 of ours, 1 of each docker exec"
    )
    parser.add_argument("--python", default="3.9", help="base image Python")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    if args.quick:  # two rounds, two starts, no image build
        args.n = 2

    image = ensure_base_image(args.python)
    client = docker_client()
    with tempfile.TemporaryDirectory() as tmp:
        # A fresh name, so the cold build cannot hit an image left by an earlier run.
        name = f"benchrepo{os.getpid()}"
        repo = make_repo(Path(tmp) / name, {"m.py": "X = 1\n", "requirements.txt": "six\n"})

        starts = []
        for _ in range(2 if args.quick else 5):
            t = time.perf_counter()
            box = DockerSandbox(DockerSandboxConfig(image=image), repo=repo)
            starts.append(time.perf_counter() - t)
            box.close()

        uncontained = DockerSandbox(
            DockerSandboxConfig(image=image, contain_processes=False), repo=repo
        )
        with uncontained, DockerSandbox(DockerSandboxConfig(image=image), repo=repo) as box:
            cid = box.container.id

            def docker_exec_cli() -> None:
                subprocess.run(
                    ["docker", "exec", "-w", box.repo_path, cid, "bash", "-lc", "true"],
                    check=True,
                    capture_output=True,
                )

            def docker_exec_sdk() -> None:
                client.api.exec_start(
                    client.api.exec_create(cid, ["bash", "-c", "true"], workdir=box.repo_path)
                )

            # Interleaved, so that both see the same machine (this one's timings drift).
            setup = "cd /tmp && export BENCH=1 && f() { :; } && alias ll='ls -l'"
            assert box.run(setup, session="bench").ok
            ours, cli, sdk, ping, off, left, kept = [], [], [], [], [], [], []
            for _ in range(args.n):
                ours += timed(lambda: box.run("true"), 4)
                kept += timed(lambda: box.run("true", session="bench"), 4)
                off += timed(lambda: uncontained.run("true"), 4)
                left += timed(lambda: box.run("setsid sleep 300 &"), 1)
                ping += timed(lambda: box._call("ping", wait=30), 4)
                cli += timed(docker_exec_cli, 1)
                sdk += timed(docker_exec_sdk, 1)
            box.write_file("/tmp/one_mb.bin", b"x" * (1 << 20))
            reads = timed(lambda: box.read_file("/tmp/one_mb.bin"), 20)
            # What the seal asks: the container's writable layer, listed on this machine
            # (envs/docker_changes.py) and by `docker diff`, interleaved.
            listed, diffed = [], []
            for _ in range(1 if args.quick else 3):
                if docker_changes.upper_dir(box.container) is not None:
                    listed += timed(lambda: docker_changes.changed_paths(box.container), 1)
                diffed += timed(lambda: box.container.diff(), 1)

        # A repository image: cold (empty wheelhouse cache, no image) then warm (cache hit).
        # Not in a quick run: the cold build installs from the package index.
        cold = warm = float("nan")
        if not args.quick:
            spec = RepoImageSpec(python=args.python)
            os.environ["PGS_CACHE_DIR"] = str(Path(tmp) / "cache")
            t = time.perf_counter()
            built = build_repo_image(repo, spec=spec)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            again = build_repo_image(repo, spec=spec)
            warm = time.perf_counter() - t
            assert again.cache_hit and again.image_id == built.image_id
            client.images.remove(built.tag, force=True)

    stdin_cpu, copied_cpu = start_cpu(client, image, 2 if args.quick else 20)

    row("DockerSandbox.run('true')", ours)
    row("  containment off", off)
    row("  in a persistent session", kept)
    row("  'setsid sleep 300 &' (ended)", left)
    row("helper round trip, no process", ping)
    row("docker exec CLI (mini-swe-agent)", cli)
    row("docker SDK exec_run", sdk)
    print(f"{'container start (to ready)':<34} p50 {statistics.median(starts):8.3f} s")
    print(f"{'start CPU, helper on stdin':<34}     {stdin_cpu:8.3f} s")
    print(f"{'start CPU, helper as an archive':<34}     {copied_cpu:8.3f} s")
    print(f"{'repo image build cold':<34}     {cold:8.2f} s")
    print(f"{'repo image build warm (cache)':<34}     {warm:8.3f} s")
    print(
        f"{'read 1 MB file':<34} p50 {statistics.median(reads) * 1e3:8.2f} ms   "
        f"{1 / statistics.median(reads):8.1f} MB/s"
    )
    if listed:
        row("seal: writable layer, listed here", listed)
    row("seal: docker diff", diffed)
    listing = statistics.median(diffed) / statistics.median(listed) if listed else float("nan")
    print(f"start_cpu_saving={copied_cpu / stdin_cpu:.2f}")
    print(f"seal_listing_speedup={listing:.0f}")
    print(f"sdk_exec_speedup={statistics.median(sdk) / statistics.median(ours):.1f}")
    print(f"exec_speedup={statistics.median(cli) / statistics.median(ours):.1f}")
    print(f"persistent_over_fresh={statistics.median(kept) / statistics.median(ours):.2f}")
    print(f"containment_overhead_ratio={statistics.median(ours) / statistics.median(off):.2f}")


if __name__ == "__main__":
    main()
