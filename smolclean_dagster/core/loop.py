"""The per-chunk agent loop: a generator of typed steps.

Each step shows the analyst the chunk AS CLEANED BY THE CURRENT REGISTRY (so solved problems do not
look present), the detector findings that remain, the instructions and every accepted function's
name and docstring; takes one new function per step (the further functions of a model's reply are the next
steps, with no call in between); checks it in the sandbox on the chunk and on held-out rows; and accepts it
into the registry or feeds the reason back (a reply's verdicts together, in its next prompt). An analyst that reads the
user's instructions also sees each instruction item as open, served or declined, says which items a
function serves, and may decline items with a reason; "clean" is refused while an item is open. The loop
stops when the analyst says "clean" with no item open (beside functions: once each is accepted), the detectors find nothing (for an analyst that
trusts them), or the chunk's share of the drop's step budget (`max_steps`) is used up.

Errors that are the model's fault (unsafe, failing or useless code) become rejections shown to the
analyst; errors that are ours (storage, configuration) raise.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd

from .analysts.asked import asks_to_normalise_whitespace
from .analysts.rules import findings_as_asked, still_asked
from .analysts.base import AnalysisRequest, Analyst, Proposal, RegisteredSummary, Usage
from .errors import SmolcleanError
from .functions import CleaningFunction, constants_of, kept_as_written
from .instructions import Declined, InstructionItem, ItemState, item_key, new_items, open_items
from .labels import KEPT_FOR_LABELS, Broken, Labels, describe_broken
from .profile import detect_issues
from .registry import Provenance, Registry, RegistryEntry, RegistryStore
from .sandbox import GateRejected, SandboxCrashed, SandboxError, SandboxTimeout, ResourceLimitExceeded, FunctionFailed
from .steps import FinalStep, ProposalStep, Step, VerdictStep
from . import harm, queries
from .entities import entity_keys
from .validate import CodeRunner, changed_cells, check_candidate, frames_equal, texts_kept

log = logging.getLogger("smolclean.loop")

#: Sandbox errors caused by the proposed code itself: shown back to the analyst, never raised.
MODEL_FAULTS = (GateRejected, FunctionFailed, SandboxTimeout, ResourceLimitExceeded, SandboxCrashed)


@dataclass(frozen=True)
class ChunkWork:
    """One chunk to work on: its rows and the held-out rows of the same drop (both raw)."""

    dataset: str
    drop: str
    chunk_id: str
    rows: pd.DataFrame
    holdout: pd.DataFrame
    reference: pd.DataFrame | None = None
    #: Rows drawn across the drop, each with its own values, on which a candidate's cost is measured (without
    #: them, the chunk and held-out rows repeated).
    sample: pd.DataFrame | None = None
    #: Chunks of the same wave running beside this one: their functions are not shown to it, so what it sees
    #: (and so what it writes) does not depend on which chunk was faster.
    hidden: frozenset[str] = frozenset()
    #: Why the planner chose this chunk (shown to a model: e.g. dirt the functions leave on held-out rows).
    why: str = ""


#: Earlier query answers of a chunk kept in its prompt (each cut to the query budget), before the latest one.
EARLIER_QUERIES = 2


@dataclass(frozen=True)
class LoopSettings:
    """The knobs of the loop, from the dataset's settings."""

    max_steps: int = 5
    #: Model tokens (prompt and reply) the chunk may spend; 0: no limit. A step is never cut short: the chunk
    #: stops before the next one, so a drop spends at most its budget plus one step per chunk of the last wave.
    max_tokens: int = 0
    instructions: str = ""
    timeout_s: float = 10.0
    allow_row_drops: bool = False
    items: tuple[InstructionItem, ...] = ()
    #: Rows the user corrected (`smolclean learn --labels`): every candidate is held to them.
    labels: Labels | None = None


#: Frames recently cleaned by a registry, with the frame they were made from (held, so that its id is not another
#: frame's while kept): the steps of a chunk clean the same chunk and reference rows until a function is accepted.
_CLEANED: OrderedDict[tuple, tuple[pd.DataFrame, pd.DataFrame]] = OrderedDict()
CLEANED_KEPT = 8


