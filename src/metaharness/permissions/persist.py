""""Always allow": writing one rule to a scope file, atomically (docs/reference/permissions.md).

Rules this module keeps: the write is read-modify-write under an exclusive `fcntl.flock` on
`<file>.lock`, through a temporary file in the same directory, `fsync`, `os.replace`; other keys
and their order are preserved; a target that cannot be parsed is never overwritten (the caller
treats the approval as "allow once"). The rule text comes from the engine (`Verdict.remember`),
which only ever produces the most specific rule; this module never widens it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["PersistError", "locked_json_update", "remember_rule", "file_lock"]


class PersistError(RuntimeError):
    """The rule could not be written; the message says why (the approval counts once)."""


@contextmanager
def file_lock(path: str) -> Iterator[None]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    descriptor = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


def _atomic_write(path: str, data: dict) -> None:
    directory = os.path.dirname(path) or "."
    descriptor, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def locked_json_update(path: str, update: Callable[[dict], dict], *, lock_path: str | None = None) -> dict:
    """Read `path` (missing = {}), apply `update`, write it back atomically under the lock."""
    with file_lock(lock_path or path):
        data = update(_read_object(path))
        _atomic_write(path, data)
        return data


def _exclude_local_file(path: str, project_root: str) -> None:
    """Keep a newly created local settings file out of git via info/exclude (never .gitignore)."""
    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", "-c", "core.fsmonitor=false", *args], cwd=project_root,
                                  capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None

    result = git("rev-parse", "--is-inside-work-tree")
    if result is None or result.returncode != 0:
        return
    rel = os.path.relpath(path, project_root)
    ignored = git("check-ignore", "-q", rel)
    if ignored is not None and ignored.returncode == 0:
        return
    exclude_file = git("rev-parse", "--git-path", "info/exclude")
    if exclude_file is None or exclude_file.returncode != 0:
        return
    exclude = os.path.join(project_root, exclude_file.stdout.strip())
    os.makedirs(os.path.dirname(exclude), exist_ok=True)
    with open(exclude, "a", encoding="utf-8") as handle:
        handle.write("\n/.oharness/settings.local.json\n")


def remember_rule(settings_file: str, rule: str, *, scope: str, project_root: str | None = None,
                  home: str | None = None) -> None:
    """Add `rule` to `permissions.allow` of `settings_file` (deduplicated), atomically.

    Raises PersistError when the file cannot be parsed or written. For `project` scope the trust
    hash is updated inside the same lock, so the workspace stays trusted.
    """
    created = not os.path.exists(settings_file)

    def add(data: dict) -> dict:
        perms = data.get("permissions")
        if perms is None:
            perms = data["permissions"] = {}
        if not isinstance(perms, dict):
            raise PersistError(f"{settings_file}: 'permissions' is not an object; nothing was written")
        allow = perms.setdefault("allow", [])
        if not isinstance(allow, list):
            raise PersistError(f"{settings_file}: 'permissions.allow' is not a list; nothing was written")
        if rule not in allow:
            allow.append(rule)
        return data

    try:
        if scope == "project" and project_root is not None and home is not None:
            from .settings import project_settings_hash, trust_file, _read_trust, _now

            with file_lock(settings_file):
                trusted_before = _read_trust(home).get("projects", {}).get(os.path.realpath(project_root))
                # Re-enter the update without re-locking the same file (flock is per open file).
                _update_unlocked(settings_file, add)
                if trusted_before is not None:
                    digest = project_settings_hash(project_root, home)

                    def retrust(data: dict) -> dict:
                        data.setdefault("projects", {})[os.path.realpath(project_root)] = {
                            "settings_sha256": digest, "trusted_at": _now()}
                        return data

                    locked_json_update(trust_file(home), retrust)
        else:
            locked_json_update(settings_file, add)
    except OSError as e:
        raise PersistError(f"{settings_file} cannot be written ({e.strerror}); nothing was written") from None
    if created and scope == "local" and project_root is not None:
        _exclude_local_file(settings_file, project_root)


def _read_object(path: str) -> dict:
    """A settings file's JSON object; a missing or empty file is {}; anything else refuses the write."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return {}
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PersistError(f"{path} cannot be parsed ({e}); nothing was written") from None
    if not isinstance(data, dict):
        raise PersistError(f"{path} is not a JSON object; nothing was written")
    return data


def _update_unlocked(path: str, update: Callable[[dict], dict]) -> None:
    data = _read_object(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    _atomic_write(path, update(data))


def always_allow(ctx, verdict, scope: str) -> str:
    """The whole "always allow" step for a session: write `verdict.remember[scope]` to the scope's
    file and add it to the session's in-memory rules (the only rule change a running session makes).

    Returns the rule written. Raises PersistError (nothing written; treat the approval as "allow
    once") or ValueError when the verdict offers no rule for that scope.
    """
    from .rules import parse_rule
    from .settings import scope_files

    if not verdict.remember or scope not in verdict.remember or scope not in ("user", "project", "local"):
        raise ValueError(f"this call offers no 'always allow' rule for scope {scope!r}")
    rule_text = verdict.remember[scope]
    path = scope_files(ctx.project_root, ctx.home)[scope]
    remember_rule(path, rule_text, scope=scope, project_root=ctx.project_root, home=ctx.home)
    ctx.rules.add(parse_rule(rule_text, "allow", scope, path))
    return rule_text
