"""A scripted ACP agent for the adapter's fail-closed tests: it speaks the wire the way
opencode or Gemini CLI do (`--flavour opencode|gemini`, set by its wrapper script) and misbehaves on
purpose. The behaviour is chosen by a word in the prompt text:

SHELL      one permission request; on allow it writes ran.txt in its cwd
TWO        two permission requests at once; each allowed one writes ran-<n>.txt
DIE        a permission request, then the process exits mid-call
MODE       switches its own mode away from the pinned one, then asks
IGNORE     a permission request; after the answer it goes silent (logs cancel-seen on session/cancel)
LATE       opencode style: the arguments arrive in a tool_call_update after the request
NOARGS     opencode style: the arguments never arrive
GARBAGE    a garbage line and an answer to nothing first, then SHELL
UNREADABLE a permission request without options, then SHELL
"""

import json
import os
import sys
import threading
import time

FLAVOUR = sys.argv[sys.argv.index("--flavour") + 1]
VERSION = "0.61.0" if FLAVOUR == "gemini" else "1.18.33"
ANONYMOUS = "--anonymous" in sys.argv  # its `initialize` names no version
if "--version" in sys.argv:
    print(VERSION)
    sys.exit(0)
OPTIONS = {
    "opencode": [{"optionId": "once", "kind": "allow_once", "name": "Allow once"},
                 {"optionId": "always", "kind": "allow_always", "name": "Always allow"},
                 {"optionId": "reject", "kind": "reject_once", "name": "Reject"}],
    "gemini": [{"optionId": "proceed_always", "kind": "allow_always", "name": "Allow for this session"},
               {"optionId": "proceed_once", "kind": "allow_once", "name": "Allow"},
               {"optionId": "cancel", "kind": "reject_once", "name": "Reject"}],
}[FLAVOUR]
ALLOW = "once" if FLAVOUR == "opencode" else "proceed_once"
SESSION = "ses_fake"
lock = threading.Lock()
waiting: dict = {}  # our request id → threading.Event, answer
log = open(os.path.join(os.getcwd(), "agent-wire.log"), "a")


def send(message: dict) -> None:
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def raw(line: str) -> None:
    with lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def update(body: dict) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SESSION, "update": body}})


def ask(request_id: int, tool_call: dict, options=OPTIONS) -> dict | None:
    event = threading.Event()
    waiting[request_id] = [event, None]
    send({"jsonrpc": "2.0", "id": request_id, "method": "session/request_permission",
          "params": {"sessionId": SESSION, "toolCall": tool_call, "options": options}})
    event.wait()
    return waiting[request_id][1]


def call_id(n: int) -> str:
    return f"call_{n}" if FLAVOUR == "opencode" else f"run_shell_command__fake_{n}"


def shell_call(n: int, command: str) -> dict:
    if FLAVOUR == "opencode":
        update({"sessionUpdate": "tool_call", "toolCallId": call_id(n), "title": "bash", "kind": "execute",
                "status": "pending", "rawInput": {"cwd": os.getcwd()}})
        update({"sessionUpdate": "tool_call_update", "toolCallId": call_id(n), "status": "in_progress",
                "title": command, "rawInput": {"command": command, "cwd": os.getcwd()}})
        return {"toolCallId": call_id(n), "title": command, "kind": "execute", "status": "pending",
                "rawInput": {"command": command}}
    return {"toolCallId": call_id(n), "status": "pending", "title": command, "kind": "execute",
            "content": [{"type": "content", "content": {"type": "text", "text": f"[current working directory {os.getcwd()}]"}}],
            "locations": []}


def run_shell(n: int, answer: dict | None, name: str) -> None:
    allowed = isinstance(answer, dict) and answer.get("result", {}).get("outcome", {}).get("optionId") == ALLOW
    if allowed:
        open(os.path.join(os.getcwd(), name), "w").write("ran\n")
    update({"sessionUpdate": "tool_call_update", "toolCallId": call_id(n),
            "status": "completed" if allowed else "failed",
            "rawOutput": {"output": "ok" if allowed else "rejected", "metadata": {"exit": 0 if allowed else None}}})