def clean_with(registry: Registry, df: pd.DataFrame, runner: CodeRunner, *, timeout_s: float = 30.0) -> pd.DataFrame:
    """`df` cleaned by every function of `registry`, run in the sandbox as the exported module."""
    if not registry.entries or df.empty:
        return df.reset_index(drop=True)
    from .export import render_module

    functions = tuple((e.function.name, e.function.code) for e in registry.entries)
    key = (id(df), df.shape, registry.dataset, functions)
    if key in _CLEANED and _CLEANED[key][0] is df:
        _CLEANED.move_to_end(key)
        return _CLEANED[key][1].copy()
    # The registry is most often the one before plus a function accepted since: only that one runs, on the rows
    # as the one before left them.
    done, start = 0, df
    for (_, _, dataset, before), (source, cleaned) in _CLEANED.items():
        if source is df and dataset == registry.dataset and done < len(before) < len(functions) \
                and functions[:len(before)] == before:
            done, start = len(before), cleaned
    rest = registry if not done else registry.model_copy(update={"entries": registry.entries[done:]})
    try:
        # what the sandbox runs of a module: its `__main__` block (the file reader) is never run there
        cleaned = runner.run(render_module(rest, with_main=False), start, entry="clean", module=True,
                             timeout_s=timeout_s)
    except MODEL_FAULTS as exc:
        raise SmolcleanError(
            f"the registry of {registry.dataset!r} (version {registry.version}) fails on new rows: {exc}; "
            "fix or remove the failing function in the registry file"
        ) from exc
    remember_cleaned(registry, df, cleaned)
    return cleaned


def remember_cleaned(registry: Registry, df: pd.DataFrame, cleaned: pd.DataFrame) -> None:
    """Keep `cleaned` as `df` cleaned by `registry` (`clean_with` then returns a copy): also a candidate's output
    on rows the registry before it cleaned, once it joins, since the module runs its functions one after another."""
    functions = tuple((e.function.name, e.function.code) for e in registry.entries)
    _CLEANED[(id(df), df.shape, registry.dataset, functions)] = (df, cleaned.copy())
    while len(_CLEANED) > CLEANED_KEPT:
        _CLEANED.popitem(last=False)


def summarise_registry(registry: Registry) -> tuple[RegisteredSummary, ...]:
    """Every accepted function for the analyst: nothing is evicted, since a function the analyst cannot
    see is a function it writes again (the LLM analyst fits them to its prompt budget itself)."""
    return tuple(RegisteredSummary.of(e.function) for e in registry.entries)


