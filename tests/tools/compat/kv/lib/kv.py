"""The registry file (JSON) named by SWE_AGENT_ENV_FILE; a missing key falls back to the
environment, as SWE-agent's registry does."""

import json
import os


def _path():
    return os.environ.get("SWE_AGENT_ENV_FILE", "/root/.swe-agent-env")


def load():
    try:
        with open(_path()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def get(key, default=""):
    return load().get(key, os.environ.get(key, default))


def put(key, value):
    data = load()
    data[key] = value
    with open(_path(), "w") as f:
        json.dump(data, f)
