"""Acceptance checks for candidate functions, and the cell comparisons validation is built on.

Every check runs the code in the sandbox; a failed check is a reason the model (or rule) can act on.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from .functions import CleaningFunction, columns_in_code
from .profile import is_null_token
from .registry import Evidence, Example


#: A candidate using more CPU time than this per row (and than the floor) on the chunk or the held-out rows is
#: rejected: it would not scale to real drops. CPU time inside the sandbox, never the wall clock: a busy machine
#: does not change what is learned.
SLOW_PER_ROW_S = 0.01
SLOW_FLOOR_S = 2.0
#: Rows drawn across the drop that a candidate is judged on when the chunk and the held-out rows show it
#: nothing to change, and that its cost is measured on after them.
SAMPLE_ROWS = 5_000
#: A candidate's cost is measured inside the sandbox on this many rows: the chunk, the held-out rows and rows
#: drawn across the drop, each with its own values (a drop with fewer rows is repeated up to it, so a
#: function's fixed start-up cost, a few milliseconds, does not count as cost per cell) ...
COST_ROWS = 2_000
#: ... per cell it touches (the rows times the columns it names or changes); one costing more than this
#: per cell is sent back with its cost and the hint to vectorise. Vectorised pandas (`.str` methods, a
#: regex replace, `.map` over the distinct values) does a typical cleaning job in 0.4-3.5 us per cell there,
#: the rules' heaviest template (dependency repair over a dozen columns) up to 25; a Python loop over rows
#: (`iterrows`) or a heavy function called on every cell costs 100-1000 (benchmarks/cost_per_cell.py).
MAX_COST_PER_CELL_S = 50e-6
#: The limit as the prompts, the docs and the feedback word it.
COST_LIMIT = f"{MAX_COST_PER_CELL_S * 1e6:g} us per cell"


class CodeRunner(Protocol):
    """The slice of the sandbox the core needs: run untrusted code on a frame, elsewhere."""

    def run(
        self, code: str, df: pd.DataFrame, *, entry: str | None = None, timeout_s: float = 10.0, module: bool = False
    ) -> pd.DataFrame: ...

    def timed_run(
        self, code: str, df: pd.DataFrame, *, entry: str | None = None, timeout_s: float = 10.0
    ) -> tuple[pd.DataFrame, float]: ...


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one candidate: accepted with evidence, or rejected with a reason."""

    accepted: bool
    reason: str
    evidence: Evidence | None = None
    #: (rows, the candidate's output on them) for each frame it was checked on, the chunk's first: a caller
    #: that accepts it need not run it on those rows again.
    outputs: tuple[tuple[pd.DataFrame, pd.DataFrame], ...] = field(default=(), compare=False, repr=False)


@contextlib.contextmanager
def texts_kept() -> Iterator[None]:
    """Within it (in this thread), `as_text` converts each frame once, kept by identity and held meanwhile: for
    the checks of one candidate, which compare the same few frames many times and change none of them."""
    outer = getattr(_KEPT, "texts", None)
    if outer is None:
        _KEPT.texts = {}
    try:
        yield
    finally:
        if outer is None:
            _KEPT.texts = None


_KEPT = threading.local()


def as_text(df: pd.DataFrame) -> pd.DataFrame:
    """The frame with every cell as text or None, so frames of any dtype compare cell by cell."""
    kept = getattr(_KEPT, "texts", None)
    if kept is None:
        return _as_text(df)
    hit = kept.get(id(df))
    if hit is None or hit[0] is not df:
        hit = kept[id(df)] = (df, _as_text(df))
    return hit[1].copy(deep=False)  # copy-on-write: a caller's change stays its own


def _as_text(df: pd.DataFrame) -> pd.DataFrame:
    out = {}
    for j in range(df.shape[1]):
        column = df.iloc[:, j]
        values = np.array(column.to_numpy(dtype=object), dtype=object)  # a copy: nulls are written into it
        values[column.isna().to_numpy()] = None
        if infer_dtype(values, skipna=True) not in ("string", "empty"):  # most columns are text and None already
            values = [v if v is None or isinstance(v, str) else _scalar_text(v) for v in values]
        out[j] = values
    text = pd.DataFrame(out, dtype=object)
    text.columns = list(df.columns)
    return text


