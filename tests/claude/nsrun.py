"""Run `metaharness run claude …` beside a loopback model, inside a loopback-only
network namespace when the caller started us under `unshare -rnm` (the vendor rule “end-to-end tests run the vendor in a loopback-only network namespace”).

Usage: python nsrun.py OUTDIR SCENARIO [--in-namespace] [--exec ENVFILE] [--forward PORT=SOCKET] -- <arguments>

Without `--exec` the arguments are those of `metaharness run`. With `--exec ENVFILE`
they are a command run verbatim (the vendor checks' own client spawns the binary this
way) with the JSON object in ENVFILE as its whole environment; `@URL@` in the command
or an environment value becomes the loopback's URL.

Inside the namespace: `lo` up, a resolv.conf pointing at a DNS sink on 127.0.0.1:53
bind-mounted over /etc/resolv.conf, nscd/resolved sockets hidden, nsswitch `files dns`.
The sink logs every query to OUTDIR/dns.log and answers NXDOMAIN. The loopback serves
SCENARIO and logs to OUTDIR/loopback.jsonl. stdin/stdout/stderr are the child's own.
The exit status is metaharness's.

`--forward PORT=SOCKET` reaches one server of the host from inside the namespace (whose
loopback is its own): 127.0.0.1:PORT inside is relayed to the Unix socket SOCKET, which the
caller relays to the host's 127.0.0.1:PORT (`relay`; a socket file crosses network namespaces).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

from metaharness.loopback.server import LoopbackServer
from metaharness.protocol.scenario import load_scenario


def dns_sink(log_path: str, ready: threading.Event) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 53))
    ready.set()
    while True:
        data, peer = sock.recvfrom(4096)
        name, i = [], 12
        while i < len(data) and data[i]:
            length = data[i]
            name.append(data[i + 1:i + 1 + length].decode("ascii", "replace"))
            i += 1 + length
        qtype = int.from_bytes(data[i + 1:i + 3], "big") if i + 3 <= len(data) else 0
        with open(log_path, "a") as log:
            log.write(f"{'.'.join(name)} {qtype}\n")
        question_end = i + 5
        answer = data[:2] + b"\x81\x83" + data[4:6] + b"\x00\x00\x00\x00\x00\x00" + data[12:question_end]
        sock.sendto(answer, peer)


def relay(listener: socket.socket, connect) -> None:
    """Accept on LISTENER (a daemon thread, until it is closed), each connection piped both ways
    to a socket of `connect()`."""

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def connection(client: socket.socket) -> None:
        try:
            upstream = connect()
        except OSError:
            client.close()
            return
        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def serve() -> None:
        while True:
            try:
                client, _peer = listener.accept()
            except OSError:
                return
            threading.Thread(target=connection, args=(client,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def forward(spec: str) -> None:
    """PORT=SOCKET: 127.0.0.1:PORT here relayed to the Unix socket SOCKET."""
    port, path = spec.split("=", 1)
    listener = socket.socket()
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(16)

    def connect() -> socket.socket:
        unix = socket.socket(socket.AF_UNIX)
        unix.connect(path)
        return unix

    relay(listener, connect)


def isolate(outdir: str) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    resolv = os.path.join(outdir, "resolv.conf")
    with open(resolv, "w") as handle:
        handle.write("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    nsswitch = os.path.join(outdir, "nsswitch.conf")
    with open(nsswitch, "w") as handle:
        handle.write("hosts: files dns\n")
    empty = os.path.join(outdir, "empty")
    os.makedirs(empty, exist_ok=True)
    subprocess.run(["mount", "--bind", resolv, "/etc/resolv.conf"], check=True)
    subprocess.run(["mount", "--bind", nsswitch, "/etc/nsswitch.conf"], check=True)
    for hidden in ("/var/run/nscd", "/run/systemd/resolve"):
        if os.path.isdir(hidden):
            subprocess.run(["mount", "--bind", empty, hidden], check=True)
    ready = threading.Event()
    threading.Thread(target=dns_sink, args=(os.path.join(outdir, "dns.log"), ready), daemon=True).start()
    ready.wait(5)


def main() -> int:
    split = sys.argv.index("--")
    own, args = sys.argv[1:split], sys.argv[split + 1:]
    outdir, scenario_path = own[0], own[1]
    if "--in-namespace" in own:
        isolate(outdir)
    open(os.path.join(outdir, "dns.log"), "a").close()
    if "--forward" in own:
        forward(own[own.index("--forward") + 1])
    server = LoopbackServer(load_scenario(scenario_path), log_path=os.path.join(outdir, "loopback.jsonl"),
                            workdir=os.environ.get("MH_TEST_WORKDIR"), stderr=sys.stderr)
    url, stop = server.run_in_thread()
    with open(os.path.join(outdir, "url"), "w") as handle:
        handle.write(url)
    env = None
    if "--exec" in own:
        with open(own[own.index("--exec") + 1]) as handle:
            env = {k: v.replace("@URL@", url) for k, v in json.load(handle).items()}
        argv = [a.replace("@URL@", url) for a in args]
    else:
        argv = [sys.executable, "-m", "metaharness", "run", *[a.replace("@URL@", url) for a in args]]
        if "--credentials" not in args:
            argv += ["--credentials", "none", "--model-endpoint", url]
    try:
        return subprocess.run(argv, env=env, cwd=os.environ.get("MH_TEST_WORKDIR") if env is not None else None).returncode
    finally:
        stop()


if __name__ == "__main__":
    sys.exit(main())
