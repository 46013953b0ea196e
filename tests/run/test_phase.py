"""The run's phases (metaharness.run.phase): one table with the run's column and its turn's, and what a phase means."""

import pytest

from metaharness.run.phase import TRANSITIONS, TURN_INPUTS, Input, Phase, PhaseError, Phases

SEQUENCE = [Phase.OPENING, Phase.SERVING, Phase.LANDING, Phase.WAITING, Phase.WOKEN]
RUN_PHASES = [Phase.CHECKING, Phase.SPAWNING, *SEQUENCE, Phase.ENDING, Phase.STOPPING, Phase.CLOSED]
TURN_PHASES = [Phase.IDLE, Phase.RUNNING, Phase.INTERRUPTING, Phase.INTERRUPTING_IDLE, Phase.ENDED_IN_INTERRUPT]
RUN_INPUTS = [given for given in Input if given not in TURN_INPUTS]
# what may come from outside the turns' sequence (the core moves the sequence's own only in its steps)
OUTSIDE = [Input.SPAWNED, Input.NOT_SPAWNED, Input.TURN_WRITTEN, Input.STOP, Input.OUTPUT_ENDED]


OPENED = [Input.SPAWN, Input.SPAWNED]
LANDED = [*OPENED, Input.TURN_WRITTEN, Input.TURN_SERVED]
ROUTES = {Phase.CHECKING: [], Phase.SPAWNING: [Input.SPAWN], Phase.OPENING: OPENED,
          Phase.SERVING: [*OPENED, Input.TURN_WRITTEN], Phase.LANDING: LANDED, Phase.WAITING: [*LANDED, Input.WAIT],
          Phase.WOKEN: [*LANDED, Input.WAIT, Input.WAKE],
          Phase.ENDING: [*LANDED, Input.TURNS_DONE], Phase.STOPPING: [Input.STOP],
          Phase.CLOSED: [Input.CLOSE], Phase.IDLE: [], Phase.RUNNING: [Input.TURN_STARTED],
          Phase.INTERRUPTING: [Input.TURN_STARTED, Input.INTERRUPT]}


def at(run: Phase = Phase.CHECKING, turn: Phase = Phase.IDLE) -> Phases:
    """A run's machines brought to `run` and `turn` by moves of the table."""
    phases = Phases()
    for given in ROUTES[run] + ROUTES[turn]:
        phases.move(given)
    assert (phases.run, phases.turn) == (run, turn)
    return phases


def test_every_phase_is_one_machines_and_the_table_keeps_them_apart():
    assert set(RUN_PHASES) | set(TURN_PHASES) == set(Phase) and not set(RUN_PHASES) & set(TURN_PHASES)
    for (phase, given), after in TRANSITIONS.items():
        machine = TURN_PHASES if given in TURN_INPUTS else RUN_PHASES
        assert phase in machine and after in machine, (phase, given, after)


def test_the_turn_machine_answers_every_input_in_every_phase_but_a_second_interrupt():
    for phase in TURN_PHASES:
        for given in TURN_INPUTS:
            interrupting = phase in (Phase.INTERRUPTING, Phase.INTERRUPTING_IDLE, Phase.ENDED_IN_INTERRUPT)
            if given is Input.INTERRUPT and interrupting or given is Input.INTERRUPT_ANSWERED and not interrupting:
                assert (phase, given) not in TRANSITIONS  # the worker carries one control at a time
            else:
                assert (phase, given) in TRANSITIONS, (phase, given)


def test_a_life_from_the_checks_to_the_close():
    phases = Phases()
    for given, run in [(Input.SPAWN, Phase.SPAWNING), (Input.SPAWNED, Phase.OPENING), (Input.TURN_WRITTEN, Phase.SERVING),
                       (Input.TURN_SERVED, Phase.LANDING), (Input.SERVE, Phase.SERVING),
                       (Input.TURN_SERVED, Phase.LANDING), (Input.WAIT, Phase.WAITING), (Input.WAKE, Phase.WOKEN),
                       (Input.OPEN, Phase.OPENING), (Input.TURN_WRITTEN, Phase.SERVING),
                       (Input.TURN_SERVED, Phase.LANDING), (Input.TURNS_DONE, Phase.ENDING),
                       (Input.OUTPUT_ENDED, Phase.ENDING), (Input.CLOSE, Phase.CLOSED)]:
        assert phases.move(given) is run and phases.run is run
    assert phases.winding_up and not phases.stopping


def test_a_stop_holds_through_everything_after_it_but_the_close():
    for start in (Phase.CHECKING, Phase.SPAWNING, *SEQUENCE, Phase.ENDING):
        phases = at(start)
        assert phases.move(Input.STOP) is Phase.STOPPING
        for given in OUTSIDE:
                assert phases.move(given) is Phase.STOPPING and phases.stopping and phases.winding_up
        assert phases.move(Input.CLOSE) is Phase.CLOSED and not phases.stopping


@pytest.mark.parametrize("phase", RUN_PHASES)
def test_winding_up_is_every_phase_after_the_last_turn(phase):
    assert at(phase).winding_up is (phase in (Phase.ENDING, Phase.STOPPING, Phase.CLOSED))
    assert at(phase).stopping is (phase is Phase.STOPPING)


def test_a_turn_that_ends_under_an_interrupt_waits_for_its_answer():
    phases = Phases()
    assert phases.move(Input.TURN_STARTED) is Phase.RUNNING and phases.turn_running
    assert phases.move(Input.INTERRUPT) is Phase.INTERRUPTING and phases.turn_running
    assert phases.move(Input.TURN_ENDED) is Phase.ENDED_IN_INTERRUPT and not phases.turn_running
    assert phases.move(Input.INTERRUPT_ANSWERED) is Phase.IDLE
    # an interrupt carried between turns answers back to no turn
    assert phases.move(Input.INTERRUPT) is Phase.INTERRUPTING_IDLE and not phases.turn_running
    assert phases.move(Input.INTERRUPT_ANSWERED) is Phase.IDLE


def test_the_child_s_end_ends_every_step_of_the_sequence():
    for phase in SEQUENCE:
        assert at(phase).move(Input.OUTPUT_ENDED) is Phase.ENDING


@pytest.mark.parametrize("phase, given", [(Phase.OPENING, Input.SPAWN), (Phase.SERVING, Input.OPEN),
                                          (Phase.STOPPING, Input.TURNS_DONE), (Phase.WAITING, Input.TURN_SERVED), (Phase.CLOSED, Input.CLOSE),
                                          (Phase.CHECKING, Input.OUTPUT_ENDED), (Phase.CLOSED, Input.SPAWNED),
                                          (Phase.ENDING, Input.SPAWNED)])
def test_an_input_the_table_does_not_list_is_raised_not_guessed(phase, given):
    phases = at(phase)
    with pytest.raises(PhaseError, match=repr(given.value)):
        phases.move(given)
    assert phases.run is phase


def test_a_second_interrupt_in_flight_is_raised():
    phases = at(turn=Phase.INTERRUPTING)
    with pytest.raises(PhaseError):
        phases.move(Input.INTERRUPT)
