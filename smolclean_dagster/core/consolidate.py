"""Consolidation: one function per column and concern, and no two functions deciding one value two ways.

It runs when a wave is published: at every planning interval and at the end of every learning run, a later
version's too. A function that a later wave or a later version writes for a column and concern the module
already has (`unify_case_state_2` beside `unify_case_state`) is merged into the one there. The module never
ships both.

**Merging.** Functions doing one job (made by one rule on the same columns, `same_rule_and_columns` or the rules
analyst's `merge_key`; with a model, any functions on exactly the same columns) become one, named after the
first of them, with their tables united. Where they decided one value two ways, the merged function keeps *the
decision the module made* by running them in order:
- for a value the earlier function left as it was, the later one's decision. The later function was learned
  on rows the earlier one had already cleaned (each step, wave and version sees the rows as the registry
  cleans them), so it decided with the earlier decision in view. Example: "ca", which the first version kept
  as a spelling of the file and the second found a slip, becomes "CA".
- for a value the earlier function rewrote, the earlier one's. In the module the later function never saw
  that value, so "Bostn" stays "Boston" whatever a later table says.
So merging changes nothing the module did, and that is checked. A merge is kept only when the whole module with
the merged function gives exactly the same rows as before on the drop's rows, passes the code gate and stays
idempotent, and the merged function passes every check a new function does (`check_candidate`). Before a rule's
tables are united, a function's entries for values the module did not decide as it does are taken out
(`RuleSpec.without`), so the merged tables hold one decision per value. The merged entry names every function
it replaced (`merged_from`).

**One decision per value.** Two functions that cannot be merged and decide one value two ways are never both
kept: the earlier one stays and the later one is taken out. The earlier function is the one the module, and a
live version, cleaned with first; a later one that cannot join it and contradicts it is a second opinion, not a
second job. The later function goes into the registry's `dropped` with the values and the reason, which the next
learning steps read. For functions of one concern, "decides" includes keeping a value its tables name. For any
two functions left on one column, model-written code included, `find_conflicts` compares what they make of the
values the module hands the earlier one, and settles a conflict the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import ExportError
from .export import render_module
from .functions import CleaningFunction
from .registry import DroppedFunction, Registry, RegistryEntry
from .validate import SAMPLE_ROWS, CodeRunner, as_text, check_candidate, frames_equal

log = logging.getLogger("smolclean.consolidate")

#: Merges several functions into one, or says None; the result is checked before it is kept.
Merger = Callable[[list[CleaningFunction]], CleaningFunction | None]
#: What rule-made functions must share to be tried as one group (None: never merged).
MergeKey = Callable[[CleaningFunction], "tuple | None"]
#: Conflicts named in one reason at most (all of them are in `Consolidation.conflicts`).
SHOWN_CONFLICTS = 3


def same_rule_and_columns(function: CleaningFunction) -> tuple | None:
    """The default grouping of rule-made functions: one template on the same columns (their `concern`)."""
    return function.concern


@dataclass(frozen=True)
class Merge:
    """One consolidation decision. `names` became `into`, or the ones in `taken_out` were taken out because they
    decided values of `into` otherwise, or `into` is None: they stayed apart, and `reason` says why."""

    into: str | None
    names: tuple[str, ...]
    reason: str
    taken_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conflict:
    """Two functions deciding one value of a column two ways: what each makes of `value` on its own.

    Example:
        >>> Conflict("state", "ca", "unify_case_state", "ca", "unify_case_state_2", "CA").describe()
        "state 'ca': `unify_case_state` keeps it, `unify_case_state_2` makes it 'CA'"
    """

    column: str
    value: str | None
    earlier: str
    earlier_makes: str | None
    later: str
    later_makes: str | None

    def describe(self) -> str:
        """The conflict in one line, for the consolidation table and the reason a function was taken out."""
        return (f"{self.column} {self.value!r}: `{self.earlier}` {_makes(self.value, self.earlier_makes)}, "
                f"`{self.later}` {_makes(self.value, self.later_makes)}")


def _makes(value: str | None, result: str | None) -> str:
    return "keeps it" if result == value else f"makes it {result!r}"


@dataclass(frozen=True)
class Consolidation:
    """The registry after consolidation, every merge tried, and the conflicts found (the later function of each
    taken out)."""

    registry: Registry
    merges: tuple[Merge, ...] = field(default_factory=tuple)
    conflicts: tuple[Conflict, ...] = field(default_factory=tuple)

    @property
    def merged(self) -> tuple[Merge, ...]:
        """The merges that changed the registry: functions merged, or taken out for deciding a value otherwise."""
        return tuple(m for m in self.merges if m.into)


def candidate_groups(registry: Registry, *, by_columns: bool, rule_key: MergeKey = same_rule_and_columns) -> list[list[int]]:
    """Positions of entries that may do the same job: made by one rule with the same `rule_key` (by default
    on the same columns), and (with `by_columns`, for LLM-written functions) any functions touching exactly
    the same columns."""
    groups: dict[tuple, list[int]] = {}
    for i, entry in enumerate(registry.entries):
        fn = entry.function
        if fn.rule is not None:
            key = rule_key(fn)
            if key is None:
                continue
        elif by_columns and fn.columns:
            key = ("columns", tuple(sorted(fn.columns)))
        else:
            continue
        groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def consolidate(
    registry: Registry,
    rows: pd.DataFrame,
    runner: CodeRunner,
    *,
    rule_merger: Merger | None,
    model_merger: Merger | None = None,
    rule_key: MergeKey = same_rule_and_columns,
    timeout_s: float = 60.0,
) -> Consolidation:
    """Merge the functions of `registry` that do one job, and settle the values two functions decide two ways,
    checking both on `rows` (drop rows, never held out).

    `rule_key` groups rule-made functions for `rule_merger` (the rules analyst's `merge_key` also groups
    functions of one column-wise rule made on different columns).

    Example:
        >>> rules = RulesAnalyst()  # doctest: +SKIP
        >>> result = consolidate(registry, rows, sandbox, rule_merger=rules.merge, rule_key=rules.merge_key)  # doctest: +SKIP
        >>> [(m.into, m.names) for m in result.merged]  # doctest: +SKIP
        [('unify_case_state', ('unify_case_state', 'unify_case_state_2'))]
    """
    from .sandbox import SandboxError

    merges: list[Merge] = []
    conflicts: list[Conflict] = []
    current = registry
    baseline: pd.DataFrame | None = None
    while True:
        groups = candidate_groups(current, by_columns=model_merger is not None, rule_key=rule_key)
        tried = {m.names for m in merges}
        group = next((g for g in groups if tuple(current.entries[i].function.name for i in g) not in tried), None)
        if group is None:
            break
        if baseline is None:
            try:
                baseline = _run(current, rows, runner, timeout_s)
            except SandboxError as exc:  # the module as it is fails: no merge can be shown to keep its output
                names = tuple(current.entries[i].function.name for i in group)
                merges.append(Merge(None, names, f"the module does not run: {type(exc).__name__}: {exc}"))
                continue
        if current.entries[group[0]].function.rule is not None:
            after, merge, found = _merge_rule_group(current, group, rows, baseline, runner, rule_merger, timeout_s)
        else:
            after, merge, found = _merge_model_group(current, group, rows, baseline, runner, model_merger, timeout_s)
        merges.append(merge)
        conflicts.extend(found)
        if after is not None:
            log.info("consolidation: %s -> %s (%s)", merge.names, merge.into, merge.reason)
            if merge.taken_out:
                baseline = None  # the module's output changed
            current = after
    current, settled, found = _settle_conflicts(current, rows, runner, timeout_s)
    return Consolidation(current, tuple(merges + settled), tuple(conflicts + found))


def _merge_rule_group(registry: Registry, group: list[int], rows: pd.DataFrame, baseline: pd.DataFrame,
                      runner: CodeRunner, merger: Merger | None, timeout_s: float
                      ) -> tuple[Registry | None, Merge, list[Conflict]]:
    """Functions of one rule and concern as one function (see the module's docstring for which decision stays),
    or, when no merge holds and they decide values two ways, the earlier kept and the later ones taken out."""
    functions = [registry.entries[i].function for i in group]
    names = tuple(f.name for f in functions)
    decisions = _GroupDecisions.of(registry, group, rows, baseline, runner, timeout_s)
    two_ways = decisions.two_ways() if decisions else []
    refusals: list[str] = []
    for merged in _rule_merges(functions, merger, decisions.not_followed() if decisions else {}):
        candidate, refused = _checked_merge(registry, group, merged, rows, baseline, runner, timeout_s)
        if candidate is not None:
            reason = f"same output on {len(rows)} rows"
            if two_ways:
                reason += f"; one decision per value, the one the module made: {_shown(two_ways)}"
            return candidate, Merge(merged.name, names, reason), []
        refusals.append(refused)
    refused = refusals[0] if refusals else "cannot be merged"
    kept: set[str] = set()
    opposite: list[Conflict] = []
    for name in names:  # in the module's order, each beside the ones kept before it
        against = [c for c in two_ways if c.later == name and c.earlier in kept]
        opposite += against
        if not against:
            kept.add(name)
    later = tuple(n for n in names if n not in kept)
    if not later:
        return None, Merge(None, names, refused), []
    dropped = [DroppedFunction(name=n, reason=_contradicts([c for c in opposite if c.later == n], refused))
               for n in later]
    reason = (f"{refused}; they decide values two ways ({_shown(opposite)}): the earlier is kept, the later taken "
              "out")
    return registry.without_dropped(dropped), Merge(names[0], names, reason, taken_out=later), opposite


def _shown(conflicts: list[Conflict]) -> str:
    return "; ".join(c.describe() for c in conflicts[:SHOWN_CONFLICTS])


def _contradicts(conflicts: list[Conflict], refused: str = "") -> str:
    """Why a function is taken out: the values it decides otherwise than an earlier function kept."""
    merge = f" and cannot be merged with it ({refused})" if refused else ""
    return f"it decides values of `{conflicts[0].earlier}` otherwise{merge}: {_shown(conflicts)}"


def _rule_merges(functions: list[CleaningFunction], merger: Merger | None,
                 not_followed: dict[str, set[str]]) -> Iterator[CleaningFunction]:
    """The merges worth checking, named after the first function, first to last: the tables united after taking
    out each function's entries for values the module did not decide as it does; the tables united as they are;
    then both with the later function's entries first where two tables hold one key (a dependency table keyed
    on another column: the later function wrote its value last)."""
    if merger is None:
        return
    edited = [f.model_copy(update={"rule": f.rule.without(not_followed[f.name])}) if not_followed.get(f.name) else f
              for f in functions]
    seen: set[str] = set()
    for members in (edited, functions, edited[::-1], functions[::-1]):
        merged = merger(list(members))
        if merged is None:
            continue
        if merged.name == members[0].name:  # named after the first it was given: named after the first in the module
            merged = merged.renamed(functions[0].name)
        if merged.code not in seen:
            seen.add(merged.code)
            yield merged


def _merge_model_group(registry: Registry, group: list[int], rows: pd.DataFrame, baseline: pd.DataFrame,
                       runner: CodeRunner, merger: Merger | None, timeout_s: float
                       ) -> tuple[Registry | None, Merge, list[Conflict]]:
    """Model-written functions on the same columns as one function the model wrote, when it holds."""
    names = tuple(registry.entries[i].function.name for i in group)
    merged = merger([registry.entries[i].function for i in group]) if merger else None
    if merged is None:
        return None, Merge(None, names, "cannot be merged"), []
    candidate, refused = _checked_merge(registry, group, merged, rows, baseline, runner, timeout_s)
    if candidate is None:
        return None, Merge(None, names, refused), []
    return candidate, Merge(merged.name, names, f"same output on {len(rows)} rows"), []


def _checked_merge(registry: Registry, group: list[int], merged: CleaningFunction, rows: pd.DataFrame,
                   baseline: pd.DataFrame, runner: CodeRunner, timeout_s: float) -> tuple[Registry | None, str]:
    """The registry with `merged` in place of the group when the merge holds, else None and why not."""
    from .sandbox import SandboxError

    others = {e.function.name for i, e in enumerate(registry.entries) if i not in group}
    if merged.name in others:
        return None, f"the merged name {merged.name!r} is another function's"
    candidate = _replace(registry, group, merged)
    try:  # each run passes the code gate first
        once = _run(candidate, rows, runner, timeout_s)
        twice = _run(candidate, once, runner, timeout_s)
    except (ExportError, SandboxError) as exc:
        return None, f"merged code rejected: {type(exc).__name__}: {exc}"
    if not frames_equal(once, baseline):
        return None, "the merged function changes the module's output"
    if not frames_equal(once, twice):
        return None, "the merged module is not idempotent"
    refused = _check_merged(merged, registry, group, rows, runner, timeout_s)
    if refused:
        return None, f"the merged function was rejected: {refused}"
    return candidate, ""


def _run(registry: Registry, rows: pd.DataFrame, runner: CodeRunner, timeout_s: float) -> pd.DataFrame:
    """`rows` cleaned by the registry's module. A module longer than the sandbox takes (functions carrying a drop's
    tables, and a later wave's beside them before they are merged) runs as consecutive modules of its functions,
    which cleans the same: `clean` applies them one after another."""
    out = rows.reset_index(drop=True)
    for part in _parts(registry):
        out = runner.run(render_module(part, with_main=False), out, entry="clean", module=True, timeout_s=timeout_s)
    return out


def _parts(registry: Registry) -> list[Registry]:
    """The registry as consecutive registries whose functions' code fits in one sandbox run (a tenth kept for what
    the module adds around them); a function longer than that alone, for the gate to judge."""
    from .sandbox.gate import MAX_CODE_CHARS

    parts: list[list[RegistryEntry]] = []
    size = 0
    for entry in registry.entries:
        if not parts or size + len(entry.function.code) > 0.9 * MAX_CODE_CHARS:
            parts.append([])
            size = 0
        parts[-1].append(entry)
        size += len(entry.function.code)
    return [registry.with_entries(part) for part in parts]


def _check_merged(merged: CleaningFunction, registry: Registry, group: list[int], rows: pd.DataFrame,
                  runner: CodeRunner, timeout_s: float) -> str | None:
    """Why the merged function fails a check a new function must pass, on `rows` as the functions before the
    group leave them; None when it passes. It need not change anything on these rows (the ones it replaces
    may not have either)."""
    from .sandbox import SandboxError

    entries = [registry.entries[i] for i in group]
    spread = rows.iloc[np.linspace(0, len(rows) - 1, SAMPLE_ROWS).round().astype(int)] if len(rows) > SAMPLE_ROWS else rows
    try:
        before = _run(registry.with_entries(list(registry.entries[: group[0]])), spread.reset_index(drop=True),
                      runner, timeout_s)
        verdict = check_candidate(
            merged, before, before.iloc[:0], runner, timeout_s=timeout_s, require_change=False,
            allow_row_drops=any(e.evidence is not None and e.evidence.rows_dropped for e in entries),
            asks=tuple(dict.fromkeys(t for e in entries for t in e.serves)),
        )
    except SandboxError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if verdict.accepted else verdict.reason


def _replace(registry: Registry, group: list[int], merged: CleaningFunction) -> Registry:
    """The registry with the group's entries replaced by one, at the position of the first of them."""
    first = registry.entries[group[0]]
    replaced = [registry.entries[i] for i in group]
    names = tuple(dict.fromkeys(n for e in replaced for n in (e.merged_from or (e.function.name,))))
    entry = RegistryEntry(
        function=merged,
        provenance=first.provenance,
        evidence=first.evidence,
        merged_from=names,
        serves=tuple(dict.fromkeys(t for e in replaced for t in e.serves)),
    )
    entries = [entry if i == group[0] else e for i, e in enumerate(registry.entries) if i not in group[1:]]
    return registry.with_entries(entries)


