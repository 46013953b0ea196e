"""The names a refusal is given by, one constant each: the refused-start names
(`metaharness: <Name>: <sentence>` on stderr, `StartRefusal.name`, a workflow's, a batch's or a
replay's refusal) and the `command.result` refusal codes — and the codes of the `warning` lines.

What belongs here: one constant per name, spelled as the name itself, and nothing else. Code that
refuses names its refusal from here, never as a bare string (tests/test_refusal_names.py fails on one
elsewhere), and every name here has its cause and its fix in the catalogue
(`protocol/troubleshooting.py`), checked both ways by the same test. A new refusal is a line here and
an entry there. `Sentence` holds the fixed sentences more than one module refuses with, so each
is written once (the same test fails on a second spelling). Pure data: nothing of ours is imported.
"""

from __future__ import annotations

from typing import Final


class RefusalName:
    """A refused start's (or workflow's, batch's, replay's, frame's) name."""

    AskWithoutDecider: Final = "AskWithoutDecider"
    CassetteConflict: Final = "CassetteConflict"
    CassetteInvalid: Final = "CassetteInvalid"
    CassetteUnhosted: Final = "CassetteUnhosted"
    CassetteUnwritable: Final = "CassetteUnwritable"
    CommandUnavailable: Final = "CommandUnavailable"
    CostNotSeen: Final = "CostNotSeen"
    CredentialConflict: Final = "CredentialConflict"
    CredentialsUnknown: Final = "CredentialsUnknown"
    CredentialsUnsupported: Final = "CredentialsUnsupported"
    DecisionModeUnavailable: Final = "DecisionModeUnavailable"
    DenyOnlyUnavailable: Final = "DenyOnlyUnavailable"
    FrameConflict: Final = "FrameConflict"
    FrameInvalid: Final = "FrameInvalid"
    FrameSetRefused: Final = "FrameSetRefused"
    FrameUnreadable: Final = "FrameUnreadable"
    InspectAskMode: Final = "InspectAskMode"
    InspectDecisionsUnknown: Final = "InspectDecisionsUnknown"
    InspectHarnessUnknown: Final = "InspectHarnessUnknown"
    InspectNoPrompt: Final = "InspectNoPrompt"
    InspectRunRefused: Final = "InspectRunRefused"
    LedgerInvalid: Final = "LedgerInvalid"
    MemoryFileAbove: Final = "MemoryFileAbove"
    ModelInvalid: Final = "ModelInvalid"
    NoApiKey: Final = "NoApiKey"
    NoLedger: Final = "NoLedger"
    NoModel: Final = "NoModel"
    NoModelEndpoint: Final = "NoModelEndpoint"
    NoPrompt: Final = "NoPrompt"
    ObserveCannotFrame: Final = "ObserveCannotFrame"
    ObserveWithFrame: Final = "ObserveWithFrame"
    OperationNotEnforceable: Final = "OperationNotEnforceable"
    OptionForeign: Final = "OptionForeign"
    OptionUnknown: Final = "OptionUnknown"
    OtelUnavailable: Final = "OtelUnavailable"
    OutNotEmpty: Final = "OutNotEmpty"
    PolicyInvalid: Final = "PolicyInvalid"
    PolicyUnavailable: Final = "PolicyUnavailable"
    PostureRefused: Final = "PostureRefused"
    PostureUnknown: Final = "PostureUnknown"
    PricesInvalid: Final = "PricesInvalid"
    RayStartFailed: Final = "RayStartFailed"
    RayUnavailable: Final = "RayUnavailable"
    RayUnreachable: Final = "RayUnreachable"
    RedactInvalid: Final = "RedactInvalid"
    ReplaceRelayUnavailable: Final = "ReplaceRelayUnavailable"
    ScenarioInvalid: Final = "ScenarioInvalid"
    SchemaUnloadable: Final = "SchemaUnloadable"
    ScratchInsideCwd: Final = "ScratchInsideCwd"
    ScratchRefused: Final = "ScratchRefused"
    ScriptChanged: Final = "ScriptChanged"
    ScriptInvalid: Final = "ScriptInvalid"
    SubagentUnavailable: Final = "SubagentUnavailable"
    SubjectUnavailable: Final = "SubjectUnavailable"
    UnknownHarness: Final = "UnknownHarness"
    VendorCapability: Final = "VendorCapability"
    VendorMissing: Final = "VendorMissing"
    VendorSettingInvalid: Final = "VendorSettingInvalid"
    VersionOffPin: Final = "VersionOffPin"
    WorkflowChanged: Final = "WorkflowChanged"
    WorkflowEnded: Final = "WorkflowEnded"
    WorkflowInvalid: Final = "WorkflowInvalid"
    WorkflowUnavailable: Final = "WorkflowUnavailable"
    WorkingDirectory: Final = "WorkingDirectory"
    WorkspaceDiffers: Final = "WorkspaceDiffers"
    WorkspaceMoved: Final = "WorkspaceMoved"
    WorkspaceUnreachable: Final = "WorkspaceUnreachable"