def run_chunk(
    work: ChunkWork,
    analyst: Analyst,
    store: RegistryStore,
    runner: CodeRunner,
    settings: LoopSettings = LoopSettings(),
) -> Iterator[Step]:
    """Run the agent loop on one chunk, yielding each step as it happens.

    Example:
        >>> for step in run_chunk(work, RulesAnalyst(), store, Sandbox()):   # doctest: +SKIP
        ...     print(step.kind, getattr(step, "reason", ""))
    """
    feedback: str | None = None
    dropped = store.load().dropped  # validation took these out of the module: the model is told which, and why
    rejected: list[str] = [d.name for d in dropped]
    accepted: list[str] = []
    model = getattr(analyst, "reads_instructions", False)
    step = tokens = 0
    answered: list[tuple[str, str]] = []  # the chunk's queries and answers: the model has no memory of them
    last_answer: tuple[str, str] | None = None  # the previous reply's query and its answer: no rejection
    sent_back: str | None = None  # the function the previous reply sent, when it was rejected
    queued: list[Proposal] = []  # the further functions of the last reply, each judged as its own step
    carried: str | None = None  # what the reply's functions judged so far have to tell the model
    reply_clean = False  # the last reply said clean beside its functions, and each was accepted so far
    while True:
        registry = store.load().without_chunks(work.hidden)
        # The user's instruction items; with none, a model works to its own plan once it has written one.
        items = settings.items or (registry.items_for("") if model else ())
        reads = model and bool(items)
        states = registry.coverage(items) if reads else ()
        still_open = open_items(states)
        chunk = clean_with(registry, work.rows, runner)
        # as the rules read the user's words: a case asked of 'state' counts the cells in another case, as the
        # rules' candidate says
        findings = findings_as_asked(detect_issues(chunk), chunk, _instructions(settings, False))
        if not findings and not still_open and getattr(analyst, "trusts_detectors", True):
            yield FinalStep(step=step, reason="no_findings", accepted=tuple(accepted), items=states)
            return
        # The budgets bound the calls: the further functions of a reply already made are judged whatever is left.
        if step >= settings.max_steps and not queued:
            yield FinalStep(step=step, reason="max_steps", accepted=tuple(accepted), residual_findings=len(findings),
                            items=states)
            return
        if settings.max_tokens and tokens >= settings.max_tokens and not queued:
            yield FinalStep(step=step, reason="token_budget", accepted=tuple(accepted),
                            residual_findings=len(findings), items=states)
            return
        step += 1
        started = time.perf_counter()
        reference = None if work.reference is None else clean_with(registry, work.reference, runner)
        if queued:  # the reply's next function, as its own step with no call: the model reads every verdict next
            proposal, carried = queued.pop(0), feedback
        else:
            proposal = analyst.propose(
                AnalysisRequest(
                    dataset=work.dataset,
                    chunk_id=work.chunk_id,
                    step=step,
                    chunk=chunk,
                    findings=tuple(findings),
                    instructions=_instructions(settings, model),
                    registry=summarise_registry(registry),
                    feedback=feedback,
                    rejected=tuple(rejected),
                    taken_out=tuple((d.name, d.reason) for d in dropped),
                    reference=reference,
                    # the rules serve the few requests they read (analysts/asked.py), open or not
                    items=states if reads else registry.coverage(items),
                    planned=model and not settings.items,
                    why=work.why,
                    earlier_queries=tuple((answered[:-1] if last_answer else answered)[-EARLIER_QUERIES:]),
                    labels=settings.labels,
                    answer=last_answer,
                    sent_back=sent_back,
                    # the entity the harm gate judges by (the same reference rows, kept per registry revision)
                    entities=None if not model or reference is None else _drop_as_cleaned(registry, work.reference,
                                                                                           reference).keys,
                    on_labels=None if settings.labels is None or not model else (
                        lambda candidate, registry=registry: _on_labels(candidate, registry, settings.labels, runner,
                                                                        settings)),
                )
            )
            last_answer = sent_back = carried = None
            reply_clean = proposal.status == "clean" and proposal.function is not None
            # a candidate taken in the reply keeps its rule (`HybridAnalyst`): the trace says it was adopted
            queued = [proposal.model_copy(update={"function": f, "serves": s, "more": (), "issues": (), "declines": (),
                                                  "plan": (), "usage": Usage(), "transcript": None,
                                                  "adopt": f.name if f.rule is not None else None})
                      for f, s in proposal.more]
        tokens += proposal.usage.prompt_tokens + proposal.usage.completion_tokens
        fn = proposal.function
        answer = None
        if fn is None and proposal.query and not proposal.error:
            answer = _answer(proposal.query, work.rows if reference is None else reference, runner, settings)
        proposed = ProposalStep(
            step=step,
            findings=len(findings),
            issues=proposal.issues,
            status=proposal.status,
            function_name=fn.name if fn else None,
            code=fn.code if fn else None,
            adopted=proposal.adopt if fn is not None else None,
            query=proposal.query if answer is not None else None,
            query_result=answer,
            serves=proposal.serves,
            declines=proposal.declines,
            usage=proposal.usage,
            reply_hash=proposal.reply_hash,
            error=proposal.error,
            transcript=proposal.transcript,
            seconds=round(time.perf_counter() - started, 4),
        )
        if fn is None:
            yield proposed  # no function to name: shown at once
        notes = []
        if model and not settings.items and proposal.plan:
            # a model shown the plan adds to it; a plan written beside another chunk's first one is not merged
            shown = len(registry.plan)
            planned = store.update(lambda reg: reg.with_plan(new_items(reg.plan, proposal.plan), extend=bool(shown)))
            planned = planned.without_chunks(work.hidden)
            # The reply numbers its new lines after the items it was shown; another chunk may have taken those
            # numbers since: each is the number its line holds now.
            renumber = _own_lines(shown, new_items(registry.plan, proposal.plan), planned.plan)
            if renumber:
                proposal = _renumbered(proposal, renumber)
                queued = [_renumbered(q, renumber) for q in queued]
            if len(planned.plan) > shown:
                items = planned.items_for("")
                reads = True  # the function beside the plan may already serve its items, or decline them
                states = planned.coverage(items)
                span = f"#{shown + 1}-#{len(planned.plan)}"
                recorded = f"Items {span} are added to your plan" if shown else f"Your plan is recorded as items {span}"
                notes.append(f"{recorded}: serve each with a function (<serves>) or decline it with the reason.")
        if reads:
            notes = _record_declines(proposal, states, store, work) + notes
        elif proposal.declines and not model:  # the rules say which items need no function (kept as written)
            _record_declines(proposal, registry.coverage(items), store, work)
        if fn is None:
            if proposal.error:  # a reply the analyst could not use (the model's fault): shown back, uses a step
                feedback = proposal.error
                continue
            if answer is not None:  # a query uses a step; its answer is what the model reads next, as an answer
                feedback = " ".join(notes) or None
                answered.append((proposal.query, answer))
                last_answer = answered[-1]
                continue
            if proposal.adopt is not None:
                feedback = f"no ready-made candidates are offered here, so `{proposal.adopt}` cannot be adopted; " \
                           "write the function in <code>"
                continue
            if proposal.status == "clean":
                now = store.load().without_chunks(work.hidden).coverage(items) if reads else ()
                left = open_items(now)
                if not left:
                    yield FinalStep(step=step, reason="clean", accepted=tuple(accepted),
                                    residual_findings=len(findings), items=now)
                    return
                feedback = " ".join(notes + [
                    "You said clean, but these instruction items are still open: "
                    + "; ".join(f"#{s.number} {s.text!r}" for s in left)
                    + ". Serve each with a function (name it in <serves>), or decline it in <declined> with the "
                    "reason it cannot be done by a row-level function on this data."
                ])
                continue
            if proposal.declines:  # a reply may decline items alone: the notes say what could not be declined
                feedback = " ".join(notes) or None
                continue
            feedback = " ".join(notes + ["you said the chunk needs more work but proposed no function; propose one function"])
            continue
        serves = _served_texts(proposal.serves, items) if reads or not model else ()
        # Only the user's words win over the checks: an item of the model's own plan is no permission to null a
        # value or to rewrite values that look valid.
        asks = serves if settings.items else ()
        twin = _twin_of(fn, registry) if fn.rule is None else None
        started = time.perf_counter()
        outputs: list[tuple[pd.DataFrame, pd.DataFrame]] = []  # (rows, what it made of them as cleaned), once judged
        if twin is not None:
            verdict_reason, ok, evidence = twin, False, None
        else:
            holdout = clean_with(registry, work.holdout, runner)
            sample = None if work.sample is None else clean_with(registry, work.sample, runner)
            try:
                verdict = check_candidate(
                    fn, chunk, holdout, runner, timeout_s=settings.timeout_s, allow_row_drops=settings.allow_row_drops,
                    sample=sample, asks=asks,
                )
            except MODEL_FAULTS as exc:
                verdict_reason, ok, evidence = f"{type(exc).__name__}: {exc}", False, None
            except SandboxError:
                raise  # the sandbox itself is broken: our fault
            else:
                verdict_reason, ok, evidence = verdict.reason, verdict.accepted, verdict.evidence
            taught = False  # the user's corrections show its kind of change to be right
            if ok and settings.labels is not None:
                try:
                    broken, taught, labelled, after = _against_labels(fn, registry, settings.labels, runner, settings)
                    # kept with values it broke as written (offered so to the model): the labels do not show its
                    # kind of change right, so its harm is judged as any unlabelled function's
                    taught = taught and not (fn.rule is not None and fn.rule.context.get("kept"))
                except MODEL_FAULTS as exc:
                    broken, taught = [], False
                    verdict_reason, ok, evidence = f"{type(exc).__name__}: {exc}", False, None
                if broken and fn.rule is not None:
                    # A rule is kept with the values it broke left as written, when that keeps every label and
                    # passes the checks again; else it goes, with all its changes.
                    guarded = _kept_as_labelled(fn, broken, settings.labels, labelled, after)
                    if guarded is not None:
                        try:
                            verdict = check_candidate(
                                guarded, chunk, holdout, runner, timeout_s=settings.timeout_s,
                                allow_row_drops=settings.allow_row_drops, sample=sample, asks=asks)
                            # it broke a label: the labels do not show its kind of change right, so its harm
                            # is judged as any unlabelled function's
                            again, _, _, _ = _against_labels(guarded, registry, settings.labels, runner, settings)
                        except MODEL_FAULTS:
                            pass
                        else:
                            if verdict.accepted and not again:
                                verdict_reason = (f"{describe_broken(broken)} {KEPT_FOR_LABELS} "
                                                  f"({guarded.rule.context['kept']}); {verdict.reason}")
                                fn, broken, evidence = guarded, [], verdict.evidence
                if broken:
                    verdict_reason, ok, evidence = (
                        f"{describe_broken(broken)}; the user's labelled rows are ground truth: a cell you change "
                        "there must end at the user's value, and a value the user left as it was must not change"
                    ), False, None
            if ok:
                # what the accepted function made of the rows it was judged on: the next step's rows, as cleaned
                sources = {id(chunk): work.rows, id(holdout): work.holdout}
                if sample is not None:
                    sources[id(sample)] = work.sample
                outputs = [(sources[id(rows)], out) for rows, out in verdict.outputs if id(rows) in sources]
                held_out = next((out for rows, out in verdict.outputs if rows is holdout), None)
                try:
                    problem = _harm_or_conflict(fn, registry, holdout, work.reference, reference, runner, settings,
                                                asked=bool(asks) or taught, after=held_out, outputs=outputs)
                except MODEL_FAULTS as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                if problem:
                    verdict_reason, ok, evidence = problem, False, None
            if ok and model and serves:
                # an item counts as served once the rows it was judged on are as it asks: what a model's function
                # left undone keeps the item open, and the model is told what is left
                undone = _left_undone(serves, verdict.outputs)
                serves = tuple(t for t in serves if t not in undone)
                notes += [_undone_note(fn.name, items, text, left) for text, left in undone.items()]
        named = fn
        if ok:
            entry = RegistryEntry(
                function=fn,
                provenance=Provenance(
                    drop=work.drop,
                    chunk=work.chunk_id,
                    step=step,
                    analyst=analyst.name,
                    model=proposal.model,
                    prompt_hash=proposal.prompt_hash,
                    reply_hash=proposal.reply_hash,
                ),
                evidence=evidence,
                serves=serves,
            )
            after = store.update(lambda reg: reg.with_entry(entry, beside=work.hidden))
            joined = after.without_chunks(work.hidden)
            # as the registry holds it: suffixed when another function had the name
            stored = joined.find(fn)
            if _grown_by(registry, joined, stored):
                for rows, out in outputs:
                    remember_cleaned(joined, rows, out)
            named = stored.function if stored is not None else fn
            accepted.append(named.name)
            feedback = " ".join([carried] * bool(carried) + notes) or None
            log.info("chunk %s step %d: accepted %s", work.chunk_id, step, named.name)
        else:
            rejected.append(fn.name)
            sent_back = fn.name
            reply_clean = False
            feedback = " ".join([carried] * bool(carried) + notes + [f"function {fn.name} was rejected: {verdict_reason}"])
            log.info("chunk %s step %d: rejected %s: %s", work.chunk_id, step, fn.name, verdict_reason)
        # The proposal is shown once its name is settled: the trace, the verdict and the chunk's accepted functions
        # all call it what the registry (and so the module) does, with the code the registry holds.
        yield proposed.model_copy(update={"function_name": named.name, "code": named.code})
        yield VerdictStep(
            step=step,
            function_name=named.name,
            accepted=ok,
            reason=verdict_reason,
            evidence=evidence,
            serves=tuple(i.number for i in items if i.text in serves),
            seconds=round(time.perf_counter() - started, 4),
        )
        if reply_clean and not queued:  # the reply said clean beside its functions, and every one was accepted
            now = store.load().without_chunks(work.hidden).coverage(items) if reads else ()
            if not open_items(now):
                yield FinalStep(step=step, reason="clean", accepted=tuple(accepted), items=now)
                return


