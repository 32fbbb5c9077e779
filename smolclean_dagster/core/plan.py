"""Chunk planning: held-out rows, chunks, and which chunks the analyst should see next and why.

Selection runs in waves. The first wave is a single chunk, so the functions every chunk needs are written
once, before chunks run side by side. Before each wave the current registry is applied to a spread of
chunks and the detectors look at what is left: chunks showing residual kinds of dirt that no analysed
chunk has shown yet go first, then a small spread sample; while instruction items are open, a chunk is
chosen for them even where the detectors see nothing. So analyst calls grow with the number of distinct
problems in a drop, not with its rows. Selection stops when nothing new remains, or the chunk budget or
the drop's step budget is spent; each chosen chunk gets its share of the steps left.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from .detectors import case_variants, whitespace
from .detectors.case_variants import KEEP_CELLS
from .detectors.cells import ColumnValues
from .drops import chunk_id
from .errors import SmolcleanError
from .profile import detect_issues


class PlannedChunk(BaseModel):
    """One chunk of a drop, and why it was chosen (empty reason: not chosen)."""

    model_config = ConfigDict(frozen=True)

    id: str
    start: int
    stop: int
    findings: tuple[str, ...] = ()
    reason: str = ""
    wave: int = 0
    steps: int = Field(default=0, description="analyst steps this chunk may take (its share of the drop's budget)")
    tokens: int = Field(default=0, description="model tokens this chunk may spend (its share; 0: no limit)")


class ChunkPlan(BaseModel):
    """How one drop is split: held-out row positions, every chunk, and the chosen chunks wave by wave."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    drop: str
    rows: int
    chunk_size: int
    holdout: tuple[int, ...]
    chunks: tuple[PlannedChunk, ...]
    selected: tuple[str, ...] = ()
    waves: int = 0
    done: bool = False
    steps_used: int = Field(default=0, description="analyst steps the drop's chunks took before the latest wave")
    stopped: str = Field(default="", description="why selection stopped, once it has")
    returned: tuple[str, ...] = Field(
        default=(), description="kinds of dirt left on the held-out rows that went back to the model (once each)")

    def chunk(self, cid: str) -> PlannedChunk:
        for c in self.chunks:
            if c.id == cid:
                return c
        raise SmolcleanError(f"chunk {cid!r} is not part of drop {self.drop!r}")

    @property
    def last_wave(self) -> tuple[str, ...]:
        """The chunk ids chosen by the latest wave (empty when selection is done)."""
        return tuple(c.id for c in self.chunks if c.reason and c.wave == self.waves) if self.waves else ()

    def chunk_rows(self, df: pd.DataFrame, cid: str) -> pd.DataFrame:
        """The chunk's rows without the held-out ones: what the analyst may see."""
        c = self.chunk(cid)
        held = set(self.holdout)
        keep = [i for i in range(c.start, c.stop) if i not in held]
        return df.iloc[keep].reset_index(drop=True)

    def holdout_rows(self, df: pd.DataFrame) -> pd.DataFrame:
        return df.iloc[list(self.holdout)].reset_index(drop=True)

    def visible_rows(self, df: pd.DataFrame, limit: int | None = None) -> pd.DataFrame:
        """The rows but the held-out ones (the analyst's reference for whole-column statistics); with
        `limit`, an even spread of at most that many, so huge drops stay cheap to show."""
        mask = np.ones(len(df), dtype=bool)
        mask[list(self.holdout)] = False
        keep = np.flatnonzero(mask)
        if limit is not None and len(keep) > limit:
            keep = keep[np.linspace(0, len(keep) - 1, limit).round().astype(int)]
        return df.iloc[keep].reset_index(drop=True)


def choose_holdout(drop: str, n_rows: int, fraction: float) -> tuple[int, ...]:
    """Deterministic held-out row positions: the same drop always holds out the same rows."""
    if fraction <= 0 or n_rows < 2:
        return ()
    seed = int(hashlib.sha256(drop.encode()).hexdigest()[:8], 16)
    k = max(1, min(n_rows - 1, round(n_rows * fraction)))
    return tuple(sorted(np.random.default_rng(seed).choice(n_rows, size=k, replace=False).tolist()))


def split_drop(df: pd.DataFrame, *, dataset: str, drop: str, chunk_size: int, holdout_fraction: float) -> ChunkPlan:
    """A plan with held-out rows and chunks, nothing selected yet."""
    n = len(df)
    bounds = [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]
    return ChunkPlan(
        dataset=dataset,
        drop=drop,
        rows=n,
        chunk_size=chunk_size,
        holdout=choose_holdout(drop, n, holdout_fraction),
        chunks=tuple(PlannedChunk(id=chunk_id(drop, s, e, rows=n), start=s, stop=e) for s, e in bounds),
    )