@dataclass(frozen=True)
class _GroupDecisions:
    """What each function of a group makes of the values the module hands the first of them, beside what the
    whole module makes of them: the cells of the group's columns, as text."""

    functions: tuple[CleaningFunction, ...]
    columns: tuple[str, ...]
    before: pd.DataFrame
    module: pd.DataFrame
    alone: dict[str, pd.DataFrame]

    @classmethod
    def of(cls, registry: Registry, group: list[int], rows: pd.DataFrame, baseline: pd.DataFrame,
           runner: CodeRunner, timeout_s: float) -> _GroupDecisions | None:
        """None when a function of the group fails on the rows or changes their number (no cell to compare)."""
        from .sandbox import SandboxError

        functions = tuple(registry.entries[i].function for i in group)
        columns = tuple(c for c in dict.fromkeys(c for f in functions for c in f.columns) if c in rows.columns)
        if rows.empty or not columns or len(baseline) != len(rows):
            return None
        try:
            before = _run(registry.with_entries(list(registry.entries[: group[0]])), rows, runner, timeout_s)
            alone = {f.name: runner.run(f.code, before, entry=f.name, timeout_s=timeout_s) for f in functions}
        except SandboxError:
            return None
        if any(len(out) != len(before) or any(c not in out.columns for c in columns) for out in alone.values()):
            return None
        return cls(functions, columns, as_text(before[list(columns)]), as_text(baseline[list(columns)]),
                   {name: as_text(out[list(columns)]) for name, out in alone.items()})

    def not_followed(self) -> dict[str, set[str]]:
        """Per function, the values it decides otherwise than the module did where another function of the group,
        on its own, decides them as the module did: its table entries for them go before the tables are united."""
        out: dict[str, set[str]] = {}
        for column in self.columns:
            values, module = self.before[column].to_numpy(), self.module[column].to_numpy()
            follows = {f.name: self.alone[f.name][column].to_numpy() == module for f in self.functions}
            for f in self.functions:
                others = np.logical_or.reduce([follows[g.name] for g in self.functions if g is not f])
                out.setdefault(f.name, set()).update(
                    v for v in values[~follows[f.name] & others] if isinstance(v, str))
        return {name: values for name, values in out.items() if values}

    def two_ways(self) -> list[Conflict]:
        """Values two functions of the group decide differently, each deciding it: changing it, or keeping it
        where its tables name it (a spelling it keeps on purpose, a value it holds valid)."""
        found: dict[tuple[str, object, str], Conflict] = {}
        for column in self.columns:
            values = self.before[column].to_numpy()
            for i, earlier in enumerate(self.functions):
                for later in self.functions[i + 1:]:
                    a, b = self.alone[earlier.name][column].to_numpy(), self.alone[later.name][column].to_numpy()
                    for k in np.flatnonzero(a != b):
                        v = values[k]
                        if _decides(earlier, v, a[k]) and _decides(later, v, b[k]):
                            found.setdefault((column, v, later.name),
                                             Conflict(column, v, earlier.name, a[k], later.name, b[k]))
        return list(found.values())