def _instructions(settings: LoopSettings, model: bool) -> str:
    """The user's words as the analyst reads them: for the rules, with the conventions the user's corrections
    show (a model reads the corrections themselves)."""
    if model or settings.labels is None:
        return settings.instructions
    return settings.labels.with_conventions(settings.instructions)


def _against_labels(fn: CleaningFunction, registry: Registry, labels: Labels, runner: CodeRunner,
                    settings: LoopSettings) -> tuple[list[Broken], bool, pd.DataFrame, pd.DataFrame]:
    """The labelled cells a candidate breaks (see `Labels.broken_by`), on the labelled rows as the module before
    it leaves them, whether it makes at least one of the user's corrections and breaks none, and those rows
    before and after it."""
    before = clean_with(registry, labels.raw_rows(), runner)
    after = runner.run(fn.code, before, entry=fn.name, timeout_s=settings.timeout_s)
    broken = labels.broken_by(before, after)
    taught = not broken and bool(changed_cells(before, after).to_numpy().any())
    return broken, taught, before, after


def _on_labels(fn: CleaningFunction, registry: Registry, labels: Labels, runner: CodeRunner,
               settings: LoopSettings) -> tuple[CleaningFunction, str]:
    """A ready-made function as the model is offered it, and what it does to the labelled rows: the corrections it
    makes and the labelled cells it breaks (`_against_labels`); empty when it cannot be run on them. A rule that
    breaks labelled cells is offered with the values it changed wrongly there left as written, when that keeps
    every label (`_kept_as_labelled`), as it would be kept among the rules: offered as it was, the model read
    "breaks 1 labelled cell" beside a repair that makes hundreds of corrections and declined it.

    Example:
        >>> _on_labels(repair_dependencies_arr, registry, labels, sandbox, settings)[1]   # doctest: +SKIP
        'makes 31 of the corrections and breaks no labelled cell'
    """
    try:
        broken, _, before, after = _against_labels(fn, registry, labels, runner, settings)
        made = labels.made_right_by(before, after)
        guarded = _kept_as_labelled(fn, broken, labels, before, after) if broken else None
        if guarded is not None:
            again, _, _, after = _against_labels(guarded, registry, labels, runner, settings)
            if not again:
                kept = "; ".join(f"{column}: {', '.join(map(repr, values))}"
                                 for column, values in guarded.rule.context["kept"].items())
                return guarded, (f"makes {labels.made_right_by(before, after)} of the corrections and breaks no "
                                 "labelled cell: the values it changed wrongly there stay as written wherever it "
                                 f"meets them ({kept})")
    except MODEL_FAULTS:
        return fn, ""
    if broken:
        return fn, f"makes {made} of the corrections, but {describe_broken(broken)}"
    return fn, f"makes {made} of the corrections and breaks no labelled cell" if made else "changes no labelled cell"


