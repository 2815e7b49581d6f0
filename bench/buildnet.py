"""What the build network costs: one layer built through pgs's build proxy (no network, the
package indexes only) side by side with the same steps in a `docker build` on the host network
(what pgs did before issue 21).

    .venv/bin/python bench/buildnet.py [--image pgs-base:py3.9] [--packages "six iniconfig"]

Prints the wall time of each build (the same steps: a venv, pip's bootstrap, the packages, each
with pip's cache off so both download everything), the proxy's start and stop, and the time of
one pip resolution through each. Last line: proxy_over_host=<proxy build s / host build s>.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

from envs.docker_util import docker_client, labels
from envs.images import IMAGE_ENV, Layer, venv_steps
from envs.images.build import docker_build
from envs.images.buildnet import CA_VARIABLES, build_network, ca_bundle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="pgs-base:py3.9")
    parser.add_argument("--packages", default="six iniconfig attrs")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a short run for CI: it ends with its last line; the figures mean nothing",
    )
    args = parser.parse_args()
    client = docker_client()
    stamp = str(time.time_ns())  # no cache hit: both build for real
    steps = [
        f"echo {stamp}",
        *venv_steps(),
        f"python -m pip install --no-cache-dir -q {args.packages}",
    ]
    if args.quick:  # the two ways of building, of one step that needs no package index
        steps = [f"echo {stamp}"]
    layer = Layer(base=args.image, steps=steps, labels=labels(kind="bench"), env=IMAGE_ENV)

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        with build_network(Path(folder), network=True):
            started = time.perf_counter() - start
            start = time.perf_counter()
        stopped = time.perf_counter() - start
    print(f"proxy start {started * 1000:.1f} ms, stop {stopped * 1000:.1f} ms")

    tags = [f"pgs-bench-proxy:{stamp}", f"pgs-bench-host:{stamp}"]
    try:
        start = time.perf_counter()
        layer.build(client, tags[0])
        proxy_s = time.perf_counter() - start
        print(f"layer through the build proxy (network none): {proxy_s:.1f} s")

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in IMAGE_ENV.items())
        ca = " ".join(f"{k}=/etc/pgs-host-ca.crt" for k in CA_VARIABLES)
        script = " && ".join(f"( {s} )" for s in steps)
        with tempfile.TemporaryDirectory() as context:
            bundle = ca_bundle()
            Path(context, "ca.crt").write_bytes(Path(bundle).read_bytes() if bundle else b"")
            Path(context, "Dockerfile").write_text(
                f"FROM {args.image}\nENV {env}\nCOPY ca.crt /etc/pgs-host-ca.crt\n"
                f"RUN export {ca} && {script}\n"
            )
            start = time.perf_counter()
            docker_build(client, tag=tags[1], network_mode="host", path=context)
            host_s = time.perf_counter() - start
        print(f"docker build on the host network (before): {host_s:.1f} s")
    finally:
        for tag in tags:
            with contextlib.suppress(Exception):
                client.images.remove(tag, force=True)
    print(f"proxy_over_host={proxy_s / host_s:.2f}")


if __name__ == "__main__":
    main()
