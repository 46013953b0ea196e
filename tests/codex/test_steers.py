"""Where each steer of a Codex turn is (adapters/codex/steers.py), without a process: what the
next turn carries, and when a failed `turn/steer` is not the caller's failure."""

from __future__ import annotations

from metaharness.adapters.codex.steers import SteerLedger


def test_a_steer_taken_in_the_turn_is_not_carried():
    ledger = SteerLedger()
    sent = ledger.sent("look at b.py")
    ledger.answered(sent)
    assert ledger.undelivered(not_shown=set()) == {}  # Codex showed it as a userMessage


def test_what_the_turn_did_not_take_up_opens_the_next_in_the_order_sent():
    ledger = SteerLedger()
    in_flight = ledger.sent("one")  # no answer by turn/completed
    accepted = ledger.sent("two")
    ledger.answered(accepted)  # accepted, never shown
    held = ledger.sent("three")
    assert ledger.failed(held, turn_ending=True)  # "no active turn" while the turn was ending
    assert ledger.undelivered(not_shown={accepted}) == {in_flight: "one", accepted: "two", held: "three"}


def test_a_failed_steer_is_refused_unless_it_reaches_codex_anyway():
    ledger = SteerLedger()
    refused = ledger.sent("too late")
    assert not ledger.failed(refused, turn_ending=False)
    carried = ledger.sent("carried")
    ledger.carried.update(ledger.undelivered(not_shown=set()))
    assert ledger.failed(carried, turn_ending=False)  # it opens the next turn: never refused as well
    assert ledger.undelivered(not_shown=set()) == {}
    answered_late = ledger.sent("late answer")
    ledger.carried.update(ledger.undelivered(not_shown=set()))
    ledger.answered(answered_late)  # its answer after it was carried: not carried a second time
    assert answered_late not in ledger.undelivered(not_shown={answered_late})
