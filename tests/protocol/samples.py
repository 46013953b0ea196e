"""One filled-in instance of every event and command type (every optional field set
where it can be), shared by the round-trip and encoding tests."""

from __future__ import annotations

from metaharness.protocol.commands import FrameSet, Halt, Interrupt, MessageInject, PermissionSet, Steer, ToolDecide
from metaharness.protocol.events import (
    AuthExpired, CommandResult, Injection, Opaque, RateLimit, SessionEnded, SessionStarted, StepEntered, StepLeft,
    StreamClosed, Text, Thinking, ThinkingEstimate, ToolDecided, ToolRequested, ToolResult, TurnEnded, TurnStarted,
    UsageReport, WarningEvent,
)
from metaharness.protocol.values import (
    Abstain, Allow, Completed, DecisionCensus, Deny, Exited, Failed, FinalAnswer, HermeticAttestation, ImposedRow,
    InstalledPlugin, McpServerRef, NoVerdict, ObservedModel, Ok, PermissionDenial, PluginRef, PolicyAsk,
    RateLimitInfo, Replace, Signaled, StepRef, TranscriptRef, UnavailableRow, UnknownTermination, Usage,
    WithheldTool, refused,
)

D = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12"
STEP = StepRef(workflow="development/default", state="implement", index=2, attempt=1)
USAGE = Usage(input_tokens=10, output_tokens=20, cache_read_input_tokens=30, cache_creation_input_tokens=0,
              service_tier="standard", thinking_tokens=5, iterations=2, speed="fast", cost_usd=0.0123)

EVENTS = [
    SessionStarted(adapter="claude", adapter_class="harness", harness_version="2.1.328", session_id="s1", model="m",
                   permission_mode="default", credential_source="none", output_style="default", cwd="/w",
                   offered_tools=["Bash", "Read"], available_operations=["shell", "file.read"],
                   withheld=[WithheldTool(tool="Glob", reason="not offered")], slash_commands=["/x"], skills=["s"],
                   agents=["a"], plugins=[PluginRef(name="p", source="dir", version="1")],
                   mcp_servers=[McpServerRef(name="srv", status="connected")], inputs_digest=D,
                   transcript=TranscriptRef(path="/t.jsonl", digest=None, bytes=None),
                   hermetic=HermeticAttestation(mode="on", decisions="frame", imposed=[ImposedRow(row="h3", how="allowlist")],
                                                unavailable=[UnavailableRow(row="h9", why="no pin")], ambient_inputs=["git"],
                                                installed_plugins=[InstalledPlugin(name="p", source="dir", installed_at="now", digest=D, loaded_by="flag")],
                                                deny_only=True)),
    SessionEnded(final_answer=FinalAnswer(text="done", turn_id="t1"),
                 observed_models=[ObservedModel(turn=1, turn_id="t1", model="m")], is_error=False, subtype="success",
                 stop_reason="end_turn", terminal_reason="completed", api_error_status=None, num_turns=1, duration_ms=10,
                 duration_api_ms=8, ttft_ms=3, time_to_request_ms=1, total_cost_usd=0.5,
                 permission_denials=[PermissionDenial(tool_name="Bash", tool_use_id="t", tool_input={"b": 1, "a": 2})],
                 subagents_spawned=0, usage=USAGE, model_usage={"z-model": USAGE, "a-model": Usage()},
                 census=DecisionCensus(allowed=1, denied=2, replaced=0, abstained=1,
                                       by_seam={"none": 1, "hook": 3}, by_decider={"frame": 3, "adapter": 1})),
    StepEntered(step=STEP, frame_digest=D),
    StepLeft(step=STEP, outcome=Completed()),
    StepLeft(step=STEP, outcome=Failed(reason="red")),
    StepLeft(step=STEP, outcome=NoVerdict(reason="?")),
    TurnStarted(turn=1, frame_digest=D),
    TurnEnded(turn=1, stop_reason="end_turn"),
    Text(text="héllo / \u2028 \x01", request_id="req_1"),
    Thinking(text="hmm", request_id=None),
    ThinkingEstimate(estimate=12, delta=-3),
    Injection(text="frame text", origin="frame"),
    ToolRequested(call_id="c1", name="Bash", input={"z": {"y": 1, "b": [{"d": 1, "c": 2}]}, "a": "x"},
                  operations=["shell"], subjects=["proc:/usr/bin/ls"], decision_required=True, deadline_ms=55000,
                  seam="hook", policy=PolicyAsk(reason="ask rule", rule="Bash(ls:*)", scope="project", principal="user")),
    ToolRequested(call_id="c2", name="Read", input="raw", decision_required=False, seam="none"),
    ToolDecided(call_id="c1", decision=Allow(), decided_by="embedder", seam="hook", latency_ms=2),
    ToolDecided(call_id="c1", decision=Deny(reason="no"), decided_by="frame", seam="owned_tool"),
    ToolDecided(call_id="c1", decision=Replace(input={"b": 1, "a": 2}), decided_by="policy", seam="control_request"),
    ToolDecided(call_id="c1", decision=Abstain(), decided_by="adapter", seam="none"),
    ToolResult(exit_code=-1, outcome_source="tool_use_result", call_id="c1", is_error=True,
               content=[{"type": "text", "text": "x"}], bytes=18446744073709551615, tool_use_result={"stdout": ""}),
    UsageReport(request_id="r", model="m", usage=USAGE),
    RateLimit(info=RateLimitInfo(status="allowed", window="five_hour", resets_at=1787470800, utilization=0.25, using_overage=False)),
    CommandResult(id="c1", outcome=Ok(applies_at="next step")),
    CommandResult(id="-", outcome=refused("MALFORMED", "bad")),
    WarningEvent(code="NO_FRAME_IN_FORCE", message="m"),
    Opaque(vendor_type="x", vendor_subtype=None, digest=D, source_line=3),
    AuthExpired(credential_source="none", detail="expired", source_line=2),
    StreamClosed(process=Exited(code=0), events=6, reason="completed", run_id="r"),
    StreamClosed(process=Signaled(signal=9), events=6, reason="killed", run_id="r"),
    StreamClosed(process=UnknownTermination(), events=0, reason="steer-halt", run_id="r"),
]

COMMANDS = [
    ToolDecide(id="c1", call_id="toolu_01", decision=Allow()),
    ToolDecide(id="c2", call_id="toolu_01", decision=Deny(reason="this step only reads")),
    ToolDecide(id="c3", call_id="toolu_01", decision=Replace(input={"command": "cargo test"})),
    ToolDecide(id="", call_id="toolu_01", decision=Abstain()),
    FrameSet(id="f1", frame={"digest": D}),
    MessageInject(id="m1", text="remember"),
    Steer(id="s1", text="go"),
    PermissionSet(id="p1", posture="plan"),
    Interrupt(id="i1", reason="stop"),
    Halt(id="h1", reason="budget spent"),
]
