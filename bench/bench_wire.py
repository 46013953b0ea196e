"""Wire-core benchmark (issue 2): figures side by side with a bare baseline measured in the same run.

(a) decode + re-encode 200,000 realistic event lines through decode_event_line /
    encode_event_line, against a bare msgspec.json decode + encode of the same lines;
(b) 200,000 command lines, valid and invalid mixed, through decode_command_line,
    against a bare msgspec.json decode of the same lines;
(c) frame verify (parse_frame_document of the golden document) per call, against
    a bare sha256 of the same bytes.
(d) `import metaharness.protocol` in a fresh interpreter, against `import msgspec` alone.
Targets: (a) and (b) within 2x of their baselines; (c) under 30 µs; (d) 50 ms or less. This script
prints figures; it asserts nothing (speed is not a test verdict).

Usage: python bench/bench_wire.py [--lines N]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pathlib
import time

import msgspec

from metaharness.protocol import (
    Command,
    Abstain,
    Allow,
    CommandResult,
    DecisionCensus,
    Deny,
    EventWriter,
    Ok,
    SessionEnded,
    Text,
    Thinking,
    ToolDecided,
    ToolRequested,
    ToolResult,
    TurnEnded,
    TurnStarted,
    Usage,
    UsageReport,
    WarningEvent,
    decode_command_line,
    decode_event_line,
    encode_event_line,
    parse_frame_document,
)

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "tests" / "protocol" / "golden" / "frame.json"


def realistic_events(n: int) -> list[bytes]:
    """A stream shaped like a Claude Code run: text, calls, decisions, results, usage."""
    lines: list[bytes] = []
    writer = EventWriter(lines.append, "claude-41234")
    turn = 0
    i = 0
    while writer.lines_written < n:
        i += 1
        if i % 40 == 1:
            turn += 1
            writer.write(TurnStarted(turn=turn, frame_digest="43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12"))
        call = f"toolu_{i:08d}"
        at = f"2026-08-23T02:57:{i % 60:02d}.487Z"
        k = i % 8
        if k == 0:
            writer.write(Text(text=f"I will look at src/module_{i}.py — then run the tests ✓", request_id=f"req_{i}"), at=at)
        elif k == 1:
            writer.write(Thinking(text="The failing assertion compares the rendered frame with the golden text. " * 3, request_id=f"req_{i}"), at=at)
        elif k == 2:
            writer.write(ToolRequested(call_id=call, name="Bash", input={"description": "run the suite", "command": f"pytest -x tests/t_{i}.py", "timeout": 120000},
                                       operations=["shell"], subjects=[f"proc:/usr/bin/pytest"], decision_required=False, deadline_ms=None, seam="hook"), at=at)
        elif k == 3:
            decision = (Allow(), Deny(reason="this step admits [\"file.read\"] and Bash is shell, which it does not"), Abstain())[i % 3]
            writer.write(ToolDecided(call_id=call, decision=decision, decided_by="frame", seam="hook", latency_ms=None))
        elif k == 4:
            writer.write(ToolResult(exit_code=0, outcome_source="tool_use_result", call_id=call, is_error=False,
                                    content=[{"type": "text", "text": "collected 12 items\n\n............ [100%]\n12 passed in 0.31s"}],
                                    bytes=57, tool_use_result={"stdout": "12 passed", "stderr": "", "interrupted": False}), at=at)
        elif k == 5:
            writer.write(UsageReport(request_id=f"req_{i}", model="claude-sonnet-5", usage=Usage(input_tokens=1203 + i, output_tokens=88, cache_read_input_tokens=45012,
                                     cache_creation_input_tokens=0, service_tier="standard", thinking_tokens=None, iterations=1, speed=None, cost_usd=0.0123)), at=at)
        elif k == 6:
            writer.write(CommandResult(id=f"c-{i}", outcome=Ok(applies_at=None)))
        else:
            writer.write(WarningEvent(code="VENDOR_NOTICE", message="hook callback completed in 3 ms"))
        if i % 40 == 39:
            writer.write(TurnEnded(turn=turn, stop_reason="end_turn"), at=at)
    writer.write(SessionEnded(is_error=False, subtype="success", num_turns=turn, census=DecisionCensus(allowed=3, denied=1, by_seam={"hook": 4}, by_decider={"frame": 4})))
    return [line.rstrip(b"\n") for line in lines[:n]]


VALID_COMMANDS = [
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","call_id":"toolu_01","decision":{"decision":"allow"}}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","call_id":"toolu_02","decision":{"decision":"deny","reason":"this step only reads; propose the change instead"}}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","call_id":"toolu_03","decision":{"decision":"replace","input":{"command":"cargo test --workspace"}}}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"message.inject","text":"remember: the handoff is the test report"}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"halt","reason":"budget spent"}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","call_id":"toolu_04","decision":{"decision":"abstain"}}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"steer","text":"prefer the existing helper"}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"interrupt","reason":"operator"}',
]
INVALID_COMMANDS = [
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","call_id":"toolu_01","decision":"allow"}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decline","call_id":"toolu_01"}',
    b'{"format":"metaharness.command/2","id":"c%d","command":"halt","reason":"x"}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"tool.decide","decision":{"decision":"maybe"}}',
    b'{"format":"metaharness.command/1","id":"c%d","command":"interrupt"',
]


def command_lines(n: int, invalid_every: int = 5) -> list[bytes]:
    """Mixed lines: one in `invalid_every` is invalid (five kinds of fault), the rest valid."""
    out = []
    for i in range(n):
        if invalid_every and i % invalid_every == invalid_every - 1:
            out.append(INVALID_COMMANDS[(i // invalid_every) % len(INVALID_COMMANDS)] % i)
        else:
            out.append(VALID_COMMANDS[i % len(VALID_COMMANDS)] % i)
    return out


def timed(fn) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def best_pair(ours, bare, repeat: int) -> tuple[float, float]:
    """Best of `repeat` interleaved runs each, so a busy machine skews both alike."""
    a, b = [], []
    for _ in range(repeat):
        a.append(timed(ours))
        b.append(timed(bare))
    return min(a), min(b)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.lines

    events = realistic_events(n)
    assert all(encode_event_line(*(lambda e, v: (e.seq, e.run, v, e.at))(*decode_event_line(l))) == l + b"\n" for l in events[:2000])

    def ours_a() -> None:
        for line in events:
            env, ev = decode_event_line(line)
            encode_event_line(env.seq, env.run, ev, env.at)

    bare_decode = msgspec.json.decode
    bare_encode = msgspec.json.encode

    def bare_a() -> None:
        for line in events:
            bare_encode(bare_decode(line))

    a_ours, a_bare = best_pair(ours_a, bare_a, args.repeat)

    typed_decode = msgspec.json.Decoder(Command).decode

    def command_typed(lines: list[bytes]) -> float:
        def bare() -> None:
            for line in lines:
                try:
                    typed_decode(line)
                except msgspec.DecodeError:
                    pass

        return min(timed(bare) for _ in range(args.repeat))

    def command_pair(lines: list[bytes]) -> tuple[float, float]:
        def ours() -> None:
            for line in lines:
                decode_command_line(line)

        def bare() -> None:
            for line in lines:
                try:
                    bare_decode(line)
                except msgspec.DecodeError:
                    pass

        return best_pair(ours, bare, args.repeat)

    commands = command_lines(n)
    invalid = sum(1 for c in commands if type(decode_command_line(c)).__name__ == "CommandRefusal")
    b_ours, b_bare = command_pair(commands)
    b_typed = command_typed(commands)
    valid_only = command_lines(n // 4, invalid_every=0)
    v_ours, v_bare = command_pair(valid_only)
    invalid_only = command_lines(n // 4, invalid_every=1)
    i_ours, i_bare = command_pair(invalid_only)
    document = GOLDEN.read_bytes()
    calls = 20_000

    def ours_c() -> None:
        for _ in range(calls):
            parse_frame_document(document)

    def bare_c() -> None:
        for _ in range(calls):
            hashlib.sha256(document).hexdigest()

    c_ours, c_bare = best_pair(ours_c, bare_c, args.repeat)
    c_ours, c_bare = c_ours / calls, c_bare / calls

    print(f"(a) events decode+re-encode, {n:,} lines ({sum(map(len, events)) / n:.0f} bytes avg)")
    print(f"    metaharness : {a_ours:7.3f} s  {a_ours / n * 1e6:6.2f} µs/line")
    print(f"    bare msgspec: {a_bare:7.3f} s  {a_bare / n * 1e6:6.2f} µs/line")
    print(f"    ratio       : {a_ours / a_bare:5.2f}x   (target ≤ 2x)")
    print(f"(b) command lines, {n:,} lines ({invalid:,} invalid)")
    print(f"    metaharness : {b_ours:7.3f} s  {b_ours / n * 1e6:6.2f} µs/line")
    print(f"    bare msgspec: {b_bare:7.3f} s  {b_bare / n * 1e6:6.2f} µs/line")
    print(f"    ratio       : {b_ours / b_bare:5.2f}x   (target ≤ 2x)")
    print(f"    bare typed msgspec (Decoder(Command), no § 1.5 checks or messages): {b_typed / n * 1e6:5.2f} µs/line, ratio {b_ours / b_typed:5.2f}x")
    print(f"    valid lines only  : {v_ours / len(valid_only) * 1e6:6.2f} µs/line vs {v_bare / len(valid_only) * 1e6:5.2f}  ratio {v_ours / v_bare:5.2f}x")
    print(f"    invalid lines only: {i_ours / len(invalid_only) * 1e6:6.2f} µs/line vs {i_bare / len(invalid_only) * 1e6:5.2f}  ratio {i_ours / i_bare:5.2f}x"
          "  (each gets its § 1.5 message; the baseline builds none)")
    print(f"(c) frame verify, golden document ({len(document)} bytes)")
    print(f"    metaharness : {c_ours * 1e6:6.2f} µs/call   (target < 30 µs)")
    print(f"    bare sha256 : {c_bare * 1e6:6.2f} µs/call")
    print(f"    ratio       : {c_ours / c_bare:5.2f}x")
    print_imports()


def import_ms(module: str, runs: int = 7) -> float:
    """Best wall time of importing `module` in a fresh interpreter, in ms."""
    import subprocess
    import sys

    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
               for _ in range(runs)) * 1e3


def print_imports() -> None:
    ours = import_ms("metaharness.protocol")
    bare = import_ms("msgspec")
    print("(d) import metaharness.protocol, fresh interpreter (best of 7)")
    print(f"    metaharness.protocol: {ours:6.1f} ms   (target ≤ 50 ms; msgspec included)")
    print(f"    msgspec alone       : {bare:6.1f} ms")


if __name__ == "__main__":
    main()