def _kept_as_labelled(fn: CleaningFunction, broken: list[Broken], labels: Labels, before: pd.DataFrame,
                      after: pd.DataFrame) -> CleaningFunction | None:
    """The rule `fn` with every value it changed wrongly in a labelled cell left as written wherever it meets it
    (`functions.kept_as_written`; its rule's context keeps them, so a merge with another function of its rule
    keeps them too). None for a rule that keeps values already, that makes no more labelled cells right than it
    breaks (then the labels show its kind of change to be wrong), or when there is nothing to keep. `before` and
    `after`: the labelled rows as the module before it leaves them, and as `fn` leaves those."""
    if fn.rule is None or fn.rule.context.get("kept"):
        return None
    if labels.made_right_by(before, after) <= len(broken):
        return None  # the labels show its kind of change wrong more often than right: it goes
    at = {row: i for i, row in enumerate(labels.rows.index)}
    kept: dict[str, list[str]] = {}
    for b in broken:
        if b.cell.column in before.columns and b.cell.row in at:
            value = before[b.cell.column].iat[at[b.cell.row]]
            if isinstance(value, str):
                kept.setdefault(b.cell.column, []).append(value)
    kept = {column: sorted(set(values)) for column, values in sorted(kept.items())}
    if not kept:
        return None
    try:
        code = kept_as_written(fn.code, fn.name, kept)
        return CleaningFunction.from_code(code, columns=fn.columns, rule=fn.rule.model_copy(
            update={"context": {**fn.rule.context, "kept": kept}}))
    except (SyntaxError, ValueError):
        return None