def _decides(function: CleaningFunction, value: object, result: object) -> bool:
    return result != value or (isinstance(value, str) and function.rule is not None and function.rule.names(value))


def _settle_conflicts(registry: Registry, rows: pd.DataFrame, runner: CodeRunner, timeout_s: float
                      ) -> tuple[Registry, list[Merge], list[Conflict]]:
    """The registry with the later function of every conflict (`find_conflicts`) taken out."""
    found = find_conflicts(registry, rows, runner, timeout_s=timeout_s)
    if not found:
        return registry, [], []
    by_later: dict[str, list[Conflict]] = {}
    for c in found:
        by_later.setdefault(c.later, []).append(c)
    merges, dropped = [], []
    for later, conflicts in by_later.items():
        earlier = conflicts[0].earlier
        dropped.append(DroppedFunction(name=later, reason=_contradicts(conflicts)))
        merges.append(Merge(earlier, (earlier, later), f"they decide values two ways ({_shown(conflicts)}): the "
                            "earlier is kept, the later taken out", taken_out=(later,)))
        log.warning("consolidation: %s taken out: %s", later, dropped[-1].reason)
    return registry.without_dropped(dropped), merges, found


def find_conflicts(registry: Registry, rows: pd.DataFrame, runner: CodeRunner, *,
                   timeout_s: float = 60.0) -> list[Conflict]:
    """Where two functions of the module on one column decide one value two ways, the later of each two being
    judged only beside the earlier functions still kept.

    Both run, each on its own, on the rows as the functions before the earlier one leave them, so on the values
    the module hands the earlier one. They conflict on a cell when one undoes the other's change (`x -> y`
    beside `y -> x`), or when both change it into different values and running them in one order or the
    other gives different results. The second case includes "Bostn" made "Boston" beside "Bostn" made
    "Austin". It does not include " bostn" stripped to "bostn" beside " bostn" made "Boston": either order
    gives "Boston", so the two carry one decision, each doing its part.

    Example:
        >>> [c.describe() for c in find_conflicts(registry, rows, sandbox)]   # doctest: +SKIP
        ["city 'Bostn': `fix_city` makes it 'Boston', `spell_city` makes it 'Austin'"]
    """
    from .sandbox import SandboxError

    entries = registry.entries
    if rows.empty or len(entries) < 2:
        return []
    found: list[Conflict] = []
    taken: set[int] = set()
    before: dict[int, pd.DataFrame | None] = {}  # rows as the functions kept before position i leave them
    alone: dict[tuple[int, int], pd.DataFrame] = {}  # what the function at position k makes of those rows

    def rows_before(i: int) -> pd.DataFrame | None:
        if i not in before:
            kept = [e for k, e in enumerate(entries[:i]) if k not in taken]
            try:
                before[i] = _run(registry.with_entries(kept), rows, runner, timeout_s)
            except SandboxError as exc:  # the module up to there fails: validation's to judge, nothing to compare
                log.info("consolidation: the functions before position %d fail on the rows: %s", i, exc)
                before[i] = None
        return before[i]

    def run_alone(k: int, i: int) -> pd.DataFrame:
        if (k, i) not in alone:
            fn = entries[k].function
            alone[(k, i)] = runner.run(fn.code, before[i], entry=fn.name, timeout_s=timeout_s)
        return alone[(k, i)]

    for j, later in enumerate(entries):
        for i, earlier in enumerate(entries[:j]):
            shared = [c for c in earlier.function.columns if c in later.function.columns and c in rows.columns]
            if i in taken or not shared or (handed := rows_before(i)) is None:
                continue
            try:
                pair = _pair_conflicts(earlier.function, later.function, handed, run_alone(i, i), run_alone(j, i),
                                       shared, runner, timeout_s)
            except SandboxError as exc:  # a function failing on these rows is validation's to judge
                log.info("consolidation: %s beside %s not compared: %s", later.function.name,
                         earlier.function.name, exc)
                continue
            if pair:
                found.extend(pair)
                taken.add(j)
                before.clear()  # the rows before later positions no longer pass through it
                alone.clear()
                break
    return found


