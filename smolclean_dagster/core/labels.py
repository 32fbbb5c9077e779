"""Rows a person corrected: picked where a correction teaches the most, read back as ground truth.

`pick_rows` chooses the rows of a drop worth a person's time: together they hold every kind of dirt the
detectors suspect in every column, and each column's rare values, spread across the drop. `write_label_sample`
writes them as read, their row number (`_row`, the first data row being 1) first, in a file a spreadsheet
opens. The person corrects the cells that are wrong and hands the file back; `read_labels` reads it against the
drop: a cell the person changed is a correction, a cell left as it was is confirmed right. Rows of a cleaned
output, corrected the same way, are labels too: each cell holds the value the row should have.

Labels judge every candidate function (`Labels.broken_by`): a cell it changes on a labelled row must end at the
person's value, so a corrected cell it touches ends at the correction and a confirmed cell does not move.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from . import date_layouts
from .detectors import case_variants, dependencies
from .detectors.cells import NULL_TOKENS, NUMBER_WITH_UNIT, digit_layout, in_layout, normalise, unit_key, value_shape
from .drops import drop_format, is_text_drop, read_drop
from .export import render_module
from .errors import LabelError
from .files import write_atomic
from .instructions import split_instructions, with_items
from .profile import detect_issues
from .registry import DroppedFunction, Registry
from .validate import CodeRunner, as_text


#: The column that carries each labelled row's number in its drop (the first data row is 1).
ROW = "_row"
#: Rows a label sample holds unless asked otherwise.
DEFAULT_ROWS = 20
#: A value is rare in its column when at most this many cells hold it, in a column whose values repeat.
RARE_CELLS = 2
#: Rows the detectors look at to find what is suspect (evenly spread over a larger drop).
SUSPECT_ROWS = 20_000
#: How a rejection for broken labels starts (the report finds them by it).
BROKEN_LABELS = "it breaks"
#: How a rule that broke a label and was kept, the values it broke left as written, says so in its verdict.
KEPT_FOR_LABELS = "as learned, so the values it changed there stay as written"
#: Cells of a broken label named in a rejection, at most.
SHOWN_CELLS = 5


@dataclass(frozen=True)
class Cell:
    """One labelled cell: the drop's value (`before`) and the person's (`after`); equal when confirmed."""

    row: int
    column: str
    before: str | None
    after: str | None

    @property
    def corrected(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class Broken:
    """A labelled cell a function moved away from the person's value."""

    cell: Cell
    written: str | None

    def describe(self) -> str:
        what = f"the user corrected {self.cell.before!r} to {self.cell.after!r}" if self.cell.corrected \
            else f"the user confirmed {self.cell.after!r}"
        return f"row {self.cell.row} {self.cell.column!r}: {what}, it writes {self.written!r}"