@texts_kept()  # the held-out rows and their outputs are compared more than once
def _harm_or_conflict(fn: CleaningFunction, registry: Registry, holdout: pd.DataFrame, reference: pd.DataFrame | None,
                      cleaned: pd.DataFrame | None, runner: CodeRunner, settings: LoopSettings, *,
                      asked: bool = False, after: pd.DataFrame | None = None,
                      outputs: list[tuple[pd.DataFrame, pd.DataFrame]] | None = None) -> str | None:
    """Why a candidate that passed its own checks may still not join: on the held-out rows it mostly rewrites
    values that look valid (see `harm`; not judged when it serves an instruction item, `asked`), or the module
    with it added is no longer idempotent (a later pass of an earlier function undoes or redoes its work). Both
    are caught here, while it is a candidate, so a learning run always ends with a module.

    `after`: its output on `holdout`, when its checks already ran it there. Its output on the drop's reference
    rows, when it runs there, is added to `outputs` (with the rows as the drop holds them, `reference`)."""
    if holdout.empty:
        return None
    if after is None:
        after = runner.run(fn.code, holdout, entry=fn.name, timeout_s=settings.timeout_s)
    drop = _drop_as_cleaned(registry, reference, cleaned)
    # The gate judges values; a value moved out of its column's usual form is counted in the report's table
    # (validation) but not sent back here: the prompt's default already asks for the column's own form.
    spacing = not asks_to_normalise_whitespace(settings.instructions)
    damage = harm.estimate(holdout, after, drop.counts, forms=False, spacing=spacing)
    if not damage.harmful and not asked and (drop.keys or drop.free_text):
        # the entity's other rows, and the kinds of free text, are judged over the whole drop: the held-out rows
        # hold few of each entity, and a few of each kind of text
        whole = runner.run(fn.code, drop.rows, entry=fn.name, timeout_s=settings.timeout_s)
        if outputs is not None and reference is not None:
            outputs.append((reference, whole))
        damage = damage.with_text(harm.text_harm(drop.rows, whole, drop.counts, spacing=spacing))
        if drop.keys:
            damage = damage.with_contradictions(harm.contradictions(drop.rows, whole, drop.keys))
    if damage.harmful and not asked:
        return (f"it would do harm: {damage.describe()}; change only values that are evidently wrong (rare beside a "
                "common spelling, or off the column's usual form) into values evidently right, and leave the rest")
    with_it = registry.with_entry(RegistryEntry(function=fn, provenance=Provenance(drop="", chunk="", step=0,
                                                                                    analyst="candidate")))
    from .export import render_module

    try:
        once = runner.run(render_module(with_it, with_main=False), after, entry="clean", module=True, timeout_s=30.0)
    except GateRejected as exc:
        return f"the module with it cannot be exported: {exc}"
    if not frames_equal(after, once):
        again = changed_cells(after, once)
        columns = [c for c in again.columns if again[c].any()]
        return (f"the module with it is not idempotent on the held-out rows: cleaning them again changes column(s) "
                f"{columns}; it conflicts with a function already accepted (one undoes or redoes the other's work)")
    return None


