"""`metaharness.protocol` — the wire core: events, commands, frames (docs/reference/wire.md).

Pure: no I/O beyond `load_frame` reading one file, no asyncio, no subprocess, and
nothing of metaharness outside this package. Importing it stays cheap (≤ 50 ms);
the public names are re-exported here.
"""

from .commands import (
    COMMAND_BY_NAME,
    COMMAND_FORMAT,
    COMMAND_NAMES,
    COMMAND_TYPES,
    Command,
    FrameSet,
    Halt,
    Interrupt,
    MessageInject,
    PermissionSet,
    Steer,
    ToolDecide,
    command_name,
)
from .decode import (
    RESERVED_ID,
    CommandRefusal,
    Envelope,
    LineError,
    decode_command_line,
    decode_event_line,
    encode_command_line,
    well_formedness_refusal,
)
from .events import (
    EVENT_BY_NAME,
    EVENT_FORMAT,
    EVENT_NAMES,
    EVENT_TYPES,
    AuthExpired,
    CommandResult,
    Event,
    Injection,
    Opaque,
    RateLimit,
    SessionEnded,
    SessionStarted,
    StepEntered,
    StepLeft,
    StreamClosed,
    Text,
    Thinking,
    ThinkingEstimate,
    ToolDecided,
    ToolRequested,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UsageReport,
    WarningEvent,
    event_name,
)
from .descriptor import CapabilityDescriptor, harness_descriptor
from .frame import (
    FRAME_FORMAT,
    OPERATION_NAMES,
    Frame,
    FrameCommandError,
    FrameRefusal,
    McpCall,
    Operation,
    admitted_names,
    canonical_bytes,
    compute_digest,
    document_bytes,
    frame_from_command,
    load_frame,
    normalise_operations,
    op_from_key,
    op_key,
    op_name,
    parse_frame_document,
    render,
    seal,
)
from .stream import EventWriter, StreamClosedError, StreamVerdict, at_from_unix_ms, check_stream, encode_event_line
from .values import (
    Abstain,
    Allow,
    CommandOutcome,
    Decision,
    DecisionCensus,
    Deny,
    Exited,
    Ok,
    ProcessTermination,
    Refusal,
    Refused,
    Replace,
    Signaled,
    StepRef,
    UnknownTermination,
    Usage,
    refused,
)

__all__ = [name for name in dir() if not name.startswith("_")]