def turn(request_id: int, text: str) -> None:
    word = next((w for w in ("SHELL", "TWO", "DIE", "MODE", "IGNORE", "LATE", "NOARGS", "GARBAGE", "UNREADABLE")
                 if w in text), "SHELL")
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"doing {word}"}})
    if word == "GARBAGE":
        raw("}}this is not json{{")
        send({"jsonrpc": "2.0", "id": 999, "result": {"surprise": True}})
    if word == "UNREADABLE":
        ask(50, {"toolCallId": "bad_1", "title": "x"}, options="not a list")
    if word in ("SHELL", "GARBAGE", "UNREADABLE"):
        run_shell(1, ask(100, shell_call(1, "echo hi > ran.txt")), "ran.txt")
    elif word == "TWO":
        results = {}
        threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, ask(100 + n, shell_call(n, f"echo {n}"))))
                   for n in (1, 2)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        for n in (1, 2):
            run_shell(n, results[n], f"ran-{n}.txt")
    elif word == "DIE":
        send({"jsonrpc": "2.0", "id": 100, "method": "session/request_permission",
              "params": {"sessionId": SESSION, "toolCall": shell_call(1, "echo hi > ran.txt"), "options": OPTIONS}})
        time.sleep(0.3)
        os._exit(7)
    elif word == "MODE":
        update({"sessionUpdate": "current_mode_update", "currentModeId": "yolo" if FLAVOUR == "gemini" else "plan"})
        run_shell(1, ask(100, shell_call(1, "echo hi > ran.txt")), "ran.txt")
    elif word == "IGNORE":
        ask(100, shell_call(1, "echo hi > ran.txt"))
        threading.Event().wait()  # silent for good; only a closed stdin ends us
    elif word in ("LATE", "NOARGS"):
        update({"sessionUpdate": "tool_call", "toolCallId": "call_g", "title": "glob", "kind": "search",
                "status": "pending", "rawInput": {"cwd": os.getcwd()}})
        tool_call = {"toolCallId": "call_g", "title": "*.txt", "kind": "search", "status": "pending",
                     "rawInput": {"pattern": "*.txt"}}
        if word == "LATE":
            def later() -> None:
                time.sleep(0.3)
                update({"sessionUpdate": "tool_call_update", "toolCallId": "call_g", "status": "in_progress",
                        "rawInput": {"pattern": "*.txt", "path": "/etc", "cwd": os.getcwd()}})
            threading.Thread(target=later).start()
        ask(100, tool_call)
        update({"sessionUpdate": "tool_call_update", "toolCallId": "call_g", "status": "failed"})
    update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}})
    send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn",
                                                         "usage": {"inputTokens": 3, "outputTokens": 2}}})


def guard() -> None:
    """What the opencode adapter's guard plugin does inside opencode when it opens a session:
    PR_SET_DUMPABLE 0, the processes it starts from then on without the server password, and
    what it found recorded where the adapter looks for it."""
    import ctypes
    import subprocess

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl(4, 0, 0, 0, 0)
    os.environ.pop("OPENCODE_SERVER_PASSWORD", None)
    inherited = subprocess.run(["/usr/bin/env"], capture_output=True, text=True).stdout.splitlines()
    spawns = not any(line.startswith("OPENCODE_SERVER_PASSWORD=") for line in inherited)
    with open(os.environ["METAHARNESS_GUARD_FILE"], "w") as handle:
        json.dump({"dumpable": prctl(3, 0, 0, 0, 0), "spawns": spawns, "pid": os.getpid()}, handle)


def main() -> None:
    for line in sys.stdin:
        log.write(line)
        log.flush()
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": 1, "agentCapabilities": {}, "authMethods": [],
                "agentInfo": {"name": FLAVOUR} if ANONYMOUS else {"name": FLAVOUR, "version": VERSION}}})
        elif method == "session/new":
            mode = "default" if FLAVOUR == "gemini" else "build"
            if FLAVOUR == "opencode":
                guard()
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": SESSION, "modes": {
                "currentModeId": mode, "availableModes": [{"id": mode, "name": mode}]}}})
        elif method == "session/prompt":
            text = " ".join(block.get("text", "") for block in message["params"]["prompt"])
            threading.Thread(target=turn, args=(message["id"], text), daemon=True).start()
        elif method == "session/cancel":
            open(os.path.join(os.getcwd(), "cancel-seen"), "w").write("yes\n")
        elif "id" in message and message["id"] in waiting:
            waiting[message["id"]][1] = message
            waiting[message["id"]][0].set()


if __name__ == "__main__":
    main()
