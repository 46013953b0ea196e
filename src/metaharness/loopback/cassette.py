"""`metaharness.cassette/1` — a recorded run's model traffic, one exchange a JSON line.

What belongs here: the line's shape, which part of a request is its *conversation state* per
wire (a table, so a new wire is one row), the state's digest, the first part where two states
differ, redaction, and reading a cassette back. Pure: no I/O except `read_cassette`.

Rules it keeps: credentials never reach a line — request and response headers are recorded
from an allowlist, a query parameter that carries a key is masked, and every credential value
seen on the exchange is masked wherever else it appears; `--redact` patterns mask matching text
in the request and the response alike, before the digest is taken, and a masked span matches
any text when a live request is compared with the recording; text a harness mints afresh on every
run (`MINTED_TEXT`: scratch names, command-runner ids and times, the day's date in each vendor's own
sentence) is read as a token in the state and nothing else is; exchanges are numbered from 1 in
the order the requests arrived.

A line:

    {"format": "metaharness.cassette/1", "exchange": 1, "wire": "anthropic-messages",
     "request": {"method": "POST", "path": "/v1/messages", "headers": {…}, "body": {…}},
     "state": {"part": "messages", "digest": "sha256:…"},
     "response": {"status": 200, "headers": {"content-type": "text/event-stream"}, "body": "event: …"}}

`body` is the decoded JSON of a JSON request (text otherwise); a response body is its text,
or `body_base64` when it is not UTF-8.

The first line of a cassette written by `metaharness run --record` is the *recording*: what a
replay needs from the run that made it (`Recording`: the harness, the model, the working
directory's path and a manifest of its starting contents, each file's path and sha256):

    {"format": "metaharness.cassette/1", "recording": {"harness": "oharness", "model": "anthropic:…",
     "cwd": "/work/repo", "workspace": {"a.txt": "sha256:…", "bin/run": "link:../x"}}}

A cassette without one (hand-made, or from an embedder's own `RecordingProxy`) still replays;
its replay then takes the model and the working directory from the replaying run alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import os
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit

from metaharness.protocol.harnesses import KINDS

CASSETTE_FORMAT = "metaharness.cassette/1"
MASK = "[redacted]"
CREDENTIAL_MASK = "[credential]"

# (how the path ends, wire name, the body key holding the conversation, and per item type the keys
# the client mints afresh on every run, which are no part of the state). A path no row matches is a
# request of an unknown wire: its whole body is its state.
WIRES: list[tuple[str, str, str | None, dict[str, tuple[str, ...]]]] = [
    ("/messages", "anthropic-messages", "messages", {}),
    # Codex mints the ids of the messages and tool outputs it sends.
    ("/responses", "openai-responses", "input", {"message": ("id",), "function_call_output": ("id",),
                                                 "custom_tool_call_output": ("id",)}),
    ("/chat/completions", "openai-chat", "messages", {}),
    (":generateContent", "gemini", "contents", {}),
    (":streamGenerateContent", "gemini", "contents", {}),
]
# Text minted afresh on every run that a harness writes into its conversation, read in the state as
# a token so two runs of one conversation have one state: the names of metaharness's per-run scratch
# directories (a path component: `<kind>-` and eight random characters, for every harness kind; Codex
# lists its skills under it, and Gemini CLI names its project temporary directory, which lives in the
# scratch HOME, in the session context it sends as its first user turn); the id and wall time Codex's
# command runner puts at the head of every command's output; and the day's date each vendor writes
# into the conversation it sends — the clock of the day the run was made, so a replay on a later day would
# diverge at its first request. Only the date inside each vendor's own sentence is a token, each in
# that vendor's format (as its pinned build writes it); a date anywhere else in the conversation is content.
TODAY = "<date>"
MINTED_TEXT: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"(?<=/)(?:{'|'.join(KINDS)})-[a-z0-9_]{{8}}(?![a-z0-9_.-])"), "<run scratch>"),
    (re.compile(r"\bChunk ID: [0-9a-f]+"), "Chunk ID: <id>"),
    (re.compile(r"\bWall time: [0-9.]+ seconds"), "Wall time: <time> seconds"),
    # Claude Code: "Today's date is 2026-12-02." in the context of its first user message.
    (re.compile(r"\bToday's date is \d{4}-\d{2}-\d{2}\."), f"Today's date is {TODAY}."),
    # Codex: its environment context's <current_date>2026-12-02</current_date>.
    (re.compile(r"<current_date>\d{4}-\d{2}-\d{2}</current_date>"), f"<current_date>{TODAY}</current_date>"),
    # opencode: "Today's date: Wed Dec 02 2026" (JavaScript's Date.toDateString) in its system message.
    (re.compile(r"\bToday's date: [A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{4}\b"), f"Today's date: {TODAY}"),
    # Gemini CLI: "Today's date is Wednesday, December 2, 2026 (formatted according to the user's locale)."
    (re.compile(r"\bToday's date is [^\n()]{1,80} \(formatted according to the user's locale\)"),
     f"Today's date is {TODAY} (formatted according to the user's locale)"),
    # Qwen Code: "Today's date is Wednesday, December 2, 2026." (always en-US) in its startup context, and
    # "The current date is: Wednesday, December 2, 2026." in the reminder it adds when the day changes.
    (re.compile(r"\b(Today's date is|The current date is:) [A-Z][a-z]+, [A-Z][a-z]+ \d{1,2}, \d{4}\."),
     rf"\1 {TODAY}."),
]
REQUEST_HEADERS = frozenset({"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta",
                             "user-agent", "x-stainless-lang", "x-stainless-package-version"})
RESPONSE_HEADERS = frozenset({"content-type", "cache-control", "request-id", "x-request-id", "openai-model"})
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key", "proxy-authorization",
                                "cookie"})
CREDENTIAL_QUERY = frozenset({"key", "api_key", "api-key", "access_token"})


class CassetteError(ValueError):
    """A cassette that cannot be read; the message names the file and line."""


# --- the recording: what a replay needs from the run that made it -----------------------------

# Directories a manifest leaves out: their contents change when a harness only reads the tree
# (git refreshes its index on `git status`), so they would refuse every replay for nothing.
MANIFEST_SKIPPED = frozenset({".git"})


@dataclass(frozen=True)
class Recording:
    harness: str
    model: str | None
    cwd: str
    workspace: dict[str, str] = field(default_factory=dict)  # relative path → "sha256:…" | "link:<target>"

    def line(self) -> bytes:
        body = {"harness": self.harness, "model": self.model, "cwd": self.cwd, "workspace": self.workspace}
        return json.dumps({"format": CASSETTE_FORMAT, "recording": body}, ensure_ascii=False,
                          separators=(",", ":")).encode() + b"\n"


def _file_digest(path: str) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


def workspace_manifest(root: str) -> dict[str, str]:
    """Every file under `root` (relative path, `/`-separated) → its digest, a symlink → its target;
    the directories in MANIFEST_SKIPPED are left out. Sorted by path."""
    found: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in MANIFEST_SKIPPED or directory != root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            try:
                found[relative] = ("link:" + os.readlink(path)) if os.path.islink(path) else _file_digest(path)
            except OSError as exc:
                found[relative] = f"unreadable:{exc.strerror or exc}"
    return dict(sorted(found.items()))


def first_workspace_difference(recorded: dict[str, str], live: dict[str, str]) -> tuple[str, str] | None:
    """(the first path, in path order, where `live` differs from `recorded`, how), or None."""
    for path in sorted(set(recorded) | set(live)):
        if path not in live:
            return path, "is missing (the recording started with it)"
        if path not in recorded:
            return path, "was not there when the recording started"
        if recorded[path] != live[path]:
            return path, "has other contents than when the recording started"
    return None


def _row(path: str) -> tuple[str, str | None, dict[str, tuple[str, ...]]]:
    route = urlsplit(path).path.rstrip("/")
    for suffix, wire, key, minted in WIRES:
        if route.endswith(suffix):
            return wire, key, minted
    return "http", None, {}


def wire_of(path: str) -> str:
    """The wire a request path speaks (`http` when no row knows it)."""
    return _row(path)[0]


def _without_minted(items: Any, minted: dict[str, tuple[str, ...]]) -> Any:
    if minted and isinstance(items, list):
        items = [{k: v for k, v in item.items() if k not in minted.get(str(item.get("type")), ())}
                 if isinstance(item, dict) else item for item in items]
    return _unminted_names(items)


def _unminted_names(value: Any) -> Any:
    if isinstance(value, str):
        for pattern, token in MINTED_TEXT:
            value = pattern.sub(token, value)
        return value
    if isinstance(value, list):
        return [_unminted_names(item) for item in value]
    if isinstance(value, dict):
        return {k: _unminted_names(v) for k, v in value.items()}
    return value


def conversation_state(path: str, body: Any) -> tuple[str, Any]:
    """(the part's name, its value): the history the harness sent, or the whole body."""
    _wire, key, minted = _row(path)
    if key is not None and isinstance(body, dict):
        return key, _without_minted(body.get(key), minted)
    return "body", body


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


# --- masking ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redactor:
    """Masks `--redact` patterns and the credentials seen on one exchange, in any string."""

    patterns: tuple[re.Pattern[str], ...] = ()
    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, patterns: Iterable[str]) -> "Redactor":
        return cls(tuple(re.compile(p) for p in patterns))

    def with_secrets(self, secrets: Iterable[str]) -> "Redactor":
        found = tuple(sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True))
        return Redactor(self.patterns, found)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, CREDENTIAL_MASK)
        for pattern in self.patterns:
            value = pattern.sub(MASK, value)
        return value

    def value(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list):
            return [self.value(item) for item in obj]
        if isinstance(obj, dict):
            return {self.text(k): self.value(v) for k, v in obj.items()}
        return obj


