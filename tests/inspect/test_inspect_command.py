"""The ``pgs inspect`` command: bad PATHs are one error line; ``--serve`` serves the page over
HTTP; ``--open`` uses ``$BROWSER`` and says so when there is no browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import pytest

from agent.cli import main
from tests.support.inspect_pages import parse, swe_agent_traj

ROOT = Path(__file__).resolve().parents[2]
PGS = [sys.executable, "-m", "agent.cli"]


def test_what_cannot_be_inspected_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_json = tmp_path / "notes.traj"
    not_json.write_text("not json")
    other_json = tmp_path / "config.json"
    other_json.write_text('{"model": "gpt-4o"}')
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        str(tmp_path / "nowhere"): "does not exist",
        str(not_json): "is not JSON",
        str(other_json): "is JSON but not a trajectory",
        str(empty): "holds no .traj file and no preds.json",
    }
    for path, words in cases.items():
        capsys.readouterr()
        assert main(["inspect", path]) == 2
        out, err_text = capsys.readouterr()
        lines = err_text.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pgs: error: ") and words in lines[0]
        assert out == ""
    assert list(tmp_path.glob("**/*.html")) == []


def small_traj(folder: Path) -> Path:
    data = swe_agent_traj()
    data["trajectory"][1]["observation"] = "line\n" * 2000  # long: cut, with its full text
    path = folder / "run" / "run.traj"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def pgs_process() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_serve_serves_the_page_and_its_full_texts_on_localhost(
    tmp_path: Path, pgs_process: list[subprocess.Popen[str]]
) -> None:
    traj = small_traj(tmp_path)
    proc = subprocess.Popen(
        [*PGS, "inspect", str(traj), "--serve", "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pgs_process.append(proc)
    assert proc.stdout is not None
    wrote = proc.stdout.readline()
    assert wrote.startswith(f"wrote {traj.with_suffix('.html')}")
    serving = proc.stdout.readline()
    match = re.match(r"serving (http://127\.0\.0\.1:(\d+)/run\.html) \(Ctrl-C stops\)", serving)
    assert match, serving
    with urllib.request.urlopen(match.group(1), timeout=10) as response:
        html = response.read().decode()
    assert response.status == 200 and "marshmallow-1867" in html
    link = parse(html).one("p", class_="cut").one("a").attrs["href"]
    with urllib.request.urlopen(urljoin(match.group(1), link), timeout=10) as response:
        assert response.read().decode("utf-8-sig") == "line\n" * 2000
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert "stopped" in proc.stderr.read()  # type: ignore[union-attr]


def test_open_uses_the_browser_there_is_and_says_when_there_is_none(tmp_path: Path) -> None:
    traj = small_traj(tmp_path)
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "browser.py"
    fake.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "TERM")}
    done = subprocess.run(
        [*PGS, "inspect", str(traj), "--open"],
        cwd=ROOT,
        env={**env, "BROWSER": f"{sys.executable} {fake} %s"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert opened.read_text() == traj.with_suffix(".html").resolve().as_uri()

    env.pop("BROWSER", None)
    bare = tmp_path / "bin"  # git (GitPython wants it), and no browser
    bare.mkdir()
    (bare / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    done = subprocess.run(
        [*PGS, "inspect", str(traj), "--open"],
        cwd=ROOT,
        env={**env, "PATH": str(bare)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "no web browser found here; open file://" in done.stderr
