"""The replace relay's hook program (docs/guides/claude-and-codex.md), run by Codex once per tool call.

What belongs here: only what the PreToolUse hook process does. Codex starts it as
`python -I -S relay_program.py DIR TIMEOUT_S` with the run's secret in its environment
(METAHARNESS_RELAY_SECRET — never in argv, which other users can read); it forwards the hook's stdin JSON
to the run's socket `DIR/relay.sock`, prints the answer it gets back and exits 0.

Rules kept:
* standard library only, and nothing of metaharness: it starts in a bare interpreter;
* every failure (no socket, a refused secret, a timeout, a broken answer) prints nothing
  and exits 0, which leaves the call to the approval request that follows (the fail-closed
  backstop), never to a guess;
* it waits at most TIMEOUT_S, which the adapter sets below the hook's own `timeout`.
"""

import os
import socket
import sys

LIMIT = 64 * 1024 * 1024


def main(argv: list[str]) -> None:
    directory, timeout_s = argv[1], float(argv[2])
    secret = os.environ.get("METAHARNESS_RELAY_SECRET", "")
    payload = sys.stdin.buffer.read(LIMIT)
    os.chdir(directory)  # a relative address: socket paths are limited to 108 bytes
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        conn.connect("relay.sock")
        conn.sendall(secret.encode() + b"\n" + payload)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    answer = b"".join(chunks)
    if answer.startswith(b"ok\n"):  # the server's mark that the answer is whole
        sys.stdout.buffer.write(answer[3:])
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException:  # noqa: BLE001 — any failure: print nothing, leave it to the approval
        pass
    os._exit(0)