@dataclass(frozen=True)
class _DropAsCleaned:
    """The drop's reference rows as the registry cleans them, with what the gates judge by."""

    rows: pd.DataFrame | None
    counts: harm.ValueCounts
    keys: dict[str, str]
    #: The reference frame these were made from: held, so that its id is not another frame's while cached.
    reference: pd.DataFrame | None = None

    @property
    def free_text(self) -> bool:
        """Whether a column of the drop holds free text (`harm.ValueCounts.free_text`)."""
        return self.rows is not None and any(self.counts.free_text(str(c)) for c in self.rows.columns)


_DROPS: dict[tuple[int, int, int], _DropAsCleaned] = {}


def _drop_as_cleaned(registry: Registry, reference: pd.DataFrame | None,
                     cleaned: pd.DataFrame | None) -> _DropAsCleaned:
    """The drop's reference rows as the registry cleans them (`cleaned`, the step's), their value counts and
    entity columns, kept per registry revision and reference."""
    key = (id(reference), registry.version, len(registry.entries))
    if key not in _DROPS or _DROPS[key].reference is not reference:
        _DROPS.clear()
        keys = {} if cleaned is None or cleaned.empty else entity_keys(cleaned)
        _DROPS[key] = _DropAsCleaned(cleaned, harm.ValueCounts.of(cleaned), keys, reference)
    return _DROPS[key]


def _answer(query: str, rows: pd.DataFrame, runner: CodeRunner, settings: LoopSettings) -> str:
    """The answer to the model's read-only query over the drop's visible rows as cleaned by the functions so far
    (what the rows and evidence it is shown are), or why it could not run."""
    try:
        return queries.run_query(query, rows, runner, timeout_s=settings.timeout_s)
    except (queries.QueryError, *MODEL_FAULTS) as exc:
        return f"the query could not run: {type(exc).__name__}: {exc}"


def _own_lines(shown: int, lines: tuple[str, ...], plan: Sequence[str]) -> dict[int, int]:
    """{the number a reply gave its i-th new plan line (`lines`: those no item it was shown says, numbered after
    the `shown` items): the number that line holds in `plan` now}, for the numbers that changed."""
    where = {item_key(text): n for n, text in enumerate(plan, start=1)}
    numbers = {shown + i: where.get(item_key(line), 0) for i, line in enumerate(lines, start=1)}
    return {said: now for said, now in numbers.items() if now != said}


