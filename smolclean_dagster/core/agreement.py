"""After a drop is cleaned: do the module's changes agree with the other rows of their entity?

A module is judged on the drop it was learned from. A later drop may hold forms that drop never did, and a
function matching them may write a value of the right form but the wrong value: "7:02aDec 1" -> "7:02 a.m."
where the flight's other reports say "7:16 a.m.". No learning-time gate saw those rows, so each cleaned drop is
checked: its entity column is found (`entities.entity_keys`), and a column fails when more than
`harm.CONTRADICTED_SHARE` of the module's changes there (and `harm.MIN_HARM_CELLS` or more) write a value the
entity's other rows contradict, the rule the learning gate sends functions back by.

The check reads the drop's first `CHECK_ROWS` rows (an entity's rows must be seen together, so not a spread
sample) and cleans them once more in the sandbox, so it sees exactly what `clean()` did, whatever the output
format. The cleaned drop stays as written: the module's result for a row never depends on its batch. What the
check does is say so (a warning in the UI, a line from `smolclean apply`) and let learning from the drop take
out the function that did it (`quality.keep_what_agrees`, run when a learning publishes its registry).

Example:
    >>> import pandas as pd
    >>> before = pd.DataFrame({"flight": ["AA-1"] * 4 + ["UA-2"] * 4 + ["DL-3"] * 4,
    ...                        "gate": ["B4"] * 4 + ["C1"] * 4 + ["A7"] * 4,
    ...                        "dep": ["7:16 a.m."] * 3 + ["7:02aDec 1"] + ["9:05 a.m."] * 3 + ["9:01aDec 1"]
    ...                               + ["6:40 a.m."] * 3 + ["6:32aDec 1"]})
    >>> after = before.assign(dep=before["dep"].str.replace("aDec 1", " a.m.", regex=False))
    >>> report = agreement_report(before, after)
    >>> report.passed, [(c.column, c.key, c.cells, c.changed) for c in report.columns]
    (False, [('dep', 'flight', 3, 3)])
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from . import harm
from .drops import iter_batches
from .entities import entity_keys
from .validate import CodeRunner, changed_cells

#: Rows of a cleaned drop the check reads: its first ones, so that an entity's rows are seen together.
CHECK_ROWS = 20_000
#: Rows the entity column is looked for in first: a drop without one is not read further.
PROBE_ROWS = 5_000


class AgreementReport(BaseModel):
    """What the entity check saw on a cleaned drop: the rows read, the entity column, the columns that failed."""

    model_config = ConfigDict(frozen=True)

    rows_checked: int = 0
    entity: str | None = None
    cells_changed: int = 0
    columns: tuple[harm.Contradicted, ...] = ()
    note: str = ""  # why nothing could be checked, when nothing could

    @property
    def passed(self) -> bool:
        return not self.columns

    @property
    def contradicted(self) -> int:
        return sum(c.cells for c in self.columns)

    def describe(self) -> str:
        if self.note:
            return self.note
        if self.entity is None:
            return f"no column names an entity in the first {self.rows_checked} rows: nothing to check against"
        if self.passed:
            return (f"the module's {self.cells_changed} changes in the first {self.rows_checked} rows agree with the "
                    f"other rows of their {self.entity}")
        return "; ".join(describe(c) for c in self.columns)


def describe(c: harm.Contradicted) -> str:
    """One column the check failed on, in words."""
    before, after, theirs = c.example
    return (f"{c.column}: {c.cells} of the module's {c.changed} changes write a value the other rows of the same "
            f"{c.key} contradict, e.g. {before!r} -> {after!r} where they hold {theirs!r}")


def agreement_report(before: pd.DataFrame, after: pd.DataFrame, keys: dict[str, str] | None = None) -> AgreementReport:
    """The entity check of `after`, the module's output for the rows `before` (same rows, same order); `keys`:
    the drop's entity columns (`entity_keys(before)`), when known."""
    if len(before) != len(after):
        return AgreementReport(rows_checked=len(before),
                               note=f"the module returned {len(after)} rows for {len(before)}: no cell to compare")
    if keys is None:
        keys = entity_keys(before) if len(before) else {}  # the drop's entity, as read
    changed = changed_cells(before.reset_index(drop=True), after.reset_index(drop=True)).to_numpy().sum()
    return AgreementReport(rows_checked=len(before), entity=next(iter(keys.values()), None), cells_changed=int(changed),
                           columns=harm.contradictions(before, after, keys) if keys else ())


def check_drop(module_source: str, path: Path | str, runner: CodeRunner, *, rows: int = CHECK_ROWS,
               timeout_s: float = 120.0) -> AgreementReport:
    """The entity check of a drop cleaned by `module_source`: its first `rows` rows cleaned again in the sandbox
    and compared with what they were (not cleaned again when no column of them names an entity)."""
    probe = next(iter_batches(path, min(rows, PROBE_ROWS)), None)
    if probe is None or probe.empty:
        return AgreementReport(note="the drop holds no rows")
    if not entity_keys(probe):  # nothing to check against: the rows are not read further nor cleaned again
        return AgreementReport(rows_checked=len(probe))
    first = (next(iter_batches(path, rows)) if len(probe) >= PROBE_ROWS else probe).reset_index(drop=True)
    keys = entity_keys(first)
    if not keys:
        return AgreementReport(rows_checked=len(first))
    after = runner.run(module_source, first, entry="clean", module=True, timeout_s=timeout_s)
    return agreement_report(first, after.reset_index(drop=True), keys)
