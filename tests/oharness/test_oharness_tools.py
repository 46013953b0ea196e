"""Each tool: success, refusals, timeouts, process-group kill, output cap, .gitignore."""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
import time

import pytest

from oharness.tools.bash import BashTool
from oharness.tools.files import EditTool, GlobTool, GrepTool, ReadTool, WriteTool
from oharness.tools.html_text import html_to_text
from oharness.tools.misc import SkillTool, TodoTool, WebFetchTool


# -- read / write / edit -----------------------------------------------------------------

async def test_write_then_read(ctx, tmp_path):
    out = await WriteTool().call({"path": "sub/a.txt", "content": "hello\nworld\n"}, ctx)
    assert not out.is_error and (tmp_path / "sub" / "a.txt").read_text() == "hello\nworld\n"
    out = await ReadTool().call({"path": "sub/a.txt"}, ctx)
    assert out.content == "hello\nworld\n" and not out.is_error
    out = await ReadTool().call({"path": "sub/a.txt", "offset": 2, "limit": 1}, ctx)
    assert out.content == "world\n"


async def test_read_refusals(ctx, tmp_path):
    assert "does not exist" in (await ReadTool().call({"path": "nope"}, ctx)).content
    (tmp_path / "d").mkdir()
    out = await ReadTool().call({"path": "d"}, ctx)
    assert out.is_error and "directory" in out.content
    (tmp_path / "bin").write_bytes(b"\0\1\2")
    assert "binary" in (await ReadTool().call({"path": "bin"}, ctx)).content
    out = await ReadTool().call({}, ctx)
    assert out.is_error and "needs `path`" in out.content
    out = await ReadTool().call({"path": 3}, ctx)
    assert out.is_error and "must be a string" in out.content


async def test_edit_exact_replacement(ctx, tmp_path):
    target = tmp_path / "f.py"
    target.write_text("a = 1\nb = 2\n")
    out = await EditTool().call({"path": "f.py", "old": "b = 2", "new": "b = 3"}, ctx)
    assert not out.is_error and target.read_text() == "a = 1\nb = 3\n"


@pytest.mark.parametrize(
    "old,new,needle",
    [("zzz", "y", "does not occur"), ("x", "y", "occurs 2 times"), ("", "y", "empty"), ("x", "x", "same")],
)
async def test_edit_refuses(ctx, tmp_path, old, new, needle):
    target = tmp_path / "f.txt"
    target.write_text("x and x\n")
    out = await EditTool().call({"path": "f.txt", "old": old, "new": new}, ctx)
    assert out.is_error and needle in out.content
    assert target.read_text() == "x and x\n"  # nothing changed


# -- glob / grep -------------------------------------------------------------------------