def _scalar_text(v: object) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v)) if abs(float(v)) < 1e15 else str(v)
    return str(v)


def changed_cells(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """A boolean frame over the columns both share: True where the cell's text differs."""
    cols = [c for c in before.columns if c in after.columns]
    b = _columns(as_text(before), cols).to_numpy(dtype=object)
    a = _columns(as_text(after), cols).to_numpy(dtype=object)
    # text or None in every cell: `!=` tells two texts apart, a text from None, and None from None not
    if b.shape != a.shape:
        raise ValueError(f"cannot compare {len(before)} rows with {len(after)} cell by cell")
    return pd.DataFrame(b != a, columns=cols, dtype=bool)


def output_changes(before: pd.DataFrame, after: pd.DataFrame, text_rows: bool | Sequence[bool] = False) -> pd.DataFrame:
    """`changed_cells` as the written output shows the cells, for counting what a module changed.

    `text_rows` (one flag for every row, or one per row) marks the rows of a text drop (CSV/TSV): there an empty
    field and a null are written alike, so an empty string turned into null (None, NaN), or back, is no change.
    The rows of a typed drop (JSON, Parquet) keep them apart: `""` and `null` are two values there.

    Example:
        >>> before, after = pd.DataFrame({"a": ["", "x "]}), pd.DataFrame({"a": [None, "x"]})
        >>> int(output_changes(before, after, text_rows=True).to_numpy().sum())
        1
    """
    diff = changed_cells(before, after)
    text = np.asarray(text_rows, dtype=bool)
    if not text.any():
        return diff
    cols = list(diff.columns)
    b, a = _columns(as_text(before), cols).to_numpy(dtype=object), _columns(as_text(after), cols).to_numpy(dtype=object)
    both_empty = (pd.isna(b) | (b == "")) & (pd.isna(a) | (a == ""))
    return diff & ~(both_empty & (text.reshape(-1, 1) if text.ndim else text))


def _columns(text: pd.DataFrame, cols: list) -> pd.DataFrame:
    return text if list(text.columns) == cols else text[cols]


def frames_equal(left: pd.DataFrame, right: pd.DataFrame) -> bool:
    """Same columns, same rows, same cell texts."""
    if list(left.columns) != list(right.columns) or len(left) != len(right):
        return False
    return not changed_cells(left, right).to_numpy().any()


def check_candidate(
    fn: CleaningFunction,
    chunk: pd.DataFrame,
    holdout: pd.DataFrame,
    runner: CodeRunner,
    *,
    timeout_s: float = 10.0,
    allow_row_drops: bool = False,
    sample: pd.DataFrame | None = None,
    asks: tuple[str, ...] = (),
    require_change: bool = True,
) -> Verdict:
    """Run a candidate on the chunk and on held-out rows, and say whether it may join the registry.

    `chunk`, `holdout` and `sample` (rows drawn across the drop, for measuring the cost) are already
    cleaned by the registry so far. `asks` are the texts of the instruction items the function serves: a
    value they name may become null although it is no null token (the user's words win over the defaults).
    A merged function that replaces accepted ones need not change anything (`require_change=False`).
    Sandbox errors propagate to the caller (they are rejections with their own message); failed checks come
    back as a rejected Verdict.
    """
    with _RunsAhead(runner) as ahead, texts_kept():
        return _checked(fn, chunk, holdout, runner, ahead, timeout_s=timeout_s, allow_row_drops=allow_row_drops,
                        sample=sample, asks=asks, require_change=require_change)


class _RunsAhead:
    """The runs of one candidate's checks whose rows are known before any of them ends, started at once on a
    sandbox with more than one worker (threads only wait on its processes): taken in the checks' order, they
    give the verdict the runs one after another would, sooner. Runs whose result a rejection leaves unread are
    not waited for."""

    def __init__(self, runner: CodeRunner):
        self._pool = None
        if all(getattr(runner, name, None) is not None for name in ("checked_run", "screen")) \
                and getattr(runner, "size", 1) > 1:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=runner.size, thread_name_prefix="smolclean-check")
        self._started: dict[str, Future] = {}

    def __enter__(self) -> _RunsAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def parallel(self) -> bool:
        """Whether runs start ahead (on a sandbox with more than one worker)."""
        return self._pool is not None

    def start(self, key: str, call, *args, **kwargs) -> None:
        if self._pool is not None:
            self._started[key] = self._pool.submit(call, *args, **kwargs)

    def result(self, key: str, call, *args, **kwargs):
        """The started run's result (its error raised here), or the run made now."""
        started = self._started.pop(key, None)
        return started.result() if started is not None else call(*args, **kwargs)


