"""What a session reads from the settings files besides permissions: MCP servers and
skills directories.

Files (docs/reference/permissions.md): `~/.oharness/settings.json` (user), then at the project
root `.oharness/settings.json` (project) and `.oharness/settings.local.json` (local).
Keys read here: `mcpServers` (by name; a narrower scope's entry replaces a wider one's)
and `skillsDirs` (a list of directories; relative to the file's project root or `~`).
Skills directories always include `<project>/.oharness/skills` and `~/.oharness/skills`.
Everything under `permissions` belongs to `metaharness.permissions` and is not read here.

Rules it keeps: a file that exists but is not a JSON object is a `ConfigError` (one
sentence naming the file) — the session refuses to start rather than drop it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from .tools.mcp import McpServerConfig, parse_mcp_servers


class ConfigError(ValueError):
    pass


@dataclass
class SessionConfig:
    project_root: str
    mcp_servers: list[McpServerConfig] = field(default_factory=list)
    skills_dirs: list[str] = field(default_factory=list)


def project_root(cwd: str) -> str:
    probe = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return os.path.abspath(cwd)
        probe = parent


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path} could not be read: {exc.strerror or exc}") from None
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return value


def load_config(cwd: str) -> SessionConfig:
    root = project_root(cwd)
    home = os.path.expanduser("~")
    files = [
        (os.path.join(home, ".oharness", "settings.json"), home),
        (os.path.join(root, ".oharness", "settings.json"), root),
        (os.path.join(root, ".oharness", "settings.local.json"), root),
    ]
    servers: dict[str, McpServerConfig] = {}
    skills = [os.path.join(root, ".oharness", "skills"), os.path.join(home, ".oharness", "skills")]
    for path, base in files:
        data = _read(path)
        if data is None:
            continue
        try:
            for server in parse_mcp_servers(data.get("mcpServers"), path):
                servers[server.name] = server
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        extra = data.get("skillsDirs", [])
        if not isinstance(extra, list) or not all(isinstance(d, str) for d in extra):
            raise ConfigError(f"{path}: `skillsDirs` must be a list of directory paths")
        for directory in extra:
            resolved = os.path.normpath(os.path.join(base, os.path.expanduser(directory)))
            if resolved not in skills:
                skills.append(resolved)
    return SessionConfig(root, list(servers.values()), skills)