async def test_glob_lists_and_matches(ctx, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("")
    (tmp_path / "b.txt").write_text("")
    (tmp_path / ".git").mkdir()
    listing = await GlobTool().call({"path": "."}, ctx)
    assert listing.content.splitlines() == ["b.txt", "src/"]
    found = await GlobTool().call({"path": ".", "pattern": "**/*.py"}, ctx)
    assert found.content == "src/a.py"
    assert (await GlobTool().call({"path": "b.txt"}, ctx)).is_error


async def test_glob_hidden_paths_are_skipped_and_counted(ctx, tmp_path):
    (tmp_path / "secret.env").write_text("")
    (tmp_path / "ok.txt").write_text("")
    ctx.hidden = lambda path: path.endswith(".env")
    out = await GlobTool().call({"path": "."}, ctx)
    assert "secret.env" not in out.content and "skipped 1 path" in out.content


async def test_grep_honours_gitignore(ctx, tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.py").write_text("needle\n")
    (tmp_path / "run.log").write_text("needle\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / ".gitignore").write_text("local.py\n")
    (tmp_path / "src" / "local.py").write_text("needle\n")
    (tmp_path / "src" / "main.py").write_text("x = 1\nneedle = 2\n")
    out = await GrepTool().call({"pattern": "needle", "path": "."}, ctx)
    assert out.content.splitlines() == ["src/main.py:2:needle = 2"]
    # searching below the root still applies the root's .gitignore
    out = await GrepTool().call({"pattern": "needle", "path": "build"}, ctx)
    assert out.content == "(no matches)"


async def test_grep_regex_and_refusals(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("Foo\nfoo\nbar\n")
    out = await GrepTool().call({"pattern": "^f", "path": "a.txt", "ignore_case": True}, ctx)
    assert out.content.splitlines() == ["a.txt:1:Foo", "a.txt:2:foo"]
    out = await GrepTool().call({"pattern": "(", "path": "."}, ctx)
    assert out.is_error and "regular expression" in out.content
    assert (await GrepTool().call({"pattern": "x", "path": "missing"}, ctx)).is_error


# -- bash --------------------------------------------------------------------------------

async def test_bash_output_and_exit_code(ctx, tmp_path):
    out = await BashTool().call({"command": "echo out; echo err >&2; pwd"}, ctx)
    assert out.exit_code == 0 and not out.is_error
    assert out.content.splitlines() == ["out", "err", str(tmp_path)]
    out = await BashTool().call({"command": "exit 3"}, ctx)
    assert out.exit_code == 3 and "[exit code 3]" in out.content


async def test_bash_reports_where_it_ended_and_starts_there_next(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    out = await BashTool().call({"command": 'echo "$#:$0"; cd sub && exit 4'}, ctx)
    assert out.content.splitlines()[0] == "0:bash"  # positional parameters as under `bash -c`
    assert out.exit_code == 4 and out.cwd == str(tmp_path / "sub")
    assert f"[working directory now {tmp_path / 'sub'}]" in out.content
    ctx.shell_cwd = out.cwd  # what the agent loop does with the report
    out = await BashTool().call({"command": "pwd"}, ctx)
    assert out.content == f"{tmp_path / 'sub'}\n" and out.cwd == str(tmp_path / "sub")


async def test_bash_keeps_its_directory_report_in_the_session_directory(ctx, tmp_path, monkeypatch):
    """Under metaharness the session directory is the run's own, removed at its end: an oharness
    killed mid-command leaves its report file there, never in the temp directory."""
    session, temp = tmp_path / "session", tmp_path / "temp"
    session.mkdir()
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    ctx.scratch_dir = str(session)
    (tmp_path / "sub").mkdir()
    out = await BashTool().call({"command": f"ls {session}; ls -A {temp}; cd sub"}, ctx)
    assert out.content.startswith("oharness-cwd-") and out.cwd == str(tmp_path / "sub"), out.content
    assert os.listdir(session) == [] and os.listdir(temp) == []


@pytest.mark.parametrize("command", ["cd sub; trap 'echo own' EXIT", "cd sub; exec true", "cd sub; kill -9 $$"])
async def test_bash_reports_no_directory_when_its_exit_trap_cannot_run(ctx, tmp_path, command):
    (tmp_path / "sub").mkdir()
    out = await BashTool().call({"command": command}, ctx)
    assert out.cwd is None and "working directory now" not in out.content


def test_bash_starts_in_the_session_directory_once_the_carried_one_is_gone(ctx, tmp_path):
    ctx.shell_cwd = str(tmp_path / "gone")
    assert ctx.bash_cwd() == str(tmp_path) and ctx.shell_cwd is None


async def test_bash_scrubs_environment(ctx, monkeypatch):
    monkeypatch.setenv("BASH_ENV", "/nonexistent/should-not-load")
    monkeypatch.setenv("KEEP_ME", "yes")
    out = await BashTool().call({"command": 'echo "[$BASH_ENV][$KEEP_ME]"'}, ctx)
    assert out.content.strip() == "[][yes]"


async def test_bash_timeout_kills_process_group(ctx, tmp_path):
    marker = tmp_path / "child.pid"
    started = time.monotonic()
    out = await BashTool().call({"command": f"sleep 30 & echo $! > {marker}; wait", "timeout_ms": 300}, ctx)
    assert time.monotonic() - started < 5
    assert out.is_error and "timed out after 300 ms" in out.content
    assert out.exit_code == 128 + 9
    assert await _dies(int(marker.read_text())), "the background child outlived the timeout"


async def test_bash_cancel_kills_process_group(ctx, tmp_path):
    marker = tmp_path / "child.pid"
    task = asyncio.ensure_future(BashTool().call({"command": f"sleep 30 & echo $! > {marker}; wait"}, ctx))
    for _ in range(100):
        if marker.exists() and marker.read_text().strip():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _dies(int(marker.read_text())), "the background child outlived the interrupt"


async def test_bash_cancelled_while_starting_leaves_nothing_running(ctx, tmp_path):
    # Cancelled while bash is still being started (a loaded machine widens that window): the
    # shell may already run, so it and whatever it started are ended, never left behind.
    marker = tmp_path / "child.pid"
    for delay in (0, 0.001, 0.005):
        marker.unlink(missing_ok=True)
        task = asyncio.ensure_future(BashTool().call({"command": f"sleep 30 & echo $! > {marker}; wait"}, ctx))
        await asyncio.sleep(delay)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)
        if marker.exists() and marker.read_text().strip():
            assert await _dies(int(marker.read_text())), f"the background child outlived a cancel after {delay} s"


async def test_bash_background_child_does_not_hang_the_call(ctx):
    started = time.monotonic()
    out = await BashTool().call({"command": "sleep 30 & echo started"}, ctx)
    assert out.content.strip() == "started" and time.monotonic() - started < 5


async def test_bash_output_is_capped(ctx):
    out = await BashTool(output_cap_bytes=1000).call({"command": "head -c 50000 /dev/zero | tr '\\0' a"}, ctx)
    assert out.content.startswith("a" * 1000)
    assert "[output truncated: 49000 more bytes]" in out.content
    assert out.exit_code == 0


async def _dies(pid: int) -> bool:
    for _ in range(500):  # SIGKILL is immediate; reaping by init lags seconds on a loaded machine
        if not _alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# -- webfetch ----------------------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        if self.path == "/page":
            body = b"<html><head><title>T</title><style>x{}</style></head><body><p>Hello <b>there</b></p><script>bad()</script></body></html>"
            self._send(200, body, "text/html")
        elif self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/plain":
            self._send(200, b"just text", "text/plain")
        else:
            self._send(404, b"missing", "text/plain")

    def _send(self, status, body, kind):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_webfetch_extracts_text_and_follows_vetted_redirects(ctx, web):
    seen = []

    async def admit(url):
        seen.append(url)
        return None

    ctx.admit_url = admit
    out = await WebFetchTool().call({"url": f"{web}/hop"}, ctx)
    assert not out.is_error
    assert "Hello there" in out.content and "bad()" not in out.content and "x{}" not in out.content
    assert seen == [f"{web}/hop", f"{web}/page"]
    assert (await WebFetchTool().call({"url": f"{web}/plain"}, ctx)).content == "just text"


async def test_webfetch_refusals(ctx, web):
    out = await WebFetchTool().call({"url": f"{web}/nothing"}, ctx)
    assert out.is_error and "HTTP 404" in out.content
    out = await WebFetchTool().call({"url": "file:///etc/passwd"}, ctx)
    assert out.is_error and "only http and https" in out.content

    async def refuse(url):
        return "the host is not allowed" if url.endswith("/page") else None

    ctx.admit_url = refuse
    out = await WebFetchTool().call({"url": f"{web}/hop"}, ctx)
    assert out.is_error and "redirect" in out.content and "not allowed" in out.content


def test_html_to_text():
    assert html_to_text("<p>a</p><p>b &amp; c</p>") == "a\nb & c"


# -- skill / todo ------------------------------------------------------------------------

async def test_skill_loads_first_match(ctx, tmp_path):
    first, second = tmp_path / "s1", tmp_path / "s2"
    (second / "deploy").mkdir(parents=True)
    (second / "deploy" / "SKILL.md").write_text("# Deploy\nsteps")
    ctx.skills_dirs = [str(first), str(second)]
    out = await SkillTool().call({"name": "deploy"}, ctx)
    assert out.content == "# Deploy\nsteps"
    out = await SkillTool().call({"name": "nope"}, ctx)
    assert out.is_error and "available: deploy" in out.content
    out = await SkillTool().call({"name": "../deploy"}, ctx)
    assert out.is_error and "not a skill name" in out.content


async def test_todo_keeps_the_list(ctx):
    out = await TodoTool().call({"items": ["a", {"content": "b", "status": "completed"}]}, ctx)
    assert out.content == "[ ] a\n[x] b"
    assert ctx.todos == [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"}]
    out = await TodoTool().call({"items": [{"content": "c", "status": "later"}]}, ctx)
    assert out.is_error and "status" in out.content


def test_cli_prompt_prints_the_conversation(tmp_path):
    import json
    import subprocess
    import sys

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"text": "listing", "calls": [{"op": "shell", "input": {"command": "echo from-bash"}}]}, {"text": "bye"}]}))
    run = subprocess.run([sys.executable, "-m", "oharness", "-p", "hi", "--script", str(script), "--cwd", str(tmp_path)],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    assert "listing" in run.stdout and "→ bash" in run.stdout and "from-bash" in run.stdout and "bye" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "oharness", "-p", "hi", "--model", "nope"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "PROVIDER:MODEL" in bad.stderr and "Traceback" not in bad.stderr