def _checked(fn: CleaningFunction, chunk: pd.DataFrame, holdout: pd.DataFrame, runner: CodeRunner, ahead: _RunsAhead,
             *, timeout_s: float, allow_row_drops: bool, sample: pd.DataFrame | None, asks: tuple[str, ...],
             require_change: bool) -> Verdict:
    results = []
    dropped = 0
    checked = getattr(runner, "checked_run", None)  # the three runs below in one sandbox process
    frames = [(label, frame) for label, frame in (("the chunk", chunk), ("the held-out rows", holdout))
              if not frame.empty]
    if checked is not None and ahead.parallel:
        runner.screen(fn.code, entry=fn.name)  # parsed here: the runs started below only reuse the gate's verdict
        if frames and fn.rule is None:  # the cost's rows, when every frame passes (see `_cost_problem`): the
            # longest run, started first
            rows = cost_sample([frame for _, frame in frames] + ([sample] if sample is not None else []))
            ahead.start("cost", runner.timed_run, fn.code, rows, entry=fn.name, timeout_s=timeout_s)
        for label, frame in frames:
            ahead.start(label, checked, fn.code, frame, entry=fn.name, timeout_s=timeout_s)
    for label, frame in frames:
        if checked is not None:
            out, cpu_s, repeat, again = ahead.result(label, checked, fn.code, frame, entry=fn.name, timeout_s=timeout_s)
        else:
            out, cpu_s = runner.timed_run(fn.code, frame, entry=fn.name, timeout_s=timeout_s)
        limit = max(SLOW_FLOOR_S, SLOW_PER_ROW_S * len(frame))
        if cpu_s > limit and fn.rule is None:
            return Verdict(
                False,
                f"too slow: {cpu_s:.1f} s of CPU time on {len(frame)} rows of {label} (limit {limit:.1f} s); use "
                "vectorised pandas operations instead of Python loops over rows",
            )
        problem = _row_and_column_problem(frame, out, label, allow_row_drops)
        if problem:
            return Verdict(False, problem)
        dropped += len(frame) - len(out)
        if checked is None:
            repeat = runner.run(fn.code, frame, entry=fn.name, timeout_s=timeout_s)
        elif isinstance(repeat, Exception):
            raise repeat
        if not frames_equal(out, repeat):
            return Verdict(
                False,
                f"not deterministic on {label}: two runs on the same rows gave different results in column(s) "
                f"{_differing_columns(out, repeat)}; do not use randomness, the clock or anything but the row",
            )
        if checked is None:
            again = runner.run(fn.code, out, entry=fn.name, timeout_s=timeout_s)
        elif isinstance(again, Exception):
            raise again
        if not frames_equal(out, again):
            cols = _differing_columns(out, again)
            return Verdict(
                False,
                f"not idempotent on {label}: applying it twice changes column(s) {cols} again; "
                "make the function leave already-clean values unchanged",
            )
        nulled = _new_nulls(frame, out, asks)
        if nulled:
            col, value = nulled
            return Verdict(
                False,
                f"turned the non-null value {value!r} in column {col!r} into null on {label}; only null tokens "
                "(like 'N/A' or 'none') and values an instruction item you serve names may become null: keep "
                "values you cannot fix",
            )
        results.append((frame, out))
    # A rule's template is our own code, batch-safe by its tests and its cost measured once over the public pairs
    # (benchmarks/cost_per_cell.py): it is judged by what it does only, so what is learned never depends on how
    # busy the machine is, and learning does not run it once more on thousands of rows.
    too_costly = _cost_problem(fn, results, sample, runner, timeout_s, ahead) if results and fn.rule is None else None
    if too_costly:
        return Verdict(False, too_costly)
    if require_change and sample is not None and not sample.empty and not _changes_any(results):
        # The drop's evidence shows the model dirt on rows neither the chunk nor the held-out rows hold: the
        # function is judged on the rows drawn across the drop instead, with the same checks.
        out = runner.run(fn.code, sample, entry=fn.name, timeout_s=timeout_s)
        problem = _row_and_column_problem(sample, out, "rows across the drop", allow_row_drops)
        nulled = None if problem else _new_nulls(sample, out, asks)
        if problem or nulled:
            return Verdict(False, problem or f"turned the non-null value {nulled[1]!r} in column {nulled[0]!r} into null "
                                             "on rows across the drop; keep values you cannot fix")
        results.append((sample, out))
    verdict = _evidence_verdict(fn, results, holdout_rows=len(holdout), rows_dropped=dropped,
                                require_change=require_change)
    return replace(verdict, outputs=tuple(results))


