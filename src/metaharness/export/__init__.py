"""Runs read by other tools: a finished `metaharness.event/1` stream in their formats.

What belongs here: reading a finished stream (an events file or a run directory) and writing
it in another tool's format — `atif.py`, Harbor's Agent Trajectory Interchange Format;
`otel.py`, OpenTelemetry GenAI spans (also live, as a tap on a run's event writer under
`--otel`; `otlp.py` says whether and where without importing the SDK). The layer sits above one
run and reads only what the run wrote; it imports the wire and the stream reader, never the run
or an adapter.

`source.py` turns the operator's path into finished streams, or one `ExportError` sentence.
"""