#: Cleans some rows with the current registry (in the sandbox); the identity before anything is accepted.
Cleaner = Callable[[pd.DataFrame], pd.DataFrame]


def residual_signatures(plan: ChunkPlan, df: pd.DataFrame, probe: list[int], clean: Cleaner) -> dict[int, tuple[str, ...]]:
    """For each probed chunk, the kinds of dirt ("kind:column") left after cleaning its visible rows.

    The probed chunks are cleaned in one call, so a wave costs one sandbox run, not one per chunk.
    """
    parts = [plan.chunk_rows(df, plan.chunks[i].id) for i in probe]
    sizes = [len(p) for p in parts]
    if not sum(sizes):
        return {i: () for i in probe}
    cleaned = clean(pd.concat(parts, ignore_index=True))
    out: dict[int, tuple[str, ...]] = {}
    start = 0
    for i, size in zip(probe, sizes):
        rows = cleaned.iloc[start : start + size]
        start += size
        out[i] = tuple(sorted({f"{f.kind}:{f.column}" for f in detect_issues(rows)})) if size else ()
    return out


def probe_chunks(plan: ChunkPlan, budget: int) -> list[int]:
    """The not-yet-chosen chunks worth probing: an even spread of 4x the budget, so planning stays cheap."""
    chosen = {c.id for c in plan.chunks if c.reason}
    spread = _spread(len(plan.chunks), 4 * budget)
    return [i for i in spread if plan.chunks[i].id not in chosen]


@dataclass(frozen=True)
class StepBudget:
    """The drop's analyst steps: how many in all, how many one chunk may take, and how many are used; and the
    model tokens (prompt and reply) the drop may spend (`tokens` 0: no limit), and how many it has."""

    total: int = 80
    per_chunk: int = 40
    used: int = 0
    tokens: int = 0
    tokens_used: int = 0

    @property
    def tokens_spent(self) -> bool:
        return bool(self.tokens) and self.tokens_used >= self.tokens

    @property
    def left(self) -> int:
        return 0 if self.tokens_spent else max(0, self.total - self.used)


