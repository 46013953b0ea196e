"""The opencode adapter refuses a run whose opencode did not load the guard plugin (the plugin
records PR_GET_DUMPABLE once it made opencode non-dumpable, and whether a process it starts now
goes without the server password; anything else is a refusal)."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace

import pytest

from metaharness.adapters.process import Scratch
from metaharness.adapters.acp.opencode import GUARD_PLUGIN, OpencodeAdapter
from metaharness.adapters.base import StartRefusal

from acp_support import VENDOR


@pytest.mark.parametrize("content", [None, "", "not json", '{"dumpable": 1, "spawns": true, "pid": 1}', '{"pid": 1}', "[0]",
                                     '{"dumpable": 0, "pid": 1}', '{"dumpable": 0, "spawns": false, "pid": 1}'])
def test_no_guard_no_run(tmp_path, content):
    if content is not None:
        (tmp_path / "guard.json").write_text(content)
    with pytest.raises(StartRefusal) as refused:
        OpencodeAdapter._check_guard(SimpleNamespace(child=SimpleNamespace(scratch=Scratch(tmp_path))))
    assert refused.value.name == "VendorCapability" and "guard plugin" in refused.value.sentence


def test_a_non_dumpable_opencode_runs(tmp_path):
    (tmp_path / "guard.json").write_text('{"dumpable": 0, "spawns": true, "pid": 1}')
    OpencodeAdapter._check_guard(SimpleNamespace(child=SimpleNamespace(scratch=Scratch(tmp_path))))


def test_the_plugin_keeps_the_password_where_the_server_reads_it():
    # opencode's server reads OPENCODE_SERVER_PASSWORD on every request: removing it from
    # process.env would leave the server answering anyone (seen on 1.18.33).
    assert "delete process.env" not in GUARD_PLUGIN
    assert "output.env[KEY] = \"\"" in GUARD_PLUGIN
    assert "prctl(4, 0" in GUARD_PLUGIN


# The plugin run by opencode's own runtime (a Bun executable; BUN_BE_BUN=1 makes it run a script):
# every way a process is started from JS leaves the password out, and opencode still reads it.
SPAWNS = r"""
import { MetaharnessGuard } from "./metaharness-guard.js";
import childProcess from "node:child_process";
import { spawnSync as namedSpawnSync } from "node:child_process";
const hooks = await MetaharnessGuard();
const sh = ["-c", "echo ${OPENCODE_SERVER_PASSWORD:-none}"];
const out = (child) => String(child.stdout ?? child).trim();
const seen = {
  "process.env": process.env.OPENCODE_SERVER_PASSWORD,
  spawnSync: out(childProcess.spawnSync("sh", sh)),
  "spawnSync, env given": out(childProcess.spawnSync("sh", sh, { env: { ...process.env } })),
  "spawnSync, named import": out(namedSpawnSync("sh", sh)),
  execSync: out(childProcess.execSync("echo ${OPENCODE_SERVER_PASSWORD:-none}")),
  execFileSync: out(childProcess.execFileSync("sh", sh)),
  "Bun.spawnSync": out(Bun.spawnSync(["sh", ...sh])),
  "Bun.spawnSync, options object": out(Bun.spawnSync({ cmd: ["sh", ...sh], env: { ...process.env } })),
  spawn: await new Promise((done) => {
    let text = "";
    const child = childProcess.spawn("sh", sh);
    child.stdout.on("data", (chunk) => { text += chunk; });
    child.on("close", () => done(text.trim()));
  }),
  "Bun.spawn": (await new Response(Bun.spawn(["sh", ...sh]).stdout).text()).trim(),
};
const shell = { env: {} };
await hooks["shell.env"]({}, shell);
seen["shell.env"] = shell.env.OPENCODE_SERVER_PASSWORD;
console.log(JSON.stringify(seen));
"""


def test_the_plugin_starts_every_process_without_the_password(tmp_path):
    if not (VENDOR / "opencode").exists():
        pytest.fail("opencode is not installed in .vendor; run make vendor")
    opencode = (VENDOR / "opencode").resolve()
    (tmp_path / "metaharness-guard.js").write_text(GUARD_PLUGIN)
    (tmp_path / "spawns.js").write_text(SPAWNS)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "BUN_BE_BUN": "1",
           "OPENCODE_SERVER_PASSWORD": "s3cret", "METAHARNESS_GUARD_FILE": str(tmp_path / "guard.json")}
    done = subprocess.run([str(opencode), "spawns.js"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen.pop("process.env") == "s3cret"  # where opencode's server reads it
    assert seen.pop("shell.env") == ""
    assert seen == {name: "none" for name in seen} and len(seen) == 9, seen
    guard = json.loads((tmp_path / "guard.json").read_text())
    assert guard["spawns"] is True and guard["dumpable"] == 0
    OpencodeAdapter._check_guard(SimpleNamespace(child=SimpleNamespace(scratch=Scratch(tmp_path))))