def _changes_any(results: list[tuple[pd.DataFrame, pd.DataFrame]]) -> bool:
    return any(len(b) != len(a) or changed_cells(b, a).to_numpy().any() for b, a in results)


def cost_sample(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows a function's cost is measured on: `frames` in order (the rows it was checked on first, then
    rows drawn across the drop, each with its own values), cut to `COST_ROWS`, or repeated up to it when
    the drop has fewer rows."""
    rows = pd.concat([f for f in frames if len(f)], ignore_index=True)
    if rows.empty:
        return rows
    if len(rows) < COST_ROWS:
        rows = pd.concat([rows] * -(-COST_ROWS // len(rows)), ignore_index=True)
    return rows.iloc[:COST_ROWS].reset_index(drop=True)


def measure_cost(fn: CleaningFunction, rows: pd.DataFrame, runner: CodeRunner, *,
                 timeout_s: float = 10.0, ahead: _RunsAhead | None = None) -> tuple[float, int, pd.DataFrame]:
    """(CPU seconds per cell, cells measured, the output) of a function run inside the sandbox on `rows`.

    The cells are the rows times the columns the function touches: those it names (in `columns` or in its
    code), changes or adds; all of them when it touches none of those.

    Example:
        >>> per_cell, cells, out = measure_cost(fn, cost_sample([chunk, holdout, sample]), sandbox)   # doctest: +SKIP
    """
    if ahead is not None:  # started on these rows with the checks
        out, seconds = ahead.result("cost", runner.timed_run, fn.code, rows, entry=fn.name, timeout_s=timeout_s)
    else:
        out, seconds = runner.timed_run(fn.code, rows, entry=fn.name, timeout_s=timeout_s)
    names = [str(c) for c in rows.columns]
    touched = {c for c in map(str, fn.columns) if c in names} | set(columns_in_code(fn.code, names))
    touched |= {str(c) for c in out.columns if c not in rows.columns}
    if len(out) == len(rows):
        touched |= {str(c) for c in _differing_columns(rows, out)}
    cells = len(rows) * (len(touched) or len(rows.columns))
    return seconds / max(1, cells), cells, out


def _cost_problem(fn: CleaningFunction, results: list[tuple[pd.DataFrame, pd.DataFrame]], sample: pd.DataFrame | None,
                  runner: CodeRunner, timeout_s: float, ahead: _RunsAhead | None = None) -> str | None:
    """Why the function's cost, measured on many rows, sends it back: too slow per cell, or its output on the
    rows it was checked on differs when it runs on more rows."""
    shown = [frame for frame, _ in results]
    rows = cost_sample(shown + ([sample] if sample is not None else []))
    per_cell, cells, out = measure_cost(fn, rows, runner, timeout_s=timeout_s, ahead=ahead)
    # the rows it was checked on come first: run on more rows, they must come out as they did (a function
    # that drops rows cannot be lined up row by row)
    expected = pd.concat([after for _, after in results], ignore_index=True)
    if len(out) == len(rows) and len(expected) == sum(len(f) for f in shown):
        expected = expected.iloc[: len(rows)]
        timed = out.iloc[: len(expected)].reset_index(drop=True)
        if not frames_equal(timed, expected):
            return (
                f"behaves differently on more rows: run on {len(rows)} rows it gives other results for the rows it "
                f"was checked on, in column(s) {_differing_columns(timed, expected)}; decide each row from that row "
                "alone plus constants, whatever the number of rows"
            )
    if per_cell <= MAX_COST_PER_CELL_S:
        return None
    return (
        f"too slow for real drops: {per_cell * 1e6:.1f} us per cell ({per_cell * cells:.2f} s on {cells} cells: "
        f"{len(rows)} rows of the drop times the {cells // max(1, len(rows))} column(s) it touches), over the limit "
        f"of {COST_LIMIT}; vectorise it: use `.str` methods or a regex `.str.replace` "
        "on whole columns, or map each distinct value once (`codes, uniques = pd.factorize(col)`, fix `uniques`, "
        "then `take` by `codes`) instead of a Python loop over rows or cells"
    )


def _row_and_column_problem(before: pd.DataFrame, after: pd.DataFrame, label: str, allow_drops: bool) -> str | None:
    if len(after) != len(before) and not (allow_drops and len(after) < len(before)):
        return f"changed the number of rows on {label} from {len(before)} to {len(after)}; return every row in order"
    missing = [c for c in before.columns if c not in after.columns]
    if missing:
        return f"removed column(s) {missing} on {label}; keep every input column"
    return None


def _differing_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return sorted(set(a.columns) ^ set(b.columns)) or list(a.columns)
    diff = changed_cells(a, b)
    return [c for c in diff.columns if diff[c].any()]


def _new_nulls(before: pd.DataFrame, after: pd.DataFrame, asks: tuple[str, ...]) -> tuple[str, str] | None:
    """The first value turned into null that is no null token and that no item in `asks` names."""
    if len(before) != len(after):
        return None
    b = as_text(before).reset_index(drop=True)
    a = as_text(after).reset_index(drop=True)
    for col in b.columns:
        if col not in a.columns:
            continue
        became_null = b[col].notna() & a[col].isna()
        for value in b.loc[became_null, col]:
            if not is_null_token(value) and not named_in(value, asks):
                return col, value
    return None


def named_in(value: str, texts: tuple[str, ...]) -> bool:
    """Whether one of `texts` (instruction items) names `value`, as a word or a quoted phrase, in any case.

    Example:
        >>> named_in("Unknown ", ("Write the status 'unknown' as a missing value (null).",))
        True
        >>> named_in("inactive", ("Write the status 'unknown' as a missing value (null).",))
        False
    """
    word = value.strip().casefold()
    if not word:
        return False
    pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
    return any(pattern.search(text.casefold()) for text in texts)


def _evidence_verdict(
    fn: CleaningFunction, results: list[tuple[pd.DataFrame, pd.DataFrame]], holdout_rows: int, rows_dropped: int = 0,
    require_change: bool = True,
) -> Verdict:
    cells = 0
    columns: list[str] = []
    examples: list[Example] = []
    for before, after in results:
        if len(before) != len(after):  # rows were dropped on purpose: compare what is comparable by position
            continue
        diff = changed_cells(before, after)
        cells += int(diff.to_numpy().sum())
        b, a = as_text(before).reset_index(drop=True), as_text(after).reset_index(drop=True)
        for col in diff.columns:
            if not diff[col].any():
                continue
            if col not in columns:
                columns.append(col)
            for i in np.flatnonzero(diff[col].to_numpy())[: max(0, 3 - len(examples))]:
                examples.append(Example(column=col, before=b.at[i, col], after=a.at[i, col]))
    if cells == 0 and rows_dropped == 0 and require_change:
        return Verdict(False, "made no change on the chunk or the held-out rows; target a problem that is present")
    evidence = Evidence(
        rows_checked=sum(len(b) for b, _ in results),
        holdout_rows=holdout_rows,
        cells_changed=cells,
        columns_changed=tuple(columns),
        examples=tuple(examples),
        rows_dropped=rows_dropped,
    )
    dropped = f"; dropped {rows_dropped} row(s) as the instructions allow" if rows_dropped else "; no rows lost"
    return Verdict(True, f"changed {cells} cell(s) in {columns}; deterministic and idempotent{dropped}", evidence)
