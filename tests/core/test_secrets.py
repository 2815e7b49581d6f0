"""The host's secrets and the redactor every output goes through (agent/core/secrets.py)."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.secrets import (
    MIN_LENGTH,
    REDACTED,
    RedactingFilter,
    Redactor,
    host_secrets,
    is_secret,
)
from agent.core.trajectory_file import Trajectory
from agent.run.config import load_config

CANARY = f"canary-{uuid.uuid4().hex[:16]}"


@pytest.mark.parametrize(
    "name",
    [
        "MY_SERVICE_PASSWORD",
        "OPENAI_API_KEY",
        "OPENAI_APIKEY",
        "DB_PASS",
        "AWS_SECRET_ACCESS_KEY",
        "NPM_TOKEN",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "HTTP_AUTH",
        "session-cookie",
        "GITHUB_TOKEN",
    ],
)
def test_a_secret_looking_name_makes_its_value_a_secret(name: str) -> None:
    assert is_secret(name, CANARY)
    assert Redactor.from_env({name: CANARY}).redact(f"x {CANARY} y") == f"x {REDACTED} y"


@pytest.mark.parametrize(
    "name", ["PWD", "OLDPWD", "PATH", "KEYBOARD_LAYOUT", "GIT_AUTHOR_NAME", "HOSTNAME", "LANG"]
)
def test_ordinary_names_are_not_secrets(name: str) -> None:
    assert not is_secret(name, CANARY)


@pytest.mark.parametrize(
    "value",
    [
        "sk-" + "a1B2" * 10,
        "sk-ant-api03-" + "x" * 40,
        "ghp_" + "A" * 36,
        "github_pat_" + "1" * 30,
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "xoxb-123456789-abcdef",
        "hf_" + "q" * 34,
        "glpat-" + "z" * 20,
        "AIza" + "S" * 35,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJl",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH",
        "https://alice:s3cretpassw0rd@pypi.example.com/simple",
    ],
)
def test_a_key_shaped_value_is_a_secret_whatever_its_name(value: str) -> None:
    assert is_secret("SOME_SETTING", value)


def test_short_common_and_path_values_are_never_redacted(tmp_path: Path) -> None:
    environ = {
        "FEATURE_TOKEN": "1",
        "USE_AUTH": "true",
        "DB_PASS": "x" * (MIN_LENGTH - 1),
        "MY_KEY": "disabled",
        "SSH_AUTH_SOCK": str(tmp_path),
    }
    assert host_secrets(environ) == {}
    assert Redactor.from_env(environ).redact("1 true disabled") == "1 true disabled"


def test_json_spellings_lines_and_url_passwords_are_redacted() -> None:
    quoted = 'pa"ss\\wörd-' + uuid.uuid4().hex[:8]
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\n-----END RSA PRIVATE KEY-----"
    url = "https://bob:hunter2hunter2@index.example/simple"
    red = Redactor.from_env({"MY_PASSWORD": quoted, "DEPLOY_KEY": pem, "PIP_INDEX_URL": url})
    for text in (
        json.dumps({"x": quoted}),
        json.dumps({"x": quoted}, ensure_ascii=False),
        "line: MIIEowIBAAKCAQEA1234",
        "pip: fetching https://bob:hunter2hunter2@index.example/simple/x",
        "password was hunter2hunter2",
    ):
        cleaned = red.redact(text)
        for secret in (quoted, "MIIEowIBAAKCAQEA1234", "hunter2hunter2"):
            assert secret not in cleaned and json.dumps(quoted)[1:-1] not in cleaned
    assert red.found(f"a {quoted} b") == ["MY_PASSWORD"]


def test_the_configured_key_variable_is_a_secret_whatever_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGS_TEST_PLAIN_NAME", CANARY)
    assert Redactor.from_env().redact(CANARY) == CANARY
    config = load_config(None, {"model": {"name": "m", "api_key_env": "PGS_TEST_PLAIN_NAME"}})
    assert Redactor.for_config(config).redact(CANARY) == REDACTED
    # declared for the rest of the process: error and log lines redact it too
    assert Redactor.from_env().redact(CANARY) == REDACTED


def test_sandbox_env_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(
        None,
        {"model": {"name": "m"}, "sandbox": {"type": "local", "env": {"SERVICE_TOKEN": CANARY}}},
    )
    assert Redactor.for_config(config).redact(f"[{CANARY}]") == f"[{REDACTED}]"


def test_the_trajectory_is_written_redacted(tmp_path: Path) -> None:
    traj = Trajectory(
        tmp_path / "t.traj",
        replay_config={},
        redactor=Redactor.from_env({"MY_SERVICE_PASSWORD": CANARY}),
    )
    traj.steps.append({"observation": f"password={CANARY}", "action": f"echo '{CANARY}'"})
    traj.save()
    text = (tmp_path / "t.traj").read_text()
    assert CANARY not in text and "password=***" in text


def test_log_lines_are_redacted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", CANARY)
    logger = logging.getLogger("pgs-test-secrets")
    caplog.handler.addFilter(RedactingFilter())
    logger.warning("request with %s", CANARY)
    assert CANARY not in caplog.text and "request with ***" in caplog.text


@given(st.text(), st.text(alphabet="abcdefXYZ0123-_", min_size=MIN_LENGTH, max_size=40))
def test_a_redacted_text_never_holds_the_secret(text: str, secret: str) -> None:
    red = Redactor({"MY_TOKEN": secret})
    cleaned = red.redact(text + secret + text)
    assert secret not in cleaned.replace(REDACTED, "\0")