@dataclass(frozen=True)
class Labels:
    """The labelled rows of one drop: `rows` as read from the drop and `truth` as the person wants them, both
    indexed by row number (`_row`), with the drop's columns."""

    source: str
    rows: pd.DataFrame
    truth: pd.DataFrame
    #: The drop the rows are of (its key), once kept with it.
    drop: str = ""
    #: A text drop's rows (CSV, TSV): an empty field and a null are one value there, as the written output shows.
    text: bool = False

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def cells(self) -> list[Cell]:
        before, after = as_text(self.rows), as_text(self.truth)
        return [Cell(int(r), str(c), before.iat[i, j], after.iat[i, j])
                for i, r in enumerate(self.rows.index) for j, c in enumerate(self.rows.columns)]

    @property
    def corrections(self) -> list[Cell]:
        return [c for c in self.cells if c.corrected]

    def as_records(self) -> list[tuple[int, dict, dict]]:
        """(row number, the row as read, the row as the person wants it), cells as text or None."""
        before, after = as_text(self.rows), as_text(self.truth)
        return [(int(n), dict(zip(before.columns, b)), dict(zip(after.columns, a)))
                for n, b, a in zip(self.rows.index, before.itertuples(index=False), after.itertuples(index=False))]

    def raw_rows(self) -> pd.DataFrame:
        """The labelled rows as the drop holds them, indexed from 0 like any frame a function gets."""
        return self.rows.reset_index(drop=True)

    def made_right_by(self, before: pd.DataFrame, after: pd.DataFrame) -> int:
        """How many labelled cells a function changed (`before` -> `after`, both the labelled rows in order) to the
        person's value."""
        return sum(int((changed & ~wrong).sum()) for _, changed, wrong, _ in self._changes(before, after))

    def broken_by(self, before: pd.DataFrame, after: pd.DataFrame) -> list[Broken]:
        """The labelled cells a function changed (`before` -> `after`, both the labelled rows in order) to a
        value other than the person's."""
        raw, truth = as_text(self.rows).reset_index(drop=True), self._cells(self.truth)
        out = []
        for column, changed, wrong, written in self._changes(before, after):
            j = list(self.truth.columns).index(column)
            for i in np.flatnonzero((changed & wrong).to_numpy()):
                cell = Cell(int(self.rows.index[i]), str(column), raw.iat[i, j], truth.iat[i, j])
                out.append(Broken(cell, written.iat[i]))
        return out

    def _changes(self, before: pd.DataFrame, after: pd.DataFrame):
        """Per labelled column both frames hold: (column, the cells the function changed, the cells it leaves off
        the person's value, the cells as it writes them)."""
        b, a, truth = self._cells(before), self._cells(after), self._cells(self.truth)
        for column in self.truth.columns:
            if column in a.columns and column in b.columns:
                changed = ~((b[column] == a[column]) | (b[column].isna() & a[column].isna()))
                wrong = ~((a[column] == truth[column]) | (a[column].isna() & truth[column].isna()))
                yield column, changed, wrong, a[column]

    def _cells(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame`'s cells as compared with the person's: text or None, and in a text drop None written empty."""
        text = as_text(frame).reset_index(drop=True)
        return text.fillna("") if self.text else text

    def with_conventions(self, instructions: str) -> str:
        """`instructions` with the conventions the corrections show (`conventions`) as items of their own, as the
        rules read them."""
        said = self.conventions()
        return with_items(instructions, [i.text for i in split_instructions(said)]) if said else instructions

    def conventions(self) -> str:
        """What the corrections show the user wants, in the words the rules read (`analysts.drop_findings`), each
        the rule a correction exemplifies rather than the corrected value alone: "N/A" -> "" asks for every
        spelling of "no value" to be written empty, "12.0 oz" -> "12" for every number without its unit. Worked
        out once per set of labels: every step of the loop asks."""
        return self._conventions

    @cached_property
    def _conventions(self) -> str:
        said = []
        for cell in self.corrections:
            before, after = (cell.before or "").strip(), (cell.after or "").strip()
            if before.casefold() in NULL_TOKENS and not after:
                said.append("Write placeholders as empty.")
            elif (number := _UNIT.fullmatch(before)) and _same_number(number[1], after):
                said.append("Write numbers without units.")
            elif _same_number(before, after) and before != after and _PLAIN_NUMBER.fullmatch(after):
                # a float export's "7.0" written "7", a code's "01907" written "1907": that column's numbers
                column = f"'{cell.column}'" if "'" not in cell.column else f'"{cell.column}"'
                if re.fullmatch(r"[-+]?0+\d[\d.]*", before):
                    said.append(f"Write numbers without leading zeros in column {column}.")
                if re.fullmatch(r"[-+]?\d+\.0", before) and "." not in after:
                    said.append(f"Write whole numbers without a decimal point in column {column}.")
            elif not before and after and not is_placeholder(after):
                # an empty cell written "n/a (not measured)" says how a missing value is written, not that one is
                # missing: no fill. Nor is it taught as the column's placeholder for every empty cell: in zeroed
                # rayyan a tenth of the empty cells the clean file writes so are values lost, and 20 rows did not
                # show one (next drop's precision 1.000 -> 0.927). Asked in words, the rules write it.
                said.append("Fill missing values from the other rows.")
            elif normalise(cell.before or "") == cell.after and "  " in (cell.before or "").strip():
                said.append("Collapse double spaces.")
        said += self._date_layouts() + self._units() + self._digit_layouts() + self._cases()
        return " ".join(dict.fromkeys(said))

    def _date_layouts(self) -> list[str]:
        """Per column, the date layout its corrections teach ("4/2/15" -> "2/15/04": dates written Y/M/DD are
        wanted M/D/YY), in the words `asked.asked_layouts` reads."""
        said = []
        for name, taught in self._taught(date_layouts.learn):
            both = ", also those that read both ways" if taught.both_ways else ""
            said.append(f"Write the dates of column {name} written {taught.source} (as in '{taught.example[0]}') "
                        f"in the layout {taught.target} (as in '{taught.example[1]}'){both}.")
        return said

    def _units(self) -> list[str]:
        """Per column, the units its corrections write its numbers with, where they were written with another
        spelling ("12.0 OZ." -> "12.0 oz", "16.0 ounce" -> "16.0 oz": every 'OZ.' and 'ounce' of the column is
        wanted 'oz', and so is any spelling of them in another case or without the full stop), in the words
        `asked.asked_units` reads: an item per unit. Nothing is taught where the corrections spell one unit two
        ways, a confirmed cell keeps a spelling they replace, or a number itself changes."""
        said = []
        for name, (units, drop_rest) in self._taught(units_taught):
            after = ", and drop the words written after it" if drop_rest else ""
            for unit, spellings in units.items():
                written = [f"'{s}'" for s in spellings] or [f"'{unit}'"]
                listed = " or ".join([", ".join(written[:-1]), written[-1]] if len(written) > 1 else written)
                said.append(f"Write the unit of the numbers of column {name} as '{unit}' where it is written "
                            f"{listed}{after}.")
        return said

    def _digit_layouts(self) -> list[str]:
        """Per column, the layout its corrections write its digits in where they keep the digits and only lay them
        out otherwise ("(555) 123-4567" -> "555-123-4567": every phone number of the column whose digits are
        grouped 3-3-4, or run together, is wanted 999-999-9999), in the words `asked.asked_digit_layout` reads."""
        said = []
        for name, (layout, runs, (before, after)) in self._taught(layout_taught):
            also = ", also those written in one run" if runs else ""
            said.append(f"Write the digits of column {name} in the layout '{layout}'{also} (as in '{before}' -> "
                        f"'{after}').")
        return said

    def _cases(self) -> list[str]:
        """Per column, the case its corrections write its values in where they change only the case ("ROCHESTER" ->
        "Rochester": every value of the column is wanted in title case), in the words `asked.asked_case` reads."""
        return [f"Write the values of column {name} in {case} case (as in '{before}' -> '{after}')."
                for name, (case, (before, after)) in self._taught(case_taught)]

    def _taught(self, learn) -> list[tuple[str, object]]:
        """(the column's name quoted, what `learn(corrected, confirmed=...)` finds) for each column with corrections
        where it finds something: `corrected` the (before, after) of its corrected cells, `confirmed` the values of
        its other cells."""
        out = []
        cells = self.cells
        for column in dict.fromkeys(c.column for c in cells if c.corrected):
            mine = [c for c in cells if c.column == column]
            taught = learn([(c.before or "", c.after or "") for c in mine if c.corrected],
                           confirmed=[c.after for c in mine if not c.corrected and c.after])
            if taught is not None:
                out.append((f"'{column}'" if "'" not in column else f'"{column}"', taught))
        return out

    def summary(self) -> str:
        """One line: how many rows, cells corrected and confirmed."""
        fixed = len(self.corrections)
        return (f"{len(self)} labelled rows from {self.source}: {fixed} cells corrected, "
                f"{len(self.rows.columns) * len(self) - fixed} confirmed")


#: A number written plainly: no unit, no thousands separators, no leading zero, no trailing zero decimal.
_PLAIN_NUMBER = re.compile(r"[-+]?(?:0|[1-9]\d*)(?:\.\d*[1-9])?")
_UNIT = re.compile(r"([-+]?\d[\d,]*(?:\.\d+)?)\s*[^\d\s.,][^\d]*")


def units_taught(corrected: list[tuple[str, str]], confirmed: list[str]) -> tuple[dict[str, tuple[str, ...]], bool] | None:
    """The units corrections (before, after) write numbers with where the number stays as written and the unit was
    spelled otherwise (the space between as it was): ({unit: the spellings it replaced}, whether words written
    after such a unit were dropped too); None where they teach none, spell one unit two ways (its letters case-folded,
    without full stops: `unit_key`), or a `confirmed` cell keeps a spelling they replace.

    Example:
        >>> units_taught([("12.0 OZ.", "12.0 oz"), ("16.0 ounce", "16.0 oz"), ("33 ML", "33 ml")], ["12.0 oz"])
        ({'ml': ('ML',), 'oz': ('OZ.', 'ounce')}, False)
        >>> units_taught([("12.0 OZ.", "12.0 oz")], confirmed=["16.0 OZ."]) is None
        True
    """
    wanted: dict[str, str] = {}  # a spelling's key -> the unit it is written as
    spellings: dict[str, set[str]] = {}
    drop_rest = False
    for before, after in corrected:
        b, a = NUMBER_WITH_UNIT.fullmatch(before), NUMBER_WITH_UNIT.fullmatch(after)
        if not b or not a or a[4] or b[1] != a[1] or b[3] == a[3] and not b[4]:
            continue
        for key in (unit_key(b[3]), unit_key(a[3])):
            if wanted.setdefault(key, a[3]) != a[3]:
                return None
        if b[3] != a[3]:
            spellings.setdefault(a[3], set()).add(b[3])
        drop_rest |= bool(b[4])
    for value in confirmed:
        c = NUMBER_WITH_UNIT.fullmatch(value)
        if c and unit_key(c[3]) in wanted and (c[3] != wanted[unit_key(c[3])] or c[4] and drop_rest):
            return None
    units = {unit: tuple(sorted(spellings.get(unit, ()))) for unit in sorted(set(wanted.values()))}
    return (units, drop_rest) if any(units.values()) or drop_rest else None


#: Words a placeholder for a missing value starts with, besides the null tokens ("unknown", "n/a (not measured)").
PLACEHOLDER_WORDS = frozenset({"unknown", "missing", "tbd", "empty", "blank", "not"})


def is_placeholder(text: str) -> bool:
    """Whether `text` stands for a missing value: a null token, or a text whose first word is one or says so.

    Example:
        >>> is_placeholder("N/A"), is_placeholder("nan (wait to be cleaned)"), is_placeholder("Unknown"), is_placeholder("0")
        (True, True, True, False)
    """
    text = text.strip().casefold()
    first = re.split(r"[\s(\[,;:]", text, maxsplit=1)[0]
    return bool(text) and (text in NULL_TOKENS or first in NULL_TOKENS or first in PLACEHOLDER_WORDS)


def layout_taught(corrected: list[tuple[str, str]],
                  confirmed: list[str]) -> tuple[str, bool, tuple[str, str]] | None:
    """The layout (`cells.digit_layout`) corrections (before, after) write a column's digits in where they keep the
    digits, in order, and only lay them out otherwise; whether one of them ran its digits together (then digits
    written so are laid out too); and one such correction. None where they teach none, two layouts, a number
    ("1,234.50" -> "1234.50" is a number's form, not a layout), or a `confirmed` cell whose digits fit the layout
    is written otherwise.

    Example:
        >>> layout_taught([("(555) 123-4567", "555-123-4567"), ("5559876543", "555-987-6543")], ["555-111-2222"])
        ('999-999-9999', True, ('(555) 123-4567', '555-123-4567'))
        >>> layout_taught([("(555) 123-4567", "555-123-4567")], confirmed=["555.111.2222"]) is None
        True
    """
    layouts: dict[str, tuple[str, str]] = {}
    runs = False
    for before, after in corrected:
        layout = digit_layout(after)
        if layout is None or before.strip() == after.strip() or _is_number(after) or len(re.findall(r"9+", layout)) < 2:
            continue
        if in_layout(before, layout, runs=True) == after.strip():
            layouts.setdefault(layout, (before.strip(), after.strip()))
            runs |= in_layout(before, layout) is None  # laid out only as a run
    if len(layouts) != 1:
        return None
    ((layout, example),) = layouts.items()
    if any((fit := in_layout(value, layout, runs)) is not None and fit != value.strip() for value in confirmed):
        return None
    return layout, runs, example


#: Corrections that change only the case, in one case, a column's case is taught from, at least: one is a slip put
#: right as often as a convention.
MIN_CASE_CORRECTIONS = 2


def case_taught(corrected: list[tuple[str, str]], confirmed: list[str]) -> tuple[str, tuple[str, str]] | None:
    """The case ("upper", "lower" or "title", `case_variants.style`) corrections (before, after) write a column's
    values in where they change only the case, at least `MIN_CASE_CORRECTIONS` of them, each as the case rule
    writes it (`case_variants.convert`, asked), with one such correction; None where they teach none, write two
    cases, or a `confirmed` cell would be written otherwise (a confirmed "USA" keeps title case taught: the rule
    keeps abbreviations; a confirmed "GOLDFIELD" does not).

    Example:
        >>> case_taught([("ROCHESTER", "Rochester"), ("st. louis", "St. Louis")], ["Boston", "USA"])
        ('title', ('ROCHESTER', 'Rochester'))
        >>> case_taught([("ROCHESTER", "Rochester"), ("st. louis", "St. Louis")], ["GOLDFIELD"]) is None
        True
    """
    cases: dict[str, tuple[str, str]] = {}
    taught = 0
    for before, after in corrected:
        b, a = before.strip(), after.strip()
        case = case_variants.style(a)
        if b == a or b.casefold() != a.casefold() or case not in case_variants.STYLES:
            continue  # not a change of case alone; or a value's own spelling ("McDonald"), no case of the column
        cases.setdefault(case, (b, a))
        taught += case_variants.convert(b, case, asked=True) == a
    if len(cases) != 1 or taught < MIN_CASE_CORRECTIONS:
        return None
    ((case, example),) = cases.items()
    if any(case_variants.convert(v.strip(), case, asked=True) != v.strip() for v in confirmed):
        return None
    return case, example


def _is_number(text: str) -> bool:
    try:
        float(text.strip().replace(",", ""))
    except ValueError:
        return False
    return True


def _same_number(a: str, b: str) -> bool:
    try:
        return float(a.replace(",", "")) == float(b.replace(",", ""))
    except ValueError:
        return False


def describe_broken(broken: list[Broken]) -> str:
    """The first few broken labels, for a rejection or the report."""
    shown = "; ".join(b.describe() for b in broken[:SHOWN_CELLS])
    more = f" (and {len(broken) - SHOWN_CELLS} more)" if len(broken) > SHOWN_CELLS else ""
    return f"{BROKEN_LABELS} {len(broken)} labelled cell(s): {shown}{more}"


def pick_rows(drop: pd.DataFrame, n: int = DEFAULT_ROWS) -> list[int]:
    """Positions (0-based) of at most `n` rows of `drop` whose correction teaches the most, in drop order.

    Each row is worth the suspicions it holds that no row picked before holds: per column, a kind of dirt the
    detectors find (a value among a finding's examples), a value off the column's usual shape, a spelling of "no
    value", stray spaces, a rare value. The row holding most new suspicions is taken first; ties go to the row
    farthest from those already taken, and once every suspicion is held, evenly spread rows fill the sample.

    Example:
        >>> df = pd.DataFrame({"city": ["Boston"] * 30 + ["Bostn"], "state": ["MA"] * 30 + ["MA"]})
        >>> 30 in pick_rows(df, 3)
        True
    """
    n = max(0, min(n, len(drop)))
    if not n:
        return []
    suspects, weight = _suspicions(drop)
    position = np.arange(len(drop))
    chosen: list[int] = []
    held: set[tuple[str, str]] = set()
    while len(chosen) < n:
        gain = np.array([_worth(s - held, weight) for s in suspects])
        gain[chosen] = -1
        if gain.max() <= 0:
            break
        best = np.flatnonzero(gain == gain.max())
        pick = int(best[np.argmax(_distance(best, chosen, position))])
        chosen.append(pick)
        held |= suspects[pick]
    for pick in np.linspace(0, len(drop) - 1, n).round().astype(int):  # spread the rest over the drop
        if len(chosen) >= n:
            break
        while pick in chosen:
            pick = (pick + 1) % len(drop)
        chosen.append(int(pick))
    return sorted(chosen)


def _worth(suspicions: set[tuple[str, str]], weight: dict[tuple[str, str], float]) -> float:
    """What a row's new suspicions are worth together, summed exactly: a plain sum of fractions depends on the
    order a set gives them, which Python varies from process to process, and a tie between rows would go to
    another row in each (`smolclean label` picked other rows of the same drop from run to run).

    Example:
        >>> _worth({("c", f"rare {i}") for i in range(10)}, {("c", f"rare {i}"): 0.1 for i in range(10)})
        1.0
    """
    return math.fsum(weight[f] for f in suspicions)


def _distance(candidates: np.ndarray, chosen: list[int], position: np.ndarray) -> np.ndarray:
    if not chosen:
        return -candidates.astype(float)  # the earliest first, so the choice is stable
    return np.abs(position[candidates][:, None] - np.array(chosen)[None, :]).min(axis=1).astype(float)


def _suspicions(drop: pd.DataFrame) -> tuple[list[set[tuple[str, str]]], dict[tuple[str, str], float]]:
    """Per row, the (column, suspicion) pairs it holds, and what each is worth: a kind of dirt in a column 1, each
    of a column's rare values its share of them (a column's rare values together are worth one kind). Where each
    row is one source's report on an entity (a flight as a website reports it), an entity no row picked holds is
    worth a kind of dirt in every column the sources report: the person's values for it show which sources
    report each column right (`dependencies.learn`), and a second row of it shows little more."""
    out: list[set[tuple[str, str]]] = [set() for _ in range(len(drop))]
    weight: dict[tuple[str, str], float] = {}
    sample = drop if len(drop) <= SUSPECT_ROWS else drop.iloc[np.linspace(0, len(drop) - 1, SUSPECT_ROWS).astype(int)]
    examples: dict[str, dict[str, str]] = {}
    for finding in detect_issues(sample):
        for value in finding.examples:
            examples.setdefault(finding.column, {})[str(value)] = finding.kind
    for column in drop.columns:
        text = drop[column].where(drop[column].apply(isinstance, args=(str,)))
        codes, values = pd.factorize(text)
        counts = np.bincount(codes[codes >= 0], minlength=len(values))
        shapes = [value_shape(v) for v in values]
        per_shape: dict[str, int] = {}
        for shape, cells in zip(shapes, counts):
            per_shape[shape] = per_shape.get(shape, 0) + int(cells)
        usual = max(per_shape, key=per_shape.get) if per_shape else None
        repeats = len(values) <= 0.5 * max(1, int(counts.sum()))
        rare = int((counts <= RARE_CELLS).sum()) if repeats else 0
        kinds_of: dict[int, list[str]] = {}
        for code, (value, shape, cells) in enumerate(zip(values, shapes, counts)):
            kinds = []
            if value in examples.get(column, {}):
                kinds.append(examples[column][value])
            if value.strip().casefold() in NULL_TOKENS:
                kinds.append("null")
            elif normalise(value) != value:
                kinds.append("spaces")
            if shape != usual:
                kinds.append(f"shape {shape}")
            weight.update({(column, kind): 1.0 for kind in kinds})
            if repeats and cells <= RARE_CELLS:
                kinds.append(f"rare {value!r}")
                weight[(column, kinds[-1])] = 1.0 / rare
            if kinds:
                kinds_of[code] = kinds
        if kinds_of:
            for i in np.flatnonzero(np.isin(codes, list(kinds_of))):
                out[i].update((column, kind) for kind in kinds_of[codes[i]])
    for entity, source in dependencies.reporting_sources(drop).items():
        reported = len(drop.columns) - 2  # the columns the sources report (all but the entity and the source)
        for i, key in enumerate(dependencies.cell_keys(drop[entity]).tolist()):
            if isinstance(key, str):
                out[i].add((entity, f"entity {key!r}"))
                weight[(entity, f"entity {key!r}")] = float(reported)
    return out, weight


def sample_format(drop_path: Path | str) -> str:
    """The format a label sample of a drop is written in: JSONL for JSON drops, CSV (or TSV) otherwise."""
    fmt = drop_format(drop_path)
    return {"json": "jsonl", "jsonl": "jsonl", "tsv": "tsv"}.get(fmt, "csv")


def write_label_sample(drop_path: Path | str, out: Path | str, *, rows: int = DEFAULT_ROWS,
                       drop: pd.DataFrame | None = None) -> tuple[Path, list[int]]:
    """Write the rows `pick_rows` picks from the drop to `out`, as read, `_row` first; returns the path and the
    row numbers (1-based).

    Example:
        >>> write_label_sample("exports/customers.csv", "to_label.csv")   # doctest: +SKIP
        (PosixPath('to_label.csv'), [3, 17, 40, ...])
    """
    out = Path(out)
    frame = read_drop(drop_path) if drop is None else drop
    picked = pick_rows(frame, rows)
    sample = frame.iloc[picked].copy()
    sample.insert(0, ROW, [p + 1 for p in picked])
    fmt = sample_format(drop_path)
    expected = {"jsonl": (".jsonl", ".ndjson"), "tsv": (".tsv", ".tab"), "csv": (".csv",)}[fmt]
    if out.suffix.lower() not in expected:
        raise LabelError(f"{out}: a label sample of {drop_path} is written as {fmt.upper()}; "
                         f"name it with {' or '.join(expected)}")
    if fmt == "jsonl":
        text = "".join(json.dumps(_json_ready(r), ensure_ascii=False) + "\n" for r in sample.to_dict("records"))
    else:
        text = sample.to_csv(index=False, sep="\t" if fmt == "tsv" else ",", quoting=csv.QUOTE_MINIMAL)
    write_atomic(out, text)
    return out, [p + 1 for p in picked]


def _json_ready(record: dict) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else None if v is None or v is pd.NA else v)
            for k, v in record.items()}


def read_labels(path: Path | str, drop_path: Path | str, *, drop: pd.DataFrame | None = None) -> Labels:
    """The labelled rows of `path` (a label sample or rows of a cleaned output, `_row` first) against the drop
    they belong to. Raises LabelError naming the row and column when the file is not the drop's: another
    format, a header other than the drop's, an unknown or repeated `_row`.

    Example:
        >>> labels = read_labels("corrected.csv", "exports/customers.csv")   # doctest: +SKIP
        >>> labels.summary()                                                  # doctest: +SKIP
        '20 labelled rows from corrected.csv: 7 cells corrected, 173 confirmed'
    """
    path = Path(path)
    if not path.is_file():
        raise LabelError(f"{path}: no such label file")
    wanted = sample_format(drop_path)
    try:
        got = drop_format(path)
    except Exception:
        got = path.suffix or "no extension"
    if {"json": "jsonl"}.get(got, got) != wanted:
        raise LabelError(f"{path}: labels of {drop_path} are read from a {wanted.upper()} file (as `smolclean label` "
                         f"writes them), not from {got!r}")
    try:
        labelled = read_drop(path)
    except Exception as exc:  # the reader's own message names the line
        raise LabelError(f"{path}: cannot be read as labels: {exc}") from None
    frame = read_drop(drop_path) if drop is None else drop
    columns = [c for c in labelled.columns if c != ROW]
    if ROW not in labelled.columns:
        raise LabelError(f"{path}: no {ROW!r} column; each labelled row needs its row number in {drop_path} "
                         f"(`smolclean label` writes it first)")
    missing = [c for c in frame.columns if c not in columns]
    extra = [c for c in columns if c not in frame.columns]
    if missing or extra:
        what = "; ".join(x for x in (f"missing {missing}" if missing else "",
                                     f"not in the drop {extra}" if extra else "") if x)
        raise LabelError(f"{path}: its header is not the header of {drop_path} ({what})")
    numbers = []
    for i, value in enumerate(labelled[ROW]):
        line = f"{path}, labelled row {i + 1}, column {ROW!r}"
        try:
            number = int(str(value).strip())
        except ValueError:
            raise LabelError(f"{line}: {value!r} is no row number") from None
        if not 1 <= number <= len(frame):
            raise LabelError(f"{line}: {drop_path} has no row {number} (its rows are 1-{len(frame)})")
        if number in numbers:
            raise LabelError(f"{line}: row {number} is labelled twice; keep one")
        numbers.append(number)
    rows = frame.iloc[[n - 1 for n in numbers]].copy()
    rows.index = pd.Index(numbers, name=ROW)
    truth = labelled[list(frame.columns)].copy()
    truth.index = rows.index
    return Labels(source=path.name, rows=rows, truth=truth, text=is_text_drop(drop_path))


def keep_what_labels_allow(registry: Registry, labels: list[Labels], runner: CodeRunner, *,
                           timeout_s: float = 60.0) -> tuple[Registry, tuple[DroppedFunction, ...]]:
    """The registry without the functions that break a label, and those functions with the labels they break.

    Every candidate is held to the labels when it is proposed; this holds the whole module to them when it is
    published: functions learned before the labels were given, and merged ones. Each function runs in module
    order on the labelled rows as the functions kept before it leave them.

    Example:
        >>> kept, dropped = keep_what_labels_allow(registry, every_label(store), sandbox)   # doctest: +SKIP
        >>> [d.name for d in dropped]                                                       # doctest: +SKIP
        ['strip_whitespace_city']
    """
    if not labels or not registry.entries:
        return registry, ()
    dropped: list[DroppedFunction] = []
    for label in labels:
        rows = label.raw_rows()
        gone = {d.name for d in dropped}
        kept = tuple(e for e in registry.entries if e.function.name not in gone)
        module = render_module(registry.model_copy(update={"entries": kept}), with_main=False)
        whole = runner.run(module, rows, entry="clean", module=True, timeout_s=timeout_s)
        if len(whole) == len(rows) and not label.broken_by(rows, whole):
            continue
        for entry in kept:
            fn = entry.function
            after = runner.run(fn.code, rows, entry=fn.name, timeout_s=timeout_s)
            broken = label.broken_by(rows, after) if len(after) == len(rows) else []
            if broken:
                dropped.append(DroppedFunction(name=fn.name, reason=f"on the labelled rows of {label.drop or label.source}, "
                                                                    f"{describe_broken(broken)}"))
            else:
                rows = after
    if not dropped:
        return registry, ()
    return registry.without_dropped(dropped), tuple(dropped)


__all__ = ["ROW", "Broken", "Cell", "Labels", "describe_broken", "keep_what_labels_allow", "pick_rows", "read_labels",
           "write_label_sample"]
