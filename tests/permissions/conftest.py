"""Fixture of the permission test cases: a trusted git worktree `…/w/proj` with `.env`, `src/`, `build/`,
symlinks `link-env → .env`, `keys → ~/.ssh`, `a → /etc`, a sibling `proj-evil/`, and HOME `…/home/u`.

The tree lives under /var/tmp (not /tmp), because /tmp is always in the writable set (the permission rule “workspaceMode — a policy gate, not a sandbox”) and the
spec's fixture paths are outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

import pytest

from metaharness.permissions import (
    Context, ExternalDecision, Verdict, decide, load_settings, notation_call, trust_workspace,
)

from permissions_rules import R  # noqa: E402  (the permission test cases' rules; a module of its own so tests can import it)


@dataclass
class World:
    base: str
    root: str
    home: str
    evil: str
    env: dict = field(default_factory=dict)

    # -- settings ---------------------------------------------------------------------------
    def path(self, scope: str) -> str:
        return {
            "user": os.path.join(self.home, ".oharness", "settings.json"),
            "project": os.path.join(self.root, ".oharness", "settings.json"),
            "local": os.path.join(self.root, ".oharness", "settings.local.json"),
        }[scope]

    def write_settings(self, scope: str, data) -> str:
        p = self.path(scope)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(data if isinstance(data, str) else json.dumps(data))
        return p

    def clear_settings(self) -> None:
        for s in ("user", "project", "local"):
            try:
                os.unlink(self.path(s))
            except FileNotFoundError:
                pass

    def trust(self) -> None:
        trust_workspace(self.root, self.home)

    def setup(self, *, project=R, user=None, local=None, trusted=True):
        self.clear_settings()
        if project is not None:
            self.write_settings("project", project)
        if user is not None:
            self.write_settings("user", user)
        if local is not None:
            self.write_settings("local", local)
        if trusted:
            self.trust()
        else:
            from metaharness.permissions import revoke_trust
            revoke_trust(self.root, self.home)
        return self.load()

    def load(self, **kw):
        return load_settings(self.root, home=self.home, **kw)

    def ctx(self, settings=None, *, mode=None, ws=None, can_ask=True) -> Context:
        s = settings or self.load()
        assert s.ok, [str(e) for e in s.errors]
        return s.context(mode=mode, workspace_mode=ws, can_ask=can_ask)

    def call(self, text: str, **kw):
        return notation_call(self.sub(text), self.root, **kw)

    def sub(self, text: str) -> str:
        return text.replace("/w/proj", self.root).replace("/home/u", self.home)

    def decide(self, text: str, ctx: Context, external: ExternalDecision | None = None) -> Verdict:
        return decide(self.call(text), ctx, external)


def _make_world() -> World:
    base = tempfile.mkdtemp(prefix="ohperm-", dir="/var/tmp")
    base = os.path.realpath(base)
    root = os.path.join(base, "w", "proj")
    home = os.path.join(base, "home", "u")
    evil = os.path.join(base, "w", "proj-evil")
    for d in (root, home, evil, os.path.join(root, "src"), os.path.join(root, "build"),
              os.path.join(root, "config"), os.path.join(home, ".ssh"), os.path.join(home, ".aws")):
        os.makedirs(d, exist_ok=True)
    for f, text in ((".env", "KEY=1\n"), ("src/a.py", "x = 1\n"), (os.path.join(home, ".ssh", "id_rsa"), "k\n"),
                    (os.path.join(home, ".aws", "credentials"), "c\n")):
        with open(os.path.join(root, f), "w") as fh:
            fh.write(text)
    os.symlink(os.path.join(root, ".env"), os.path.join(root, "link-env"))
    os.symlink(os.path.join(home, ".ssh"), os.path.join(root, "keys"))
    os.symlink("/etc", os.path.join(root, "a"))
    subprocess.run(["git", "init", "-q", root], check=True)
    return World(base, root, home, evil)


@pytest.fixture(scope="session")
def world_session():
    w = _make_world()
    yield w
    shutil.rmtree(w.base, ignore_errors=True)


@pytest.fixture
def world(world_session, monkeypatch):
    monkeypatch.setenv("HOME", world_session.home)
    world_session.setup()
    return world_session


# The real-shell oracle and the engine world it is judged against (tests/permissions/bash_oracle.py),
# one of each per module: the fuzzers, their regressions and the interpreter-code cases share them.
@pytest.fixture(scope="module")
def oracle():
    from bash_oracle import BashOracle
    o = BashOracle()
    yield o
    o.close()


@pytest.fixture(scope="module")
def engine():
    from bash_oracle import EngineWorld
    w = EngineWorld()
    yield w
    w.close()
