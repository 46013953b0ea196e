"""What goes wrong, by name: every refusal name, warning code, command refusal code and close
reason a user can meet, with its cause and its fix, for the troubleshooting page.

What belongs here: one entry per name — the name as written on stderr or on the wire, where it is
met, its cause in one sentence and what to do about it. tools/troubleshooting.py renders this
table into docs/troubleshooting.md; tests/docs/test_troubleshooting.py fails when a name the code
writes (or the wire reference lists) has no entry here, or when the page is not the rendering.
The refusal names and command refusal codes are also constants in `protocol/refusals.py`, by which
the code names them; tests/test_refusal_names.py holds the two to the same names.
Pure data: nothing of ours is imported.
"""

from __future__ import annotations

from typing import NamedTuple

from .harnesses import spelled


class Trouble(NamedTuple):
    name: str
    where: str  # what the user ran, or where on the wire it shows
    cause: str
    fix: str


# A refused start: `metaharness: <Name>: <sentence>` on stderr, exit 2, nothing spawned.
START = "run start"
WORKFLOW = "workflow run / resume"
BATCH = "batch check / run"
REPLAY = "record / replay"
FRAME = "frame, run --frame"
INSPECT = "Inspect agent (metaharness.inspect)"

REFUSALS: tuple[Trouble, ...] = (
    Trouble("CommandUnavailable", START, "the run requires a command (`--require`, a workflow's `frame.set`/`message.inject`) the harness cannot honour.",
            "Drop the requirement, or pick a harness whose capabilities list the command (`metaharness run KIND --describe`)."),
    Trouble("CostNotSeen", f"{START}, {WORKFLOW}, {BATCH}", "`--max-cost-usd` (or a batch plan's `max_cost_usd`) was given where metaharness does not see the model traffic (`--credentials api-key`, `--model-endpoint`, a vendor's own login, an ACP harness without `--script`), or on a replay, whose answers cost nothing.",
            "Run through the credential proxy, the scripted loopback or `--record` (the spend guide lists which), or drop the budget."),
    Trouble("DecisionModeUnavailable", START, "the harness does not deliver the decision mode asked for (`--decisions`).",
            "Choose a mode the harness lists in its capabilities."),
    Trouble("OtelUnavailable", f"{START}, {WORKFLOW}, {BATCH}", "`--otel` was given and the otel extra (opentelemetry-sdk and its OTLP/HTTP exporter) is not installed.",
            "Install it (`pip install 'metaharness[otel]'`), or drop `--otel`."),
    Trouble("OptionForeign", START, "an option was given that belongs to another harness kind.",
            "Remove it, or run the harness it belongs to."),
    Trouble("OptionUnknown", WORKFLOW, "a workflow was given a run option its sessions do not take.",
            "Remove the option the sentence names; `metaharness workflow run --help` lists the ones a session takes."),
    Trouble("PolicyInvalid", START, "the `--policy` settings file could not be read as OHarness permission settings.",
            "Fix what the sentence names; the permission reference gives the format."),
    Trouble("PolicyUnavailable", START, "decision mode `policy` was asked for in a build without the permission engine.",
            "Install metaharness in full, or choose frame, ask or observe mode."),
    Trouble("PricesInvalid", START, "the `--prices` file (or `$METAHARNESS_PRICES`) is not a valid `metaharness.prices/1` table.",
            "Fix what the sentence names; the spend guide gives the format."),
    Trouble("ScriptChanged", WORKFLOW, "the scenario the workflow started with changed since, so a resume cannot continue it where the ledger stands.",
            "Pass `--script` to `workflow resume` to start that scenario from its first turn, or restore the file."),
    Trouble("ScriptInvalid", WORKFLOW, "the workflow's `--script` file is not a valid scenario.",
            "Fix what the sentence names; the format is on the scenarios page."),
    Trouble("WorkspaceDiffers", REPLAY, "the workspace a replay starts in does not hold what the recording started with; the sentence names the first file that differs.",
            "Restore the workspace to the recording's start (a clean checkout of the same commit), then replay."),
    Trouble("WorkspaceMoved", REPLAY, "the replay's `--cwd` is not the directory the cassette was recorded in.",
            "Replay in the recorded directory (leave `--cwd` out: the cassette names it)."),
    Trouble("AskWithoutDecider", WORKFLOW, "ask mode was chosen for a workflow, and nothing decides the calls.",
            "Pass `decide=` to `run_workflow` from Python, or use frame or policy mode on the command line."),
    Trouble("CassetteConflict", REPLAY, "a run was asked to record and replay at once, or to record a scripted model.",
            "Give one of `--record` and `--replay`; a scenario already scripts the model."),
    Trouble("CassetteInvalid", REPLAY, "the `--replay` file is not a cassette metaharness wrote.",
            "Point `--replay` at a file written by `--record`; record it again if it was edited."),
    Trouble("CassetteUnhosted", REPLAY, "a library caller set `record`/`replay` on a plain run, which nothing hosts.",
            "Start the run through `metaharness.api.start_run` (or the CLI), which hosts the recorder."),
    Trouble("CassetteUnwritable", REPLAY, "the `--record` path cannot be written.",
            "Choose a path in a directory you can write, that is not an existing directory."),
    Trouble("CredentialConflict", START, "`--script` was given with `--model-endpoint` or credentials other than `none`.",
            "A scripted run serves its own model: drop the endpoint and the credential mode."),
    Trouble("CredentialsUnknown", START, "`--credentials` names no credential mode.",
            "Use `loopback`, `api-key` or `none` (see the harness's guide)."),
    Trouble("CredentialsUnsupported", START, "the harness runs against a local model server only.",
            "Use `--script FILE`, or `--credentials none` with `--model-endpoint URL`."),
    Trouble("DenyOnlyUnavailable", START, "`--deny-only` needs a harness permission pipeline that decides an abstained call; this harness asks metaharness about every call.",
            "Drop `--deny-only` on opencode and Gemini CLI; decide the calls with a frame or policy instead."),
    Trouble("FrameConflict", START, "a library frame and `--frame` were both given.", "Give one frame."),
    Trouble("FrameInvalid", FRAME, "the frame document does not verify: not JSON, a field missing, or a digest that does not match its content.",
            "Edit the unsealed source and seal it again with `metaharness frame seal`; `metaharness frame verify` names what is wrong."),
    Trouble("FrameSetRefused", WORKFLOW, "the harness does not honour `frame.set`, which a workflow needs at every step boundary.",
            "Run the workflow on a harness whose capabilities include `frame.set` (`metaharness capabilities KIND`)."),
    Trouble("FrameUnreadable", FRAME, "the frame file cannot be read (missing, a directory, no permission).", "Check the path given to `--frame`."),
    Trouble("LedgerInvalid", WORKFLOW, "the run directory's `workflow.jsonl` has a line that is not a ledger record.",
            "Resume a directory written by `metaharness workflow run`, untouched; start a new run in a fresh `--out` otherwise."),
    Trouble("MemoryFileAbove", START, "a memory file (such as `AGENTS.md` or `CLAUDE.md`) above the working directory would reach the model unframed.",
            "Run in a working directory with no such file above it, or move the file."),
    Trouble("ModelInvalid", START, "`--model` is not `PROVIDER:MODEL` for a known provider, or it was given with `--script`.",
            "Spell it `anthropic:MODEL`, `openai:MODEL` or `chat:MODEL`; a scripted run takes no model."),
    Trouble("InspectAskMode", INSPECT, "`metaharness_agent(decisions=\"ask\")`: inside an Inspect sample there is nobody to ask.",
            "Use `decisions=\"inspect\"` to have the eval's approval policy decide, or a frame or policy."),
    Trouble("InspectDecisionsUnknown", INSPECT, "`metaharness_agent(decisions=...)` named no decision mode it knows.",
            "Use `frame`, `policy`, `observe` or `inspect`."),
    Trouble("InspectHarnessUnknown", INSPECT, "`metaharness_agent(harness=...)` named no harness metaharness drives.",
            f"Use {spelled()}."),
    Trouble("InspectNoPrompt", INSPECT, "the sample has no user message to start the harness's first turn with.",
            "Give the sample an `input`."),
    Trouble("InspectRunRefused", INSPECT, "`metaharness run` in the sample's sandbox exited refused without naming why (usually: `metaharness` is not installed there).",
            "Install metaharness in the sandbox, or pass `command=` with how to start it there; its stderr is in the error."),
    Trouble("NoApiKey", START, "the credential mode or provider needs an API key, and its variable is not set.",
            "Export the variable the sentence names (for example `ANTHROPIC_API_KEY` or `OPENAI_API_KEY`)."),
    Trouble("NoLedger", WORKFLOW, "`workflow resume` was pointed at a directory with no `workflow.jsonl`.", "Point it at the `--out` directory of a workflow run."),
    Trouble("NoModel", START, "oharness was started with neither a model nor a script.", "Give `--script FILE` (offline) or `--model PROVIDER:MODEL`."),
    Trouble("NoModelEndpoint", START, "`--credentials none` was given without an endpoint to talk to.", "Add `--model-endpoint URL`, or `--script FILE`."),
    Trouble("NoPrompt", START, "the harness needs a prompt to start its first turn.", "Add `-p TEXT`."),
    Trouble("ObserveCannotFrame", WORKFLOW, "a workflow was started in observe mode, which enforces nothing, so no step's frame could hold.", "Use frame (the default), ask or policy mode."),
    Trouble("ObserveWithFrame", START, "`--frame` was given with `--decisions observe`, which decides nothing by it.", "Drop `--frame`, or use frame mode."),
    Trouble("OperationNotEnforceable", WORKFLOW, "a node admits an operation (such as `subagent.spawn`) the harness cannot confine to the step's frame.", "Remove the operation from the node, or run the workflow on a harness that renders it."),
    Trouble("OutNotEmpty", WORKFLOW, "`--out` exists and is not an empty directory.", "Give a new or empty directory; use `workflow resume` to continue a run."),
    Trouble("PostureRefused", START, "Codex was given a posture it does not take.", "Use `read-only`, `workspace-write` or `danger-full-access`."),
    Trouble("PostureUnknown", START, "the harness does not accept that posture word.", "Use one of the postures `metaharness capabilities KIND` lists."),
    Trouble("RayStartFailed", BATCH, "`--backend ray` without `--ray-address` starts a Ray of its own on this machine, and it did not start.", "Read Ray's own words in the sentence (often: no free ports or shared memory); or give `--ray-address` of a running cluster."),
    Trouble("RayUnavailable", BATCH, "`--backend ray` was asked for, and Ray is not installed.", "`pip install 'metaharness[ray]'`, or use the local pool (the default)."),
    Trouble("RayUnreachable", BATCH, "nothing answered at `--ray-address` within a few seconds, or it refused the connection.", "Check the head node's address and GCS port (6379 by default) and that it is up; or leave `--ray-address` out and the batch starts a Ray of its own."),
    Trouble("RedactInvalid", REPLAY, "a `--redact` pattern is not a regular expression.", "Fix the pattern (Python `re` syntax)."),
    Trouble("ReplaceRelayUnavailable", START, "the Codex replace relay's private socket could not be opened.", "Check the scratch base is writable (`METAHARNESS_SCRATCH_DIR`), or run without `--codex-replace-relay`."),
    Trouble("ScenarioInvalid", START, "the `--script` file is not a valid `metaharness.scenario/1` document.", "Fix what the sentence names; the format is on the scenarios page."),
    Trouble("SchemaUnloadable", WORKFLOW, "a node's structured-answer schema cannot be loaded.", "Fix the schema file or its path in the workflow."),
    Trouble("ScratchInsideCwd", START, "the scratch directory would lie inside the working directory, where the agent could write it.", "Set `METAHARNESS_SCRATCH_DIR` outside the workspace."),
    Trouble("ScratchRefused", START, "the scratch base is not a private directory of yours (a symlink, another owner, writable by others).", "Use a base only you can enter, or unset `METAHARNESS_SCRATCH_DIR` for the default."),
    Trouble("SubagentUnavailable", START, "the frame admits `subagent.spawn`, and this harness's subagent calls never reach the seam.", "Do not admit `subagent.spawn` on the ACP harnesses (opencode, Gemini CLI, Qwen Code)."),
    Trouble("SubjectUnavailable", START, "the frame scopes subjects, and the harness does not show where a glob or grep call searches.", "Admit those operations without a subject scope on Gemini CLI, or use another harness."),
    Trouble("UnknownHarness", f"{WORKFLOW}, {BATCH}", "the harness kind is not one metaharness knows.", f"Use {spelled()}."),
    Trouble("VendorCapability", START, "the vendor binary did not complete its handshake (its control channel, its ACP initialise).", "Run `metaharness doctor KIND`; check the binary is the pinned version (`make vendor`)."),
    Trouble("VendorMissing", START, "the vendor binary is not on the child's PATH.", "Install it (`make vendor`) and pass `--vendor-dir .vendor/node_modules/.bin` (or set `METAHARNESS_VENDOR_DIR`)."),
    Trouble("VendorSettingInvalid", START, "a vendor setting metaharness carries from its environment (`METAHARNESS_CODEX_IDLE_TIMEOUT_MS`, `METAHARNESS_OPENCODE_TIMEOUT_MS`, `METAHARNESS_GEMINI_MAX_ATTEMPTS`, `METAHARNESS_QWEN_MAX_RETRIES` or `METAHARNESS_QWEN_TIMEOUT_MS`; the stderr line names which) is not a whole number of at least 1.",
            "Set it to a whole number, or unset it."),
    Trouble("VersionOffPin", START, "`--strict-version` was given and the binary is not the adapter's pinned version.", "Install the pin (`make vendor`), or drop `--strict-version` (then a `VERSION_OFF_PIN` warning is written)."),
    Trouble("WorkflowChanged", WORKFLOW, "the workflow file changed since the run started.", "Resume with the file the run started with; start a new run for the new file."),
    Trouble("WorkflowEnded", WORKFLOW, "`workflow resume` was pointed at a run that already ended.", "Start a new run in a fresh `--out`."),
    Trouble("WorkflowInvalid", f"{WORKFLOW}, {BATCH}", "the workflow file has problems (each is listed).", "Fix them; `metaharness workflow check FILE` lists them without running."),
    Trouble("WorkflowUnavailable", BATCH, "a batch task names a workflow, and this installation has no workflow runner.", "Install metaharness whole (`pip install -e .`)."),
    Trouble("WorkingDirectory", START, "`--cwd` does not exist.", "Create the directory, or point `--cwd` at an existing one."),
    Trouble("WorkspaceUnreachable", WORKFLOW, "a node's check or handoff needs the workspace, and it is not a directory this host can reach.", "Run with `--cwd` set to the workspace directory."),
)