def select_wave(
    plan: ChunkPlan,
    signatures: dict[int, tuple[str, ...]],
    *,
    wave_size: int,
    budget: int,
    steps: StepBudget = StepBudget(),
    open_items: tuple[int, ...] = (),
    first_wave: int = 1,
    ask_model: bool = False,
    held_out: tuple[str, ...] = (),
    taught: bool = False,
    asked: bool = False,
) -> ChunkPlan:
    """Choose the next wave: chunks whose residual dirt no chosen chunk has shown, then a spread sample, or a
    chunk for the instruction items still open. The first wave has at most `first_wave` chunks: one for a
    model, so what every chunk needs is written once (the rules' templated functions cost nothing twice and
    are merged by consolidation, so they start `wave_size` chunks at once).

    Residual dirt in chunks the analyst already worked on is dirt it could not fix there: another chunk
    showing only that is not worth a call. Selection is done when nothing new is left, or the chunk budget
    or the step budget is spent. A drop whose labelled rows hold corrections (`taught`) gets one chunk even when
    no detector sees dirt: the corrections show what the user wants written otherwise; so does a drop whose
    instructions ask the rules a rewrite (`asked`: values, units, date or digit layouts). Before it is done, a
    model is given one more chunk for the kinds of dirt still left on the held-out rows (`held_out`,
    "kind:column") that a chunk shows too, each kind once: it is told the kinds and the columns, never the
    held-out values, so the held-out check stays a check on rows it never saw.

    Example:
        >>> plan = select_wave(split_drop(df, dataset="c", drop="c.csv", chunk_size=50, holdout_fraction=0.2),
        ...                    signatures, wave_size=2, budget=12)   # doctest: +SKIP
    """
    chosen = [c for c in plan.chunks if c.reason]
    room = min(first_wave if plan.waves == 0 else wave_size, budget - len(chosen), steps.left)
    if plan.done or room <= 0:
        stopped = plan.stopped or (
            "token budget spent" if steps.tokens_spent else "step budget spent" if steps.left <= 0
            else "chunk budget spent" if budget <= len(chosen) else "done"
        )
        return plan.model_copy(update={"done": True, "stopped": stopped, "steps_used": steps.used})
    seen: set[str] = {s for c in chosen for s in c.findings}
    reasons: dict[int, str] = {}
    while len(reasons) < room:
        best = max(
            (i for i in signatures if i not in reasons),
            key=lambda i: (len(set(signatures[i]) - seen), -i),
            default=None,
        )
        if best is None or not set(signatures[best]) - seen:
            break
        new = sorted(set(signatures[best]) - seen)
        reasons[best] = "residual issues not seen yet: " + ", ".join(new[:6]) + (" ..." if len(new) > 6 else "")
        seen.update(new)
    spare = [i for i in _spread(len(plan.chunks), budget) if i not in reasons and not plan.chunks[i].reason]
    # One spread chunk per wave keeps rare dirt in unprobed regions reachable, while there is new dirt at all.
    if reasons and len(reasons) < room and spare:
        reasons[spare.pop(0)] = "spread sample"
    # The first wave was one chunk: the second looks at one more part of the drop where dirt remains, so the
    # functions meet rows other than those they were written on (as a larger first wave's spread sample did).
    dirty = [i for i in spare if signatures.get(i)]
    if not reasons and plan.waves == 1 and len(chosen) == 1 and dirty:
        reasons[dirty[0]] = "spread sample: residual issues " + ", ".join(signatures[dirty[0]][:6])
        spare.remove(dirty[0])
    # Instructions no detector sees still need a chunk to be worked on.
    if not reasons and open_items and spare:
        reasons[spare.pop(0)] = "open instruction items: " + ", ".join(f"#{n}" for n in open_items)
    # Corrections the user made are dirt no detector may see ("7.0" where the user writes "7"): they need a chunk.
    if not reasons and taught and plan.waves == 0 and spare:
        reasons[spare.pop(0)] = "the user's corrected rows show changes the chunks' detectors do not see"
    if not reasons and asked and plan.waves == 0 and spare:
        reasons[spare.pop(0)] = "the instructions ask rewrites the chunks' detectors do not see"
    # A model that is configured is always asked: it reads the whole drop's evidence, which no chunk's detectors see.
    if not reasons and ask_model and plan.waves == 0 and spare:
        reasons[spare.pop(0)] = "the model is asked once over the whole drop's evidence (the chunks' detectors are quiet)"
    # What the functions so far leave on the held-out rows goes back to the model before the run ends, where rows it
    # may see show that kind of dirt too (a chunk analysed or one left): its function may then be one the held-out
    # rows defeat (a table of the slips it saw). Where no chunk shows it, the model sees none of it (it never sees
    # the held-out rows) and can only say so, a call for nothing.
    back = sorted(set(held_out) - set(plan.returned)) if ask_model and not reasons else []
    back = [kind for kind in back if kind in seen or any(kind in signatures.get(i, ()) for i in spare)]
    if back and spare:
        best = max(spare, key=lambda i: (len(set(signatures.get(i, ())) & set(back)), -i))
        reasons[best] = ("left on the held-out rows by the functions so far: " + ", ".join(back[:6])
                         + (" ..." if len(back) > 6 else "") + " (look for the same dirt in the rows and evidence "
                         "shown; where they do not show it, say so and stop)")
        spare.remove(best)
    if not reasons:
        stopped = "instruction items open but no chunk left" if open_items else "no new dirt"
        return plan.model_copy(update={"done": True, "stopped": stopped, "steps_used": steps.used})
    wave = plan.waves + 1
    share = max(1, min(steps.per_chunk, steps.left // len(reasons)))
    tokens = max(1, (steps.tokens - steps.tokens_used) // len(reasons)) if steps.tokens else 0
    chunks = tuple(
        c.model_copy(update={"reason": reasons[i], "wave": wave, "findings": signatures.get(i, ()), "steps": share,
                             "tokens": tokens})
        if i in reasons else c
        for i, c in enumerate(plan.chunks)
    )
    new_ids = tuple(chunks[i].id for i in reasons)  # priority order: most new dirt first
    return plan.model_copy(
        update={"chunks": chunks, "selected": plan.selected + new_ids, "waves": wave, "steps_used": steps.used,
                "returned": tuple(sorted({*plan.returned, *back}))}
    )


def plan_chunks(
    df: pd.DataFrame,
    *,
    dataset: str,
    drop: str,
    chunk_size: int,
    budget: int,
    holdout_fraction: float,
    wave_size: int | None = None,
    clean: Cleaner | None = None,
    previous: ChunkPlan | None = None,
    steps: StepBudget = StepBudget(),
    open_items: tuple[int, ...] = (),
    first_wave: int = 1,
    ask_model: bool = False,
    left_alone: frozenset[str] = frozenset(),
    taught: bool = False,
    asked: bool = False,
    spacing_asked: bool = False,
) -> ChunkPlan:
    """Split a drop (or continue `previous`) and choose the next wave of chunks for the analyst. Kinds of dirt in
    `left_alone` (those the defaults leave as written, such as null tokens nobody asked to null) do not go back
    to the model from the held-out rows. `taught`: the drop's labelled rows hold corrections; `asked`: the
    instructions ask the rules a rewrite (see `select_wave`). Unless the instructions ask for whitespace to be
    normalised (`spacing_asked`), the spacing of a column of free text over the drop is its writer's: the harm
    gate sends back a function that changes it, so no chunk goes to the model for it (a chunk whose few notes
    are short enough to look like values, each with a double space after a full stop, cost a call for nothing).

    Example:
        >>> plan = plan_chunks(df, dataset="c", drop="c.csv", chunk_size=50, budget=8, holdout_fraction=0.2)  # doctest: +SKIP
        >>> plan.last_wave                                                                                   # doctest: +SKIP
    """
    plan = previous
    if plan is None or plan.rows != len(df) or plan.chunk_size != chunk_size:
        plan = split_drop(df, dataset=dataset, drop=drop, chunk_size=chunk_size, holdout_fraction=holdout_fraction)
    if plan.done:
        return plan
    probe = probe_chunks(plan, budget)
    signatures = residual_signatures(plan, df, probe, clean or (lambda rows: rows))
    held_out = held_out_residual(plan, df, clean, left_alone) if ask_model and plan.waves and clean is not None else ()
    if ask_model and not spacing_asked:
        writers = free_text_spacing(df)
        signatures = {i: tuple(k for k in kinds if k not in writers) for i, kinds in signatures.items()}
        held_out = tuple(k for k in held_out if k not in writers)
    return select_wave(plan, signatures, wave_size=wave_size or budget, budget=budget, steps=steps,
                       open_items=open_items, first_wave=first_wave, ask_model=ask_model, held_out=held_out,
                       taught=taught, asked=asked)


def free_text_spacing(df: pd.DataFrame) -> frozenset[str]:
    """The stray whitespace ("whitespace:column") of the drop's columns of free text, judged over the whole drop:
    a chunk's rows of such a column may be short enough to look like values, and their spacing then like dirt.

    Example:
        >>> notes = ["Called twice.  Wants a demo for the sales team next week."] * 3 + ["Signed.  Paid."]
        >>> sorted(free_text_spacing(pd.DataFrame({"notes": notes, "city": ["Bend "] * 4})))
        ['whitespace:notes']
    """
    return frozenset(f"{whitespace.KIND}:{c}" for c in df.columns
                     if whitespace.is_free_text(ColumnValues.of(c, df[c])))


def held_out_residual(plan: ChunkPlan, df: pd.DataFrame, clean: Cleaner,
                      left_alone: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The kinds of dirt ("kind:column") the current registry leaves on the held-out rows, but `left_alone` and
    those whose flagged values the drop holds on many rows: a spelling on `KEEP_CELLS` rows or more, or one of
    a value the drop writes two ways on that many rows each ("ENG" beside "eng"), is presumed right, and the
    harm gate sends back any function that rewrites it, so asking the model about it again costs a call for
    nothing. A case slip is judged by the case rule over the whole drop instead, as the gate judges it: "tx" on
    15 rows beside "TX" on 324 is a slip still to fix."""
    rows = plan.holdout_rows(df)
    if rows.empty:
        return ()
    found = [f for f in detect_issues(clean(rows)) if f.kind not in left_alone]
    return tuple(sorted({f"{f.kind}:{f.column}" for f in found if not _settled(df, f.column, f.examples, f.kind)}))


def _settled(df: pd.DataFrame, column: str, values: tuple[str, ...], kind: str = "") -> bool:
    """Whether the drop holds every one of `values` on many rows, or writes each two ways on many rows each; for
    a case slip, whether the case rule learned over the whole drop keeps every one of them."""
    if not values or column not in df.columns:
        return False
    if kind == case_variants.KIND:
        convention, exceptions, letters, keep = case_variants.case_rule(ColumnValues.of(column, df[column]))
        return all(case_variants.fix(v, convention, exceptions, letters, keep) == v for v in values)
    counts = df[column][df[column].map(type) == str].value_counts()
    many = set(counts.index[counts >= KEEP_CELLS])
    spellings = pd.Series(list(many), dtype=object).str.casefold().value_counts()
    twice = set(spellings.index[spellings >= 2])
    return all(v in many or v.casefold() in twice for v in values)


def _spread(n: int, k: int) -> list[int]:
    """Up to k indexes evenly spread over range(n), first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})