def _pair_conflicts(earlier: CleaningFunction, later: CleaningFunction, rows: pd.DataFrame, by_earlier: pd.DataFrame,
                    by_later: pd.DataFrame, columns: list[str], runner: CodeRunner, timeout_s: float) -> list[Conflict]:
    """The cells of `columns` the two functions decide two ways (see `find_conflicts`), one per value, from what
    each made of `rows` on its own."""
    def cells(frame: pd.DataFrame) -> np.ndarray | None:
        if len(frame) != len(rows) or any(c not in frame.columns for c in columns):
            return None  # rows dropped on purpose, or a column gone: nothing to compare cell by cell
        return as_text(frame[columns]).to_numpy()

    values, a, b = cells(rows), cells(by_earlier), cells(by_later)
    if values is None or a is None or b is None:
        return []
    a_changes, b_changes = a != values, b != values
    if not (a_changes.any() or b_changes.any()):
        return []
    # what each makes of the other's result (in the module, the later function runs on the earlier's)
    def then(fn: CleaningFunction, frame: pd.DataFrame) -> np.ndarray | None:
        return cells(runner.run(fn.code, frame, entry=fn.name, timeout_s=timeout_s))

    b_after_a = then(later, by_earlier) if a_changes.any() else b
    a_after_b = then(earlier, by_later) if b_changes.any() else a
    if b_after_a is None or a_after_b is None:
        return []
    undone = (a_changes & (b_after_a == values)) | (b_changes & (a_after_b == values))
    apart = a_changes & b_changes & (a != b) & (b_after_a != a_after_b)
    found: dict[tuple[str, object], Conflict] = {}
    for row, col in zip(*np.nonzero(undone | apart)):
        column, v = columns[col], values[row, col]
        found.setdefault((column, v), Conflict(column, v, earlier.name, a[row, col], later.name, b[row, col]))
    return list(found.values())
