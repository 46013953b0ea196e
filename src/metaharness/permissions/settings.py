"""Settings scopes, parsing, merging and workspace trust (docs/reference/permissions.md).

What belongs here: finding the three scope files (and policy files), reading them strictly, turning
their rule strings into rules with their origin, merging them across scopes, and the workspace trust record.

Rules this module keeps:
* an unreadable or unparsable file, an invalid deny/ask rule and a `hooks` key are load *errors*
  (the caller refuses to start); an invalid allow rule is a warning and is ignored — ignoring an
  allow is always safe, dropping a deny never is;
* lists are sets and denials accumulate; untrusted project-scope allows are listed as ignored,
  never silently dropped from the listing;
* settings are read once: nothing here is called again during a session.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any, Sequence

from .context import Context, RuleSet, builtin_rules
from .modes import MODES, WORKSPACE_MODES
from .rules import Rule, RuleError, parse_rule

__all__ = [
    "LoadIssue", "ListedRule", "Settings", "load_settings", "find_project_root", "scope_files",
    "trust_workspace", "revoke_trust", "project_settings_hash", "trust_file",
]

_KNOWN_KEYS = {"defaultMode", "workspaceMode", "writableRoots", "allow", "ask", "deny",
               "disableBypassMode", "decisionTrail"}
_WS_ORDER = {"read-only": 0, "workspace-write": 1, "full-access": 2}


@dataclass(frozen=True, slots=True)
class LoadIssue:
    severity: str  # error | warning
    message: str
    file: str | None = None
    list: str | None = None
    rule: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        what = f"{self.list} rule {self.rule!r}: " if self.rule is not None else ""
        return f"{where}{what}{self.message}"


@dataclass(frozen=True, slots=True)
class ListedRule:
    text: str
    behavior: str
    scope: str
    file: str | None
    status: str = "active"  # active | ignored (workspace not trusted) | ignored (invalid: …)
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class Settings:
    project_root: str
    home: str
    cwd: str
    rules: RuleSet
    listed: list[ListedRule]
    mode: str = "manual"
    mode_source: str = "default"
    workspace_mode: str = "workspace-write"
    workspace_mode_source: str = "default"
    writable_roots: tuple[str, ...] = ()
    trusted: bool = False
    trail_enabled: bool = True
    disable_bypass_file: str | None = None
    bypass_refused: str | None = None  # explicit --mode bypass forbidden: message naming the file
    errors: list[LoadIssue] = field(default_factory=list)
    warnings: list[LoadIssue] = field(default_factory=list)
    files: list[tuple[str, str, bool]] = field(default_factory=list)  # (scope, path, exists)
    # What trusting the workspace would turn on, one line each: the project-scope allow
    # rules, writableRoots and defaultMode "accept-edits" that are ignored until it is trusted.
    untrusted_grants: list[str] = field(default_factory=list)
    project_hash: str = ""

    @property
    def ok(self) -> bool:
        return not self.errors

    def context(self, *, mode: str | None = None, workspace_mode: str | None = None, can_ask: bool = True,
                tmp_roots: Sequence[str] = ("/tmp",)) -> Context:
        """An engine context for a session started with these settings."""
        return Context(
            rules=self.rules, project_root=self.project_root, home=self.home, cwd=self.cwd,
            mode=mode or self.mode, workspace_mode=workspace_mode or self.workspace_mode,
            writable_roots=self.writable_roots, tmp_roots=tuple(tmp_roots), trusted=self.trusted, can_ask=can_ask,
        )


def _git(args: list[str], cwd: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-c", "core.fsmonitor=false", *args], cwd=cwd, capture_output=True,
                              text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None


def find_project_root(cwd: str) -> tuple[str, bool]:
    """(project root, inside a git worktree)."""
    result = _git(["rev-parse", "--show-toplevel"], cwd)
    if result is not None and result.returncode == 0 and result.stdout.strip():
        return os.path.realpath(result.stdout.strip()), True
    return os.path.realpath(cwd), False


def trust_file(home: str) -> str:
    return os.path.join(home, ".oharness", "trust.json")


def scope_files(project_root: str, home: str) -> dict[str, str]:
    return {
        "user": os.path.join(home, ".oharness", "settings.json"),
        "project": os.path.join(project_root, ".oharness", "settings.json"),
        "local": os.path.join(project_root, ".oharness", "settings.local.json"),
    }


def _local_is_demoted(path: str, project_root: str, in_git: bool) -> bool:
    """A tracked or symlinked local file is read as project scope."""
    if os.path.islink(path):
        return True
    if not in_git or not os.path.exists(path):
        return False
    result = _git(["ls-files", "--error-unmatch", os.path.relpath(path, project_root)], project_root)
    if result is None:
        return True  # git failed inside a repository: treat as tracked
    return result.returncode == 0


def project_settings_hash(project_root: str, home: str | None = None, in_git: bool | None = None) -> str:
    """SHA-256 of the bytes of every file read at project scope, in order."""
    files = scope_files(project_root, home or os.path.expanduser("~"))
    if in_git is None:
        in_git = find_project_root(project_root)[1]
    digest = hashlib.sha256()
    for scope in ("project", "local"):
        path = files[scope]
        if scope == "local" and not _local_is_demoted(path, project_root, in_git):
            continue
        try:
            with open(path, "rb") as handle:
                digest.update(handle.read())
        except OSError:
            pass
    return digest.hexdigest()


def _read_trust(home: str) -> dict:
    try:
        with open(trust_file(home), "rb") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def trust_workspace(project_root: str, home: str) -> str:
    """Record trust for the project's current settings. Returns the hash recorded."""
    from .persist import locked_json_update

    root = os.path.realpath(project_root)
    digest = project_settings_hash(root, home)

    def update(data: dict) -> dict:
        data.setdefault("projects", {})[root] = {"settings_sha256": digest, "trusted_at": _now()}
        return data

    locked_json_update(trust_file(home), update)
    return digest