def credentials_in(headers: Iterable[tuple[str, str]], target: str) -> list[str]:
    """Every credential value a request carries: auth headers (and their bearer tokens), key parameters."""
    found: list[str] = []
    for name, value in headers:
        if name.lower() in CREDENTIAL_HEADERS:
            found.append(value.strip())
            scheme, _, token = value.partition(" ")
            if token:
                found.append(token.strip())
    found += [v for k, v in parse_qsl(urlsplit(target).query, keep_blank_values=True) if k.lower() in CREDENTIAL_QUERY]
    return found


def recorded_target(target: str) -> str:
    parts = urlsplit(target)
    if not parts.query:
        return parts.path
    query = [(k, CREDENTIAL_MASK if k.lower() in CREDENTIAL_QUERY else v)
             for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return f"{parts.path}?{urlencode(query)}"


def kept_headers(headers: Iterable[tuple[str, str]], allowed: frozenset[str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers if name.lower() in allowed}


# --- exchanges ---------------------------------------------------------------------------------


def decode_request_body(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def exchange_line(number: int, method: str, target: str, request_headers: list[tuple[str, str]], request_body: bytes,
                  status: int, response_headers: list[tuple[str, str]], response_body: bytes,
                  redactor: Redactor) -> bytes:
    """One cassette line, masked: the allowlisted headers, the bodies, the state's digest."""
    mask = redactor.with_secrets(credentials_in(request_headers, target))
    path = recorded_target(target)
    body = mask.value(decode_request_body(request_body))
    part, state = conversation_state(path, body)
    response: dict[str, Any] = {"status": status, "headers": mask.value(kept_headers(response_headers, RESPONSE_HEADERS))}
    try:
        response["body"] = mask.text(response_body.decode("utf-8"))
    except UnicodeDecodeError:
        response["body_base64"] = base64.b64encode(response_body).decode("ascii")
    line = {
        "format": CASSETTE_FORMAT, "exchange": number, "wire": wire_of(path),
        "request": {"method": method, "path": mask.text(path),
                    "headers": mask.value(kept_headers(request_headers, REQUEST_HEADERS)), "body": body},
        "state": {"part": part, "digest": digest(state)},
        "response": response,
    }
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass
class Exchange:
    number: int
    wire: str
    method: str
    path: str
    body: Any
    part: str
    digest: str
    status: int
    response_headers: dict[str, str]
    response_body: bytes

    @property
    def route(self) -> tuple[str, str]:
        return self.method, urlsplit(self.path).path

    @property
    def state(self) -> Any:
        return conversation_state(self.path, self.body)[1]


def read_cassette(path: str) -> list[Exchange]:
    """Every exchange of a cassette, in exchange order; CassetteError names what is wrong."""
    try:
        with open(path, "rb") as handle:
            raw_lines = handle.read().splitlines()
    except OSError as exc:
        raise CassetteError(f"the cassette {path} cannot be read: {exc.strerror or exc}") from None
    exchanges: list[Exchange] = []
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if line.get("format") != CASSETTE_FORMAT:
                raise ValueError(f"its format is not {CASSETTE_FORMAT}")
            if "recording" in line:
                continue  # read by read_recording
            request, response = line["request"], line["response"]
            body = (base64.b64decode(response["body_base64"]) if "body_base64" in response
                    else response["body"].encode("utf-8"))
            exchanges.append(Exchange(
                number=int(line["exchange"]), wire=str(line["wire"]), method=str(request["method"]),
                path=str(request["path"]), body=request.get("body"), part=str(line["state"]["part"]),
                digest=str(line["state"]["digest"]), status=int(response["status"]),
                response_headers=dict(response.get("headers") or {}), response_body=body))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CassetteError(f"{path}:{number} is not a {CASSETTE_FORMAT} exchange ({exc})") from None
    exchanges.sort(key=lambda e: e.number)
    return exchanges


def read_recording(path: str) -> Recording | None:
    """The cassette's recording line (its first line), or None for a cassette without one."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline()
    except OSError as exc:
        raise CassetteError(f"the cassette {path} cannot be read: {exc.strerror or exc}") from None
    try:
        line = json.loads(first) if first.strip() else {}
        if not isinstance(line, dict) or "recording" not in line:
            return None
        body = line["recording"]
        workspace = body.get("workspace") or {}
        if not isinstance(workspace, dict):
            raise ValueError("its workspace is not an object")
        return Recording(harness=str(body["harness"]), model=body.get("model"), cwd=str(body["cwd"]),
                         workspace={str(k): str(v) for k, v in workspace.items()})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CassetteError(f"{path}:1 is not a {CASSETTE_FORMAT} recording line ({exc})") from None


# --- comparing a live request with the recording ----------------------------------------------


def _masked_match(recorded: str, live: str) -> bool:
    if MASK not in recorded and CREDENTIAL_MASK not in recorded:
        return recorded == live
    pieces = re.split(f"({re.escape(MASK)}|{re.escape(CREDENTIAL_MASK)})", recorded)
    regex = "".join(".*?" if p in (MASK, CREDENTIAL_MASK) else re.escape(p) for p in pieces)
    return re.fullmatch(regex, live, re.DOTALL) is not None


def first_difference(recorded: Any, live: Any, where: str) -> str | None:
    """The path of the first part where `live` differs from `recorded` (None: they agree).

    A masked span of the recording matches any text, so a redacted cassette still replays."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        for key in list(recorded) + [k for k in live if k not in recorded]:
            if key not in recorded or key not in live:
                return f"{where}.{key}"
            found = first_difference(recorded[key], live[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(live, list):
        for index, (a, b) in enumerate(zip(recorded, live)):
            found = first_difference(a, b, f"{where}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(live):
            return f"{where}[{min(len(recorded), len(live))}]"
        return None
    if isinstance(recorded, str) and isinstance(live, str):
        return None if _masked_match(recorded, live) else where
    return None if recorded == live and type(recorded) is type(live) else where
