"""Record, replay, re-decide: features above the run loop that turn live runs into fixtures.

`redecide` decides recorded calls again under a new frame or policy with the run loop's own
deciders; `session` hosts a run whose model traffic is recorded to, or replayed from, a
`metaharness.cassette/1` file (the format lives in `metaharness.loopback.cassette`).
"""