def revoke_trust(project_root: str, home: str) -> bool:
    from .persist import locked_json_update

    root = os.path.realpath(project_root)
    removed = False

    def update(data: dict) -> dict:
        nonlocal removed
        removed = data.get("projects", {}).pop(root, None) is not None
        return data

    if os.path.exists(trust_file(home)):
        locked_json_update(trust_file(home), update)
    return removed


def _parse_file(path: str, scope: str, errors: list[LoadIssue]) -> dict | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        errors.append(LoadIssue("error", f"cannot be read ({e.strerror})", path))
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        errors.append(LoadIssue("error", "is not valid UTF-8", path))
        return None
    except json.JSONDecodeError as e:
        errors.append(LoadIssue("error", f"is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", path))
        return None
    if not isinstance(data, dict):
        errors.append(LoadIssue("error", "is not a JSON object", path))
        return None
    return data


def _section(data: dict, path: str, warnings: list[LoadIssue], errors: list[LoadIssue]) -> dict:
    if "hooks" in data or (isinstance(data.get("permissions"), dict) and "hooks" in data["permissions"]):
        errors.append(LoadIssue("error", "has a 'hooks' key: hooks from settings files are not in this version", path))
    if "permissions" not in data:
        # The short form: the top-level object is read as if it were under `permissions`.
        data = {"permissions": {field: field_value for field, field_value in data.items() if field in _KNOWN_KEYS},
                **{field: field_value for field, field_value in data.items() if field not in _KNOWN_KEYS}}
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        errors.append(LoadIssue("error", "'permissions' is not an object", path))
        perms = {}
    merged: dict[str, Any] = dict(perms)
    for key in ("allow", "ask", "deny"):
        if key in data:
            # The short form; when both forms are present the lists are united.
            top = data[key]
            merged[key] = list(merged.get(key, []) or []) + (top if isinstance(top, list) else [top])
    for key in data:
        # `mcpServers` and `skillsDirs` are the session's other keys (oharness.config reads them).
        if key not in ("permissions", "allow", "ask", "deny", "hooks", "$schema", "mcpServers", "skillsDirs"):
            warnings.append(LoadIssue("warning", f"unknown key {key!r} ignored", path))
    for key in perms:
        if key not in _KNOWN_KEYS and key != "hooks":
            warnings.append(LoadIssue("warning", f"unknown key 'permissions.{key}' ignored", path))
    return merged


