"""Replay's tools above the run: re-deciding recorded calls and comparing replayed streams.

`redecide` decides recorded calls again under a new frame or policy with the run loop's own
deciders; `normalise` compares a replayed run's stream with its recording. Recording and
replaying a run are options of the run itself (`RunSpec.record`, `RunSpec.replay`), hosted by the
library API (`metaharness.cassette_host`); the cassette format lives in `metaharness.loopback.cassette`.
"""
