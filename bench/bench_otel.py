"""The cost of live OpenTelemetry export (`--otel`). Prints figures; asserts nothing.

One scripted oharness run of N_CALLS calls (observe mode, so every call is a span), timed from
process start to its exit, R times each way, medians beside the baseline measured in the same run:
  off        no --otel (nothing of OpenTelemetry imported);
  receiver   --otel to a local OTLP/HTTP receiver in this process (answers 200, counts the bytes);
  closed     --otel to a closed 127.0.0.1 port (every export fails; the run ends with the
             OTEL_SPANS_DROPPED warning, its end's flush bounded).
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

PY = sys.executable
N_CALLS = int(os.environ.get("BENCH_OTEL_CALLS", "200"))
REPEATS = int(os.environ.get("BENCH_OTEL_REPEATS", "5"))


class Receiver(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.bytes = 0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                server.bytes += len(self.rfile.read(int(self.headers["Content-Length"])))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def one(work: str, script: str, extra: list[str], env: dict[str, str]) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    done = subprocess.run([PY, "-m", "metaharness", "run", "oharness", "--script", script, "-p", "x", "--cwd", work,
                           "--decisions", "observe", "--posture", "bypass", *extra],
                          capture_output=True, stdin=subprocess.DEVNULL, env=env, check=True)
    return (time.perf_counter() - t) * 1000, [json.loads(line) for line in done.stdout.splitlines()]


def main() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "TRACEPARENT"}
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "f.txt"), "w") as f:
            f.write("x")
        script = os.path.join(work, "many.json")
        with open(script, "w") as f:
            json.dump({"format": "metaharness.scenario/1", "turns": [
                {"calls": [{"op": "file.read", "input": {"path": "f.txt"}} for _ in range(N_CALLS)]}]}, f)
        ways = {"off": [], "receiver": ["--otel", f"http://127.0.0.1:{receiver.server_port}/v1/traces"],
                "closed": ["--otel", f"http://127.0.0.1:{closed_port()}/v1/traces"]}
        times: dict[str, list[float]] = {name: [] for name in ways}
        dropped: dict[str, int] = {name: 0 for name in ways}
        for _ in range(REPEATS):  # interleaved, so a noisy moment costs every way alike
            for name, extra in ways.items():
                ms, lines = one(work, script, extra, env)
                times[name].append(ms)
                dropped[name] += sum(e["event"] == "warning" and e["code"] == "OTEL_SPANS_DROPPED" for e in lines)
    receiver.shutdown()
    base = statistics.median(times["off"])
    spans = N_CALLS + 2  # the run, its turn, a span per call
    print(f"scripted oharness run, {N_CALLS} calls ({spans} spans), {REPEATS} runs each, process start to exit:")
    for name in ways:
        median = statistics.median(times[name])
        extra = median - base
        print(f"  {name:8s} median {median:7.0f} ms (min {min(times[name]):.0f}) | ratio {median / base:.2f}x off "
              f"| {extra:+.0f} ms, {extra * 1000 / spans:+.0f} us a span | OTEL_SPANS_DROPPED in {dropped[name]} of {REPEATS}")
    print(f"  the receiver took {receiver.bytes / REPEATS / 1024:.0f} KiB of OTLP a run")


if __name__ == "__main__":
    main()