class CommandCode:
    """A `command.result` refusal code (the wire's `RefusalCode`)."""

    MALFORMED: Final = "MALFORMED"
    SHADOWED: Final = "SHADOWED"
    TOO_LATE: Final = "TOO_LATE"
    UNKNOWN_CALL: Final = "UNKNOWN_CALL"
    UNSUPPORTED_CONTROL: Final = "UNSUPPORTED_CONTROL"


class Sentence:
    """A fixed refusal sentence that more than one module (or layer) writes."""

    NO_MODEL_ENDPOINT: Final = "credentials none needs --model-endpoint URL or --script FILE"
    NOTHING_TO_STEER: Final = "no turn is running, so there is nothing to steer; message.inject reaches the next turn"
    OTEL_MISSING: Final = ("--otel needs the otel extra (opentelemetry-sdk and its OTLP/HTTP exporter), which is not "
                           "installed: pip install 'metaharness[otel]'")
    REQUEST_MUTATED: Final = "this call id was already presented with a different input"


class WarningCode:
    """A `warning` line's code (the wire's open set; each one metaharness writes is here)."""

    AMBIENT_INPUT: Final = "AMBIENT_INPUT"
    BUDGET_REACHED: Final = "BUDGET_REACHED"
    COMMAND_NOT_APPLIED: Final = "COMMAND_NOT_APPLIED"
    COST_DISAGREES: Final = "COST_DISAGREES"
    COVERAGE_GAP: Final = "COVERAGE_GAP"
    MODEL_REQUEST_FAILED: Final = "MODEL_REQUEST_FAILED"
    NO_FRAME_IN_FORCE: Final = "NO_FRAME_IN_FORCE"
    NO_TERMINAL_RECORD: Final = "NO_TERMINAL_RECORD"
    OTEL_SPANS_DROPPED: Final = "OTEL_SPANS_DROPPED"
    PENDING_CALL_ABANDONED: Final = "PENDING_CALL_ABANDONED"
    PRICE_UNKNOWN: Final = "PRICE_UNKNOWN"
    PROXY_REFUSED: Final = "PROXY_REFUSED"
    REPLAY_DIVERGED: Final = "REPLAY_DIVERGED"
    REQUEST_MUTATED: Final = "REQUEST_MUTATED"
    RETAIN_FAILED: Final = "RETAIN_FAILED"
    UNCOVERED_TOOL: Final = "UNCOVERED_TOOL"
    UNDECIDED_CALL_RAN: Final = "UNDECIDED_CALL_RAN"
    VENDOR_API_RETRY: Final = "VENDOR_API_RETRY"
    VENDOR_BACKGROUND_TASKS: Final = "VENDOR_BACKGROUND_TASKS"
    VENDOR_ERROR: Final = "VENDOR_ERROR"
    VENDOR_NOTICE: Final = "VENDOR_NOTICE"
    VENDOR_PERMISSION_DENIED: Final = "VENDOR_PERMISSION_DENIED"
    VENDOR_WARNING: Final = "VENDOR_WARNING"
    VERSION_OFF_PIN: Final = "VERSION_OFF_PIN"


def constants(namespace: type) -> dict[str, str]:
    """The constants of `RefusalName`, `CommandCode`, `WarningCode` or `Sentence`, by attribute name."""
    return {key: value for key, value in vars(namespace).items() if not key.startswith("_") and isinstance(value, str)}