def _renumbered(proposal: Proposal, renumber: dict[int, int]) -> Proposal:
    """The proposal with its items' numbers as `_own_lines` maps them (a line the plan did not take: none)."""
    def moved(numbers):
        return tuple(n for n in (renumber.get(n, n) for n in numbers) if n)

    return proposal.model_copy(update={
        "serves": moved(proposal.serves),
        "declines": tuple(d.model_copy(update={"number": renumber[d.number]}) if d.number in renumber else d
                          for d in proposal.declines if renumber.get(d.number, d.number)),
        "more": tuple((f, moved(s)) for f, s in proposal.more),
    })


#: Values named in a note on an item a function left undone, at most.
SHOWN_UNDONE = 5


def _left_undone(serves: tuple[str, ...], outputs) -> dict[str, dict[str, list[str]]]:
    """Per item a function serves that the rules read (`rules.still_asked`), the values the rows it was judged on
    (`outputs`: (rows, what the function made of them)) still hold written otherwise, per column."""
    made = [out for _, out in outputs if isinstance(out, pd.DataFrame)]
    if not made:
        return {}
    rows = pd.concat(made, ignore_index=True)
    return {text: left for text in serves if (left := still_asked(text, rows))}


def _undone_note(name: str, items: tuple[InstructionItem, ...], text: str, left: dict[str, list[str]]) -> str:
    number = next((i.number for i in items if i.text == text), None)
    shown = "; ".join(f"in {column!r}: " + ", ".join(repr(v) for v in values[:SHOWN_UNDONE])
                      + (f" and {len(values) - SHOWN_UNDONE} more" if len(values) > SHOWN_UNDONE else "")
                      for column, values in left.items())
    return (f"`{name}` was accepted, but it does not serve item #{number} ({text!r}) yet: the rows it was judged "
            f"on still hold values the item asks to be written otherwise ({shown}). The item stays open: serve what "
            "is left with a function, or decline it with the reason.")


def _served_texts(numbers: tuple[int, ...], items: tuple[InstructionItem, ...]) -> tuple[str, ...]:
    by_number = {i.number: i.text for i in items}
    return tuple(by_number[n] for n in numbers if n in by_number)


def _record_declines(proposal, states: tuple[ItemState, ...], store: RegistryStore, work: ChunkWork) -> list[str]:
    """Store the items the analyst declined; notes for the analyst about declines that could not be taken."""
    by_number = {s.number: s for s in states}
    notes, fresh = [], []
    for decline in proposal.declines:
        state = by_number.get(decline.number)
        if state is None:
            notes.append(f"there is no instruction item #{decline.number} to decline.")
        elif decline.number in proposal.serves:
            notes.append(f"item #{decline.number} cannot be both served and declined; it counts as served.")
        elif state.state == "served":
            continue  # already carried out by a function: a decline does not undo that
        elif not decline.reason.strip():
            notes.append(f"declining item #{decline.number} needs a reason.")
        else:
            fresh.append(Declined(item=state.text, reason=decline.reason.strip(), chunk=work.chunk_id))
    if fresh:
        store.update(lambda reg: reg.with_declined(fresh, beside=work.hidden))
    return notes


def _grown_by(registry: Registry, joined: Registry, entry: RegistryEntry | None) -> bool:
    """Whether `joined` is `registry` with `entry` added last, and nothing else changed (another chunk's function
    joining beside it, a consolidation): then what the entry made of rows `registry` cleaned is what `joined`
    makes of them."""
    if entry is None or len(joined.entries) != len(registry.entries) + 1 or joined.entries[-1] != entry:
        return False
    return all(a.function.name == b.function.name and a.function.code == b.function.code
               for a, b in zip(registry.entries, joined.entries))


def _twin_of(fn: CleaningFunction, registry: Registry) -> str | None:
    """Why `fn` cannot join the registry as it is: its name or a module constant's name is taken by other code.

    A second function under a taken name is most often the same job done again (two chunks writing
    `standardize_dates`); a module constant of the same name with another value would change the first
    function's behaviour once both are in one module.
    """
    for entry in registry.entries:
        other = entry.function
        if other.name == fn.name:
            return (f"the module already has a function named `{fn.name}` ({other.summary}); do not repeat its job. "
                    "If it misses some values, write a function with a new name that fixes only those")
        theirs = constants_of(other.code)
        for constant, source in constants_of(fn.code).items():
            if constant in theirs and theirs[constant] != source:
                return (f"the module constant `{constant}` is already defined by `{other.name}` with another value; "
                        "give yours a name of its own (e.g. prefixed with the column)")
    return None