def load_settings(
    cwd: str,
    *,
    home: str | None = None,
    cli_mode: str | None = None,
    cli_workspace_mode: str | None = None,
    policy_files: Sequence[str] = (),
    scopes: bool = True,
    no_trail: bool = False,
) -> Settings:
    """Read and merge every scope for a session starting in `cwd`. Never raises on bad input:
    problems are in `.errors` (refuse to start) and `.warnings`."""
    home = os.path.normpath(home or os.path.expanduser("~"))
    cwd = os.path.realpath(cwd)
    project_root, in_git = find_project_root(cwd)
    errors: list[LoadIssue] = []
    warnings: list[LoadIssue] = []
    files = scope_files(project_root, home)
    sources: list[tuple[str, str]] = []
    if scopes:
        sources.append(("user", files["user"]))
        sources.append(("project", files["project"]))
        local_scope = "project" if _local_is_demoted(files["local"], project_root, in_git) else "local"
        if local_scope == "project" and os.path.lexists(files["local"]):
            warnings.append(LoadIssue("warning", "is tracked by git or a symbolic link: read as project scope", files["local"]))
        sources.append((local_scope, files["local"]))
    for policy_file in policy_files:
        sources.append(("file", os.path.abspath(policy_file)))
        if not os.path.exists(policy_file):
            errors.append(LoadIssue("error", "does not exist", os.path.abspath(policy_file)))

    digest = project_settings_hash(project_root, home, in_git) if scopes else ""
    entry = _read_trust(home).get("projects", {}).get(project_root) if scopes else None
    trusted = bool(entry and entry.get("settings_sha256") == digest)

    rules = RuleSet()
    listed: list[ListedRule] = []
    untrusted_grants: list[str] = []
    for builtin in builtin_rules(project_root, home):
        rules.add(builtin)
        listed.append(ListedRule(builtin.text, "deny", "builtin", None))

    mode_votes: dict[str, tuple[str, str]] = {}
    ws_votes: list[tuple[str, str, str]] = []  # (value, scope, file)
    roots: list[str] = []
    disable_bypass_file: str | None = None
    trail_votes: dict[str, bool] = {}
    file_info: list[tuple[str, str, bool]] = []

    for scope, path in sources:
        exists = os.path.lexists(path)
        file_info.append((scope, path, exists))
        data = _parse_file(path, scope, errors) if exists else None
        if data is None:
            continue
        sec = _section(data, path, warnings, errors)
        for behavior in ("deny", "ask", "allow"):
            values = sec.get(behavior, []) or []
            if not isinstance(values, list):
                errors.append(LoadIssue("error", f"'{behavior}' is not a list", path))
                continue
            for text in values:
                if not isinstance(text, str):
                    issue = LoadIssue("error" if behavior != "allow" else "warning", "is not a string", path, behavior, repr(text))
                    (errors if behavior != "allow" else warnings).append(issue)
                    continue
                try:
                    rule = parse_rule(text, behavior, scope, path)
                except RuleError as e:
                    if behavior == "allow":
                        warnings.append(LoadIssue("warning", f"invalid ({e}); ignored", path, behavior, text))
                    else:
                        errors.append(LoadIssue("error", f"invalid ({e})", path, behavior, text))
                    listed.append(ListedRule(text, behavior, scope, path, f"ignored (invalid: {e})"))
                    continue
                for warning in rule.warnings:
                    warnings.append(LoadIssue("warning", warning, path, behavior, text))
                if behavior == "allow" and scope == "project" and not trusted:
                    listed.append(ListedRule(text, behavior, scope, path, "ignored (workspace not trusted)", rule.warnings))
                    untrusted_grants.append(f"allow {text}")
                    continue
                rules.add(rule)
                listed.append(ListedRule(text, behavior, scope, path, "active", rule.warnings))
        default_mode = sec.get("defaultMode")
        if default_mode is not None:
            if default_mode not in MODES:
                warnings.append(LoadIssue("warning", f"defaultMode {default_mode!r} is not a mode; ignored", path))
            else:
                mode_votes[scope] = (default_mode, path)
                if default_mode == "accept-edits" and scope == "project" and not trusted:
                    untrusted_grants.append("defaultMode accept-edits")
        workspace_mode = sec.get("workspaceMode")
        if workspace_mode is not None:
            if workspace_mode not in WORKSPACE_MODES:
                errors.append(LoadIssue("error", f"workspaceMode {workspace_mode!r} is not one of {', '.join(WORKSPACE_MODES)}", path))
            else:
                ws_votes.append((workspace_mode, scope, path))
        writable_roots = sec.get("writableRoots")
        if writable_roots is not None:
            if not isinstance(writable_roots, list) or not all(isinstance(root, str) for root in writable_roots):
                warnings.append(LoadIssue("warning", "writableRoots is not a list of strings; ignored", path))
            elif scope == "project" and not trusted:
                warnings.append(LoadIssue("warning", "writableRoots ignored (workspace not trusted)", path))
                untrusted_grants.extend(f"writableRoots {entry_}" for entry_ in writable_roots)
            else:
                for entry_ in writable_roots:
                    expanded = home + entry_[1:] if entry_.startswith("~/") or entry_ == "~" else entry_
                    full = os.path.realpath(os.path.join(project_root, expanded))
                    if full in ("/", os.path.realpath(home)):
                        warnings.append(LoadIssue("warning", f"writableRoots entry {entry_!r} ignored (use full-access instead)", path))
                    else:
                        roots.append(full)
        if sec.get("disableBypassMode") is True and disable_bypass_file is None:
            disable_bypass_file = path
        decision_trail = sec.get("decisionTrail")
        if decision_trail is not None:
            if not isinstance(decision_trail, bool):
                warnings.append(LoadIssue("warning", "decisionTrail is not a boolean; ignored", path))
            elif scope == "project":
                warnings.append(LoadIssue("warning", "decisionTrail in project scope is ignored (the trail belongs to the machine)", path))
            else:
                trail_votes[scope] = decision_trail

    settings = Settings(project_root=project_root, home=home, cwd=cwd, rules=rules, listed=listed,
                        trusted=trusted, errors=errors, warnings=warnings, files=file_info, project_hash=digest,
                        writable_roots=tuple(dict.fromkeys(roots)), disable_bypass_file=disable_bypass_file,
                        untrusted_grants=untrusted_grants)

    # workspaceMode: the most restrictive of every scope and the command line.
    candidates = list(ws_votes)
    if cli_workspace_mode is not None:
        candidates.append((cli_workspace_mode, "command line", "--workspace-mode"))
    if candidates:
        value, scope, path = min(candidates, key=lambda char: _WS_ORDER[char[0]])
        settings.workspace_mode, settings.workspace_mode_source = value, f"{scope}: {path}" if scope != "command line" else "command line"
        if cli_workspace_mode is not None and _WS_ORDER[cli_workspace_mode] > _WS_ORDER[value]:
            warnings.append(LoadIssue("warning", f"--workspace-mode {cli_workspace_mode} does not widen workspaceMode {value}", path))

    # Mode.
    settings.mode, settings.mode_source = _choose_mode(cli_mode, mode_votes, trusted, disable_bypass_file, warnings, settings)

    # Trail: local > user; project ignored; the command line can turn it off.
    trail = trail_votes.get("local", trail_votes.get("user", trail_votes.get("file", True)))
    settings.trail_enabled = bool(trail) and not no_trail
    return settings


def _choose_mode(cli_mode, votes, trusted, disable_file, warnings, settings) -> tuple[str, str]:
    if cli_mode is not None:
        if cli_mode == "bypass" and disable_file:
            settings.bypass_refused = f"bypass mode is disabled by disableBypassMode in {disable_file}"
            return "manual", "default"
        return cli_mode, "command line"
    for scope in ("local", "project", "user", "file"):
        if scope not in votes:
            continue
        value, path = votes[scope]
        allowed = True
        if value == "bypass" and (scope not in ("user", "file") or disable_file):
            allowed = False
        if value == "auto" and scope == "project":
            allowed = False
        if value == "accept-edits" and scope == "project" and not trusted:
            allowed = False
        if not allowed:
            warnings.append(LoadIssue("warning", f"defaultMode {value!r} is not accepted from {scope} scope; ignored", path))
            continue
        return value, f"{scope}: {path}"
    return "manual", "default"
