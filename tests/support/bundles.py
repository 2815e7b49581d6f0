"""Tool bundles made for a test (a config.yaml and bin/ scripts that echo what they get), and the
tool and argument specs that go in their configs."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

ECHO_ARGV = """\
#!/usr/bin/env python3
import json, sys
print(json.dumps(sys.argv[1:]))
"""


ECHO_STDIN = """\
#!/usr/bin/env python3
import json, sys
print(json.dumps({"argv": sys.argv[1:], "stdin": sys.stdin.read()}))
"""


def make_bundle(
    root: Path, name: str, config: str | dict[str, Any], scripts: dict[str, str] | None = None
) -> Path:
    """A bundle folder: config.yaml plus bin/ scripts (default: one that echoes argv as JSON)."""
    folder = root / name
    (folder / "bin").mkdir(parents=True)
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    (folder / "config.yaml").write_text(text)
    if scripts is None:
        raw = yaml.safe_load(text)
        scripts = {tool: ECHO_ARGV for tool in raw.get("tools") or {}}
    for script, source in scripts.items():
        target = folder / "bin" / script
        target.write_text(source)
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def tool(name: str, signature: str | None, arguments: list[dict[str, Any]], **extra: Any) -> dict:
    spec: dict[str, Any] = {"docstring": f"the {name} tool", "arguments": arguments, **extra}
    if signature is not None:
        spec["signature"] = signature
    return {"tools": {name: spec}}


def arg(name: str, required: bool = True, type: str = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type, "description": f"the {name}", "required": required, **extra}
