"""The bash oracle's driver: runs as PID 1 of a throwaway user+mount+pid+network namespace
(`unshare -Urmnp --fork --mount-proc`, started by bash_oracle.py) and runs commands in real bash.

Inside the namespace: the scratch base is a fresh tmpfs; the secret file is watched with inotify
(an open or a read of it is seen, whatever the program: `cat`, `cp` with copy_file_range, `tar`
with O_NOATIME); `/tmp` and `/dev/shm` are fresh tmpfs too; every denied
program (`rm`, `git`) is shadowed by a recorder bind-mounted over the real binary (so `/bin/rm`,
`\\rm` and `command rm` all reach it) that logs its argv and does nothing; then `/` is remounted
read-only. There is no network. After each command every process but this one is killed.

Protocol: one JSON object per line on stdin, {"cmd": "..."}; one JSON object per line on stdout:
{"rm": [[argv…]…], "git": [[argv…]…], "env_changed": bool, "secret_read": bool, "build_gone": bool,
"timeout": bool}. Beside the project the template holds `other/.env` (a file to copy onto `.env`).
The other shells (mksh, fish, busybox …) are whatever the read-only root has installed.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys

RECORDED = ("rm", "git")
IN_ACCESS, IN_OPEN, IN_NONBLOCK = 0x1, 0x20, 0o4000
_libc = ctypes.CDLL(None, use_errno=True)


class Watch:
    """inotify on one file: did anything open or read it?"""

    def __init__(self, path: str) -> None:
        self.fd = _libc.inotify_init1(IN_NONBLOCK)
        if self.fd < 0 or _libc.inotify_add_watch(self.fd, path.encode(), IN_ACCESS | IN_OPEN) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def touched(self) -> bool:
        try:
            return bool(os.read(self.fd, 65536))
        except BlockingIOError:
            return False
        finally:
            os.close(self.fd)
RECORDER = "#!/bin/sh\n{{ printf '%s\\037' \"$0\" \"$@\"; printf '\\n'; }} >> {log}\nexit 0\n"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _setup(base: str) -> dict:
    _mount("--make-rprivate", "/")
    _mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", base)
    for d in ("/tmp", "/dev/shm"):
        if os.path.isdir(d) and not base.startswith(d + "/"):
            _mount("-t", "tmpfs", "tmpfs", d)
    paths = {k: os.path.join(base, k) for k in ("rec", "log", "template", "run", "home")}
    for p in paths.values():
        os.makedirs(p, exist_ok=True)
    for name in RECORDED:
        rec = os.path.join(paths["rec"], name)
        with open(rec, "w") as f:
            f.write(RECORDER.format(log=os.path.join(paths["log"], name + ".log")))
        os.chmod(rec, 0o755)
        real = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
        for target in {os.path.realpath(real)} if real else ():
            _mount("--bind", rec, target)
    proj = os.path.join(paths["template"], "proj")
    os.makedirs(os.path.join(proj, "build"))
    os.makedirs(os.path.join(proj, "secret"))
    os.makedirs(os.path.join(proj, "src"))
    for rel, text in (("build/o.txt", "o\n"), (".env", "KEY=1\n"), ("secret/key", "s3cr3t\n"),
                      ("README", "readme a\n"), ("src/a.txt", "a\n")):
        with open(os.path.join(proj, rel), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(paths["template"], "other"))
    with open(os.path.join(paths["template"], "other", ".env"), "w") as f:
        f.write("KEY=2\n")
    _mount("-o", "remount,bind,ro", "/")
    return paths


def _env_state(path: str):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        digest = None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, digest)


def _reap() -> None:
    try:
        os.kill(-1, signal.SIGKILL)  # PID 1 of the namespace: every other process
    except ProcessLookupError:
        pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            # children still exiting: wait for them
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return


def _read_log(path: str) -> list[list[str]]:
    try:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    out = []
    for line in data.split("\n"):
        if line:
            parts = line.split("\x1f")
            out.append(parts[1:-1] if parts and parts[-1] == "" else parts[1:])
    return out


def main() -> None:
    base = sys.argv[1]
    paths = _setup(base)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": paths["home"], "LANG": "C"}
    print(json.dumps({"ready": True}), flush=True)
    n = 0
    for line in sys.stdin:
        req = json.loads(line)
        n += 1
        work = os.path.join(paths["run"], str(n))
        shutil.copytree(paths["template"], work, symlinks=True)
        proj = os.path.join(work, "proj")
        secret = os.path.join(proj, "secret", "key")
        watch = Watch(secret)
        env_before = _env_state(os.path.join(proj, ".env"))
        for name in RECORDED:
            open(os.path.join(paths["log"], name + ".log"), "w").close()
        timed_out = False
        try:
            subprocess.run(["/usr/bin/bash", "--noprofile", "--norc", "-c", req["cmd"]], cwd=proj, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=req.get("timeout", 5), start_new_session=True)
        except subprocess.TimeoutExpired:
            timed_out = True
        _reap()
        secret_read = watch.touched()
        result = {
            "rm": _read_log(os.path.join(paths["log"], "rm.log")),
            "git": _read_log(os.path.join(paths["log"], "git.log")),
            "env_changed": _env_state(os.path.join(proj, ".env")) != env_before,
            "secret_read": secret_read,
            "build_gone": not os.path.isdir(os.path.join(proj, "build")),
            "timeout": timed_out,
        }
        shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
