"""The learning flow of one drop as steps: which step comes next, from what the last one left in the store.

Learning a drop is a sequence of runs: read the drop, choose a wave of chunks, analyse the wave's chunks side by
side, publish the registry, and so on until the module is exported and the drop cleaned with it. Whoever drives
the runs (the CLI's embedded driver, or a sensor in a deployment) asks `next_step` what to run after the step
that last finished, so both follow the same flow, and neither holds any state the store does not: a driver
that stops (a killed process, a restarted daemon) is resumed by asking again.

    read drop -> [finish an interrupted wave -> publish] -> choose chunks -> analyse chunks -> publish
                                                             ^                                     |
                                                             +---- while selection is not done <---+
    ... -> export module -> clean drop -> done

A drop is learned from once: learning it again walks the same flow over its stored plan, analyses no chunk again
and asks the analyst nothing. New labels or answers (`label_store.forget_learning`), or instruction items its
learning never worked to (the user's words changed since: `forget_for_new_items`), start the drop over.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from .errors import SmolcleanError
from .instructions import ItemState, open_items
from .label_store import forget_learning
from .plan import ChunkPlan
from .steps import ChunkTrace, FinalStep
from .storage import DatasetStore


class FlowStep(str, Enum):
    """One kind of step of the learning flow (each is one run, but a wave: one run per chunk)."""

    READ_DROP = "read_drop"
    CHOOSE_CHUNKS = "choose_chunks"
    ANALYSE_CHUNKS = "analyse_chunks"
    PUBLISH_REGISTRY = "publish_registry"
    EXPORT_MODULE = "export_module"
    CLEAN_DROP = "clean_drop"
    DONE = "done"


@dataclass(frozen=True)
class NextStep:
    """The step to run next: its kind, the wave it belongs to and, for a wave, the chunks to analyse."""

    step: FlowStep
    wave: int = 0
    chunks: tuple[str, ...] = ()


@dataclass(frozen=True)
class FinishedStep:
    """The step that last finished (successfully) in a learning of a drop, and its wave."""

    step: FlowStep
    wave: int = 0


def next_step(store: DatasetStore, drop: str, last: FinishedStep | None) -> NextStep:
    """What the learning of `drop` runs after `last` (None: nothing ran yet).

    A wave's chunks are the chosen ones without a stored trace: a finished chunk is never analysed again. A plan
    a killed learning left unfinished is finished first, its registry published, before more chunks are chosen,
    so the next wave is chosen from the same registry as in a learning that was never interrupted.

    Example:
        >>> next_step(DatasetStore("work/storage/people", "people"), "people.csv", None)   # doctest: +SKIP
        NextStep(step=<FlowStep.READ_DROP: 'read_drop'>, wave=0, chunks=())
    """
    if last is None:
        return NextStep(FlowStep.READ_DROP)
    plan = _stored_plan(store, drop)
    step, wave = last.step, last.wave
    if step is FlowStep.READ_DROP:
        if plan is not None and not plan.done:  # an interrupted learning's wave
            pending = _pending(store, plan)
            if pending:
                return NextStep(FlowStep.ANALYSE_CHUNKS, plan.waves, pending)
            return NextStep(FlowStep.PUBLISH_REGISTRY, plan.waves)
        return NextStep(FlowStep.CHOOSE_CHUNKS, wave + 1)
    if step is FlowStep.CHOOSE_CHUNKS:
        if plan is None:
            raise SmolcleanError(f"drop {drop!r}: choosing chunks stored no plan; see the run of that step")
        pending = _pending(store, plan)
        if pending:
            return NextStep(FlowStep.ANALYSE_CHUNKS, plan.waves, pending)
        # Nothing new to analyse: export when selection is done, else choose again (chunks chosen now may have
        # traces already, from an earlier learning of a drop with the same rows).
        return NextStep(FlowStep.EXPORT_MODULE, wave) if plan.done else NextStep(FlowStep.CHOOSE_CHUNKS, wave + 1)
    if step is FlowStep.ANALYSE_CHUNKS:
        return NextStep(FlowStep.PUBLISH_REGISTRY, wave)
    if step is FlowStep.PUBLISH_REGISTRY:
        if plan is not None and plan.done:
            return NextStep(FlowStep.EXPORT_MODULE, wave)
        return NextStep(FlowStep.CHOOSE_CHUNKS, wave + 1)
    if step is FlowStep.EXPORT_MODULE:
        return NextStep(FlowStep.CLEAN_DROP, wave)
    return NextStep(FlowStep.DONE, wave)


def unlearned_items(store: DatasetStore, drop: str, states: Iterable[ItemState]) -> tuple[ItemState, ...]:
    """The open items of `states` that the stored learning of `drop` never worked to: none of its chunks was
    analysed with them (each chunk's trace ends with the items as it left them), because the user's words changed
    since (an item is known by its text, as `registry.coverage` knows it), or the analyst then was one that does not
    read them. Empty when `drop` has no stored learning: its first learning works to every item anyway.

    Example:
        >>> items = split_instructions("Trim city. State in upper case.")  # learned before with "Trim city." alone
        >>> unlearned_items(store, "people.csv", registry.coverage(items))   # doctest: +SKIP
        (ItemState(number=2, text='State in upper case.', state='open', functions=(), reason=''),)
    """
    if _stored_plan(store, drop) is None:
        return ()
    worked = {item.text for trace in store.models("chunk_functions", ChunkTrace) if trace.drop == drop
              for step in trace.steps if isinstance(step, FinalStep) for item in step.items}
    return tuple(s for s in open_items(states) if s.text not in worked)


def forget_for_new_items(store: DatasetStore, drop: str, instructions: str) -> tuple[ItemState, ...]:
    """Forget the stored learning of `drop` when `instructions` hold items no function serves that it never worked
    to (`unlearned_items`), so that its next learning chooses and analyses its chunks again for them, rather than
    reusing a plan that was done before they were written; returns those items. The registry stays: the items it
    serves are shown to the analyst as served, so only the new ones are asked for. Unchanged instructions forget
    nothing: a drop is learned from once per set of instructions."""
    registry = store.registry.load()
    new = unlearned_items(store, drop, registry.coverage(registry.items_for(instructions)))
    if new:
        forget_learning(store, drop)
    return new


def _pending(store: DatasetStore, plan: ChunkPlan) -> tuple[str, ...]:
    """The chosen chunks that have no stored trace yet, in the order they were chosen."""
    return tuple(c for c in plan.selected if not store.path("chunk_functions", c, "json").exists())


def _stored_plan(store: DatasetStore, drop: str) -> ChunkPlan | None:
    """The chunk plan stored for `drop`, if any."""
    try:
        return store.load_model("chunks", ChunkPlan, drop)
    except SmolcleanError:
        return None