# `command.result` refusal codes (the wire reference's "How a line is answered").
COMMAND_REFUSALS: tuple[Trouble, ...] = (
    Trouble("MALFORMED", "command.result", "the command line did not decode (not JSON, no format tag, an unknown command, a bad field), or a `deny` had no reason.", "Send one `metaharness.command/1` object a line; `metaharness schema command` gives its JSON Schema."),
    Trouble("SHADOWED", "command.result", "the run's configuration decides that control itself (a frame given at start, a decision mode), so the command would be ignored.", "Drop the conflicting run option, or do not send that command in this mode."),
    Trouble("TOO_LATE", "command.result", "the call was already decided or closed, the run is winding up, or the harness can no longer be reached (it died; a call is then closed by the wind-up's deny, an inject's turn never began).", "Decide each call once, while it is pending; nothing can be sent after the run began to end."),
    Trouble("UNKNOWN_CALL", "command.result", "`tool.decide` named a call id the run never presented.", "Use the `call_id` of a `tool.requested` line with `decision_required`."),
    Trouble("UNSUPPORTED_CONTROL", "command.result", "the harness cannot carry out that control.", "Check `metaharness capabilities KIND` before sending it."),
)

WARNINGS: tuple[Trouble, ...] = (
    Trouble("BUDGET_REACHED", "warning", "the model traffic metaharness priced reached `--max-cost-usd`; no further model request is forwarded and the run stops (close reason `budget`).",
            "Raise the budget, or resume the workflow with a larger one; the warning says what was spent and at which price date."),
    Trouble("COST_DISAGREES", "warning", "the harness's own cost and metaharness's priced figure differ by more than 5 %.",
            "Check the price table's date and the model name; lay a `--prices` file over it if the vendor's prices changed."),
    Trouble("MODEL_REQUEST_FAILED", "warning", "a model request failed (refused connection, DNS, timeout, an HTTP error status, overload, a cut or malformed stream); it names the provider, the status and the provider's own message.",
            "Fix what it names (the endpoint, the key, the quota); `--fail-on-error` makes the run exit 1 when the session failed."),
    Trouble("PRICE_UNKNOWN", "warning", "a budget is set and the price table has no row for the model the harness asked for, so the run stops rather than spend unpriced.",
            "Add the model (or a `\"*\"` row) in a `--prices` file."),
    Trouble("AMBIENT_INPUT", "warning", "something ambient (a memory file, a settings file) reached the model that metaharness reports but did not remove.", "Remove it from the workspace or the home, or accept it knowingly."),
    Trouble("COMMAND_NOT_APPLIED", "warning", "an accepted `frame.set` or `message.inject` never took effect (superseded, the run ended first, or the harness could no longer be reached at its turn).", "Send it earlier, or expect only the last one before a boundary to apply."),
    Trouble("COVERAGE_GAP", "warning", "the harness offers a tool the decision seam does not cover.", "Read the harness's guide; deny the operation in the frame if it matters."),
    Trouble("NO_FRAME_IN_FORCE", "warning", "frame mode with no frame: calls are abstained on.", "Give `--frame FILE`, or send `frame.set` before the first call."),
    Trouble("NO_TERMINAL_RECORD", "warning", "the harness ended without a terminal record; the warning carries its stderr, and the reason when it died where the run wrote to it (`the harness can no longer be reached: …`).", "Read the stderr it carries; `metaharness doctor KIND` checks the binary."),
    Trouble("OTEL_SPANS_DROPPED", "warning", "under `--otel` (or the OTEL_* variables), some of the run's spans did not reach the collector: it was unreachable or slow, answered with an error, or the bounded queue was full. The run itself was not held up; the warning counts the spans lost, once, just before `stream.closed`.",
            "Check the collector's address (`--otel URL`, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and that it is up; `metaharness export otel` sends the finished stream again."),
    Trouble("PENDING_CALL_ABANDONED", "warning", "a pending call was closed by turn end, stream end, `interrupt` or `halt` before it was decided.", "Decide calls within the deadline (`--decision-timeout-ms`); this is expected after an interrupt."),
    Trouble("PROXY_REFUSED", "warning", "the harness (or its agent) sent the credential proxy a request that is not a model endpoint; it was refused 403.", "Nothing to do for a run; it names what the agent tried."),
    Trouble("REPLAY_DIVERGED", "warning", "the replayed run asked the model something the cassette does not hold.", "Record again, or replay into the same workspace contents; `--replay-lenient` goes on past it."),
    Trouble("REQUEST_MUTATED", "warning", "a call id was presented again with a different input; the call is denied.", "Nothing to do: the harness changed a call after it was decided."),
    Trouble("RETAIN_FAILED", "warning", "copying to `--retain-dir` failed, naming the path.", "Point `--retain-dir` at a writable directory with room."),
    Trouble("UNCOVERED_TOOL", "warning", "a called tool resolves to no operation, so no frame can admit it.", "Expect it denied; tell the harness not to use that tool."),
    Trouble("UNDECIDED_CALL_RAN", "warning", "a tool result came for a call metaharness presented and never decided: something answered the harness around the seam.", "Treat the run as compromised; read the security page."),
    Trouble("VENDOR_API_RETRY", "warning", "the vendor reported retrying a model request, in its own words.", "Check the model endpoint and its rate limits."),
    Trouble("VENDOR_BACKGROUND_TASKS", "warning", "the vendor reported background tasks, in its own words.", "Nothing to do; it is the vendor's notice."),
    Trouble("VENDOR_ERROR", "warning", "the vendor reported an error, in its own words.", "Read its message; `metaharness doctor KIND` checks the binary."),
    Trouble("VENDOR_NOTICE", "warning", "the vendor wrote a notice, in its own words.", "Nothing to do; it is the vendor's notice."),
    Trouble("VENDOR_PERMISSION_DENIED", "warning", "the vendor's own permission system denied a call, in its own words.", "Nothing to do; the call did not run."),
    Trouble("VENDOR_WARNING", "warning", "the vendor wrote a warning, in its own words.", "Read its message."),
    Trouble("VERSION_OFF_PIN", "warning", "the vendor binary is not the adapter's pinned version.", "Install the pin (`make vendor`); `--strict-version` refuses such a start instead."),
)

CLOSE_REASONS: tuple[Trouble, ...] = (
    Trouble("budget", "stream.closed", "`--max-turns` or `--max-cost-usd` was reached, or the vendor said its budget was exhausted.", "Raise the budget if the run needed more."),
    Trouble("completed", "stream.closed", "the session ended without error.", "Nothing to do."),
    Trouble("error", "stream.closed", "the session ended in error, ended with no terminal record, or the start was refused.", "Read the warnings and stderr before it; a refused start names its refusal on stderr."),
    Trouble("killed", "stream.closed", "a library embedder killed the child itself.", "Nothing to do if you meant it."),
    Trouble("steer-halt", "stream.closed", "a `halt` command was processed, or SIGINT/SIGTERM stopped the run.", "Nothing to do if you meant it."),
)
