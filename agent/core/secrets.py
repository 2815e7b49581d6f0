"""The host's secrets, and the one :class:`Redactor` every output of pgs goes through.

What pgs writes (the ``.traj``, ``.patch``, ``.pred``, ``preds.json``, a pull request's or
comment's body, the terminal, log and error lines) and what it sends to the model holds text
made by the model and by the repository. Any of it may hold a secret value of the host's
environment; a :class:`Redactor` replaces each one with :data:`REDACTED`.

A variable of the host's environment (and of ``sandbox.env``) is a secret when its value is at
least :data:`MIN_LENGTH` characters, is not a common word (:data:`COMMON_VALUES`) nor an absolute
path that exists (``SSH_AUTH_SOCK``, ``GIT_ASKPASS``), and

- its name is declared as a key (:func:`declare`: ``model.api_key_env``, ``GITHUB_TOKEN``,
  ``GH_TOKEN``, whatever their names), or
- a word of its name (split at ``_``, ``-`` and ``.``) ends with a secret word
  (:data:`SECRET_WORDS`: ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD``, ``PASS``,
  ``CREDENTIAL``, ``AUTH``, ...): ``MY_SERVICE_PASSWORD``, ``OPENAI_APIKEY``, but not ``PWD``,
  ``KEYBOARD`` or ``GIT_AUTHOR_NAME``, or
- its value looks like a key of a common format (:data:`KEY_FORMATS`: ``sk-…``, ``ghp_…``,
  ``github_pat_…``, ``AKIA…``, ``xox?-…``, ``hf_…``, ``glpat-…``, ``AIza…``, a JWT, a PEM
  private key, a URL with a password in it), whatever its name.

Shorter values are never redacted: replacing "1" or "true" everywhere would garble every output
and hide nothing. Each secret is also redacted in its JSON-escaped spellings (a ``.traj`` is
JSON), each line of a multi-line value on its own, and the password of a URL on its own.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Protocol

from agent.models.base import ModelConfig


class Configured(Protocol):
    """What :meth:`Redactor.for_config` reads of a run's configuration
    (:class:`agent.run.config.RunConfig`): the model (its key's variable) and the sandbox (its
    ``env``, when the kind has one)."""

    @property
    def model(self) -> ModelConfig: ...

    @property
    def sandbox(self) -> object: ...


REDACTED = "***"
#: Values shorter than this are never secrets (too short to redact without garbling output).
MIN_LENGTH = 8
#: Values that are never secrets, whatever the variable's name (compared lower-cased).
COMMON_VALUES = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled"}
)
#: A word of a variable's name that ends with one of these makes its value a secret.
SECRET_WORDS = (
    "KEY",
    "KEYS",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTH",
    "AUTHORIZATION",
    "COOKIE",
    "PRIVATE",
    "SIGNATURE",
)
#: Variables that are keys whatever the rules say; :func:`declare` adds a configuration's.
KNOWN_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "HF_TOKEN")
#: Values that are keys whatever their variable's name.
KEY_FORMATS = re.compile(
    r"""
      sk-[A-Za-z0-9_-]{16,}                       # OpenAI, Anthropic (sk-ant-...)
    | gh[pousr]_[A-Za-z0-9]{30,}                  # GitHub tokens
    | github_pat_[A-Za-z0-9_]{20,}
    | (?:AKIA|ASIA)[0-9A-Z]{16}                   # AWS access key ids
    | xox[abprs]-[A-Za-z0-9-]{10,}                # Slack
    | hf_[A-Za-z0-9]{30,}                         # Hugging Face
    | glpat-[A-Za-z0-9_-]{20,}                    # GitLab
    | AIza[0-9A-Za-z_-]{35}                       # Google API keys
    | eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*   # JWTs
    | -----BEGIN[ A-Z]*PRIVATE\ KEY-----          # PEM private keys
    | [a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@\S+  # URLs with a password
    """,
    re.VERBOSE,
)
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^/\s@]+)@")

_declared: set[str] = set(KNOWN_KEYS)


def declare(names: Iterable[str]) -> None:
    """Treat these variables as keys, whatever their names, in every redactor this process
    builds from now on (a configuration's ``model.api_key_env``)."""
    _declared.update(n for n in names if n)


def secret_name(name: str) -> bool:
    """Whether a variable's name says that its value is a secret (:data:`SECRET_WORDS`)."""
    words = re.split(r"[_.\-]+", name.upper())
    return any(w.endswith(SECRET_WORDS) for w in words if w)


def redactable(value: str) -> bool:
    """Long enough and unusual enough to be redacted wherever it appears."""
    value = value.strip()
    if len(value) < MIN_LENGTH or value.lower() in COMMON_VALUES:
        return False
    return not (value.startswith("/") and "\n" not in value and os.path.exists(value))


def is_secret(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` is a secret (see the module's docstring)."""
    if not redactable(value):
        return False
    return name in _declared or secret_name(name) or bool(KEY_FORMATS.search(value))


def host_secrets(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: value} of the secrets of ``environ`` (by default the host's environment)."""
    environ = os.environ if environ is None else environ
    return {n: v for n, v in environ.items() if is_secret(n, v)}


class Redactor:
    """Replaces each secret value with :data:`REDACTED`."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        #: value (and each spelling of it) → the variable's name
        self.names: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            for spelling in _spellings(value):
                if redactable(spelling):
                    self.names.setdefault(spelling, name)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, extra: Mapping[str, str] | None = None
    ) -> Redactor:
        """The secrets of ``environ`` (by default the host's) and those of ``extra``."""
        return cls({**host_secrets(extra or {}), **host_secrets(environ)})

    @classmethod
    def for_config(cls, config: Configured) -> Redactor:
        """The host's secrets, the keys ``config`` names (declared for the rest of the process)
        and the secret-looking variables of its ``sandbox.env``."""
        declare([config.model.api_key_env])
        sandbox_env = getattr(config.sandbox, "env", None) or {}
        return cls.from_env(extra={str(k): str(v) for k, v in sandbox_env.items()})

    @cached_property
    def _ordered(self) -> list[str]:
        # the longest spelling first: a value that holds another is replaced whole
        return sorted(self.names, key=len, reverse=True)

    def redact(self, text: str) -> str:
        # str.replace per value: 2.5x faster than one regular expression of them all on 5 MB
        for value in self._ordered:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def found(self, text: str) -> list[str]:
        """The names of the variables whose values ``text`` holds, sorted."""
        return sorted({self.names[v] for v in self._ordered if v in text})

    def __bool__(self) -> bool:
        return bool(self.names)


def _spellings(value: str) -> set[str]:
    """The value, as JSON writes it (escaped, with and without ASCII escapes), each of its
    lines, and a URL's password."""
    out = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    if "\n" in value:
        out.update(line.strip() for line in value.splitlines())
    out.update(m.group(1) for m in _URL_PASSWORD.finditer(value))
    return {s for s in out if s}


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (its arguments merged in); without
    a ``redactor``, the host's secrets as they are when the record is made (keys declared
    after the filter was installed included)."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = (self.redactor or Redactor.from_env()).redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
