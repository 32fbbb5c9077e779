"""Harm estimated without labels: how many of the cells a function changes held a value that looks valid.

Nobody tells us which cells are wrong, but a drop says a lot about which values are right: a value many rows
hold is presumed valid, and so is a value written in the form most of its column uses. A function that
mostly rewrites such values ("CEO" -> "ceo" in a column of job titles, every "2012/01/01" -> "2012-01-01", a
city holding forty rows swapped for another) is doing harm, whatever its code says it fixes. Validation
measures this on held-out rows and sends such a function back with the numbers (a rule's is dropped).

Which changes count as hitting a valid value (`looks_valid`):
- another value of the same form, when the old value is common in its column (at least `COMMON_CELLS` rows,
  and at least 1/`RARER` of the new value's rows): a typo is rare, a value forty rows hold is not;
- another value the column also holds on many rows, in another form that is not the column's dominant one
  ("12.0 oz" on 621 rows -> "12.0 oz." on 924, where neither form is most of the column's);
- the same value in another case, when the old spelling is common and the case rule learned over the same rows
  would not write it so (`case_variants.fix`): "CEO" on forty rows -> "ceo" on five, "ENG" on 23 rows -> "eng" on
  464 where the column mixes cases, but not "ca" on 9 rows -> "CA" on 301 among upper-case codes (a slip);
- any value written in the column's dominant form (the shape `DOMINANT_SHAPE` of its cells share), moved
  out of it ("2012/01/01" -> "2012-01-01" where every date reads "2012/01/01").
A value the drop holds on `KEEP_CELLS` rows or more is presumed valid on its own: a function rewriting one is
harmful whatever else it fixes ("ENG" on 23 rows, rewritten beside "English" -> "eng" on 95). So is a function
whose changes in a column write, more than one time in five, values that the other rows of their entity
contradict (`entities`: the entity is firmer evidence than a value's look), or mostly strip the unit off
numbers that were rounded when written with it ("0.05%" where the column's bare numbers read "0.045": "0.05"
is not the value either), or, in a column of free text, mostly only change the spacing (sentences keep their
writer's spacing, as the rules keep it, unless the user asks for whitespace to be normalised) or mostly cut
words out and write nothing in their place ("T. CN  - PubMed DA  - Aug Roszkowski" -> "T. Roszkowski": what the
writer put in a sentence or a list is theirs, and nothing in the drop tells a field the source always writes
from debris; the user may ask for it, or show it with corrected rows).
A spelling of "no value" ("N/A", "") never counts: making it a null is a representation, not a loss. The
user's words win: a form the instructions may ask for does not count when there are instructions, and a
function serving an instruction item is not judged here at all.

Example:
    >>> import pandas as pd
    >>> counts = ValueCounts.of(pd.DataFrame({"title": ["ceo"] * 5 + ["CEO"] * 40 + ["director"] * 60}))
    >>> before = pd.DataFrame({"title": ["CEO", "CEO", "CEO", "directr", "director"]})
    >>> after = pd.DataFrame({"title": ["ceo", "ceo", "ceo", "director", "director"]})
    >>> h = estimate(before, after, counts)
    >>> h.changed, h.valid_hits, h.harmful
    (4, 3, True)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .detectors.boolean_spellings import SPELLINGS
from .detectors import case_variants, number_format
from .detectors.case_variants import KEEP_CELLS
from .detectors.cells import DOMINANT_SHAPE, WORD, ColumnValues, is_null_token, normalise, shape
from .detectors.whitespace import is_free_text
from .entities import contradicted
from .validate import as_text, changed_cells

#: A value held by this many rows of its column is common ...
COMMON_CELLS = 3
#: ... unless the value it becomes is held by this many times more rows (a frequent typo stays a typo).
RARER = 5
#: A function is harmful when more than this share of the cells it changes held valid-looking values ...
HARM_SHARE = 0.5
#: ... and at least this many: one or two are not evidence.
MIN_HARM_CELLS = 3
#: The other rows of an entity are firmer evidence than a value's look: a function is harmful in a column when
#: more than this share of its changes there write a value they contradict (and `MIN_HARM_CELLS` or more).
CONTRADICTED_SHARE = 0.2
#: A column with at most this many values among the changed rows may tell where the contradicted changes gather.
WHERE_VALUES = 50
#: Before -> after pairs kept to show the reader.
MAX_PAIRS = 10

@dataclass(frozen=True)
class ValueCounts:
    """Rows per value and per shape of each column of a drop: what "common" and "dominant" are judged by."""

    values: dict[str, Counter] = field(default_factory=dict)
    shapes: dict[str, Counter] = field(default_factory=dict)
    _rounded: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)
    _case_rules: dict[str, tuple] = field(default_factory=dict, compare=False, repr=False)
    _free_text: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, frame: pd.DataFrame | None) -> ValueCounts:
        if frame is None or frame.empty:
            return cls()
        text = as_text(frame)
        values, shapes = {}, {}
        for column in text.columns:
            # each distinct cell judged once, in the order the column first holds it (so ties keep that order)
            codes, distinct = pd.factorize(text[column])
            rows = np.bincount(codes[codes >= 0], minlength=len(distinct))
            counted, shaped = Counter(), Counter()
            for raw, n in zip(distinct, rows.tolist()):
                if not is_null_token(raw):
                    counted[raw.strip()] += n
            for value, n in counted.items():
                shaped[shape(value)] += n
            values[str(column)], shapes[str(column)] = counted, shaped
        return cls(values, shapes)

    def rounded(self, column: str) -> bool:
        """Whether the column's numbers written with a unit carry fewer decimals than its bare ones: rounded."""
        if column not in self._rounded:
            numbers = number_format.parse_numbers(dict(self.values.get(column, {})))
            self._rounded[column] = number_format.rounded(numbers)
        return self._rounded[column]

    def free_text(self, column: str) -> bool:
        """Whether the column holds free text (sentences), which keeps its writer's spacing (`whitespace.is_free_text`)."""
        if column not in self._free_text:
            self._free_text[column] = is_free_text(ColumnValues(name=column, counts=dict(self.values.get(column, {}))))
        return self._free_text[column]

    def case_fix(self, column: str, value: str) -> str:
        """What the case rule learned over these rows makes of `value` in `column` (`case_variants.fix`)."""
        if column not in self._case_rules:
            counts = ColumnValues(name=column, counts=dict(self.values.get(column, {})))
            self._case_rules[column] = case_variants.case_rule(counts)
        return case_variants.fix(value, *self._case_rules[column])

    def dominant(self, column: str) -> str | None:
        """The shape most of the column's cells share, if one does."""
        shapes = self.shapes.get(column)
        if not shapes:
            return None
        form, n = shapes.most_common(1)[0]
        return form if n >= DOMINANT_SHAPE * sum(shapes.values()) else None

    def looks_valid(self, column: str, old: str, new: str | None, *, forms: bool = True) -> bool:
        """Whether changing `old` to `new` in `column` rewrites a value that looks valid (module docstring);
        without `forms`, a value moved out of the column's usual form does not count (the user asked for a form)."""
        if is_null_token(old):
            return False
        counts = self.values.get(column, Counter())
        old_key, new_key = old.strip(), (new or "").strip()
        if old_key == new_key or _same_boolean(old_key, new_key):  # the same value, written another way
            return False
        if old_key.casefold() == new_key.casefold():
            # another case: harm when it rewrites a common spelling the case rule would not write so (one the
            # file writes on purpose, "ENG" on 23 rows where the column mixes cases), not a slip it fixes itself
            if counts[old_key] >= COMMON_CELLS and self.case_fix(column, old_key) != new_key:
                return True
        elif counts[old_key] >= COMMON_CELLS and counts[old_key] * RARER >= counts[new_key]:
            if shape(old_key) == shape(new_key):
                return True
            # two spellings the column holds on many rows each ("12.0 oz" 621, "12.0 oz." 924): neither is evidently
            # the wrong one, unless the new one is written in the form most of the column uses
            if counts[new_key] >= COMMON_CELLS and shape(new_key) != self.dominant(column):
                return True
        form = self.dominant(column) if forms else None
        return form is not None and shape(old_key) == form and shape(new_key) != form


def _same_boolean(old: str, new: str) -> bool:
    """True when both spell the same yes/no value ("yes" and "true")."""
    a, b = SPELLINGS.get(old.casefold()), SPELLINGS.get(new.casefold())
    return a is not None and b is not None and a[1] == b[1]


@dataclass(frozen=True)
class Contradicted:
    """A column where many of a function's changes write a value the other rows of the entity contradict."""

    column: str
    key: str
    cells: int
    changed: int
    example: tuple[str, str, str]  # (before, after, the value the entity's other rows hold)
    where: str = ""  # where they gather ("54 of them in rows where src is 'mytripandmore' ...")


@dataclass(frozen=True)
class Harm:
    """What one function did to the rows it was tried on."""

    changed: int = 0
    valid_hits: int = 0
    pairs: tuple[tuple[str, str, str], ...] = ()  # (column, before, after) of valid-looking values rewritten
    settled: tuple[tuple[str, str, int], ...] = ()  # (column, value, rows of the drop) rewritten, held on many rows
    contradicted: tuple[Contradicted, ...] = ()
    rounded: tuple[tuple[str, int, int, str, str], ...] = ()  # (column, cells, changed, before, after)
    respaced: tuple[tuple[str, int, int, str, str], ...] = ()  # (column, cells, changed, before, after)
    cut: tuple[tuple[str, int, int, str, str], ...] = ()  # (column, cells, changed, before, after)

    @property
    def mostly_valid(self) -> bool:
        """Most of the cells it changed held values that look valid (and enough of them to be evidence)."""
        return self.valid_hits >= MIN_HARM_CELLS and self.valid_hits > HARM_SHARE * self.changed

    @property
    def harmful(self) -> bool:
        return (self.mostly_valid or bool(self.settled) or bool(self.contradicted) or bool(self.rounded)
                or bool(self.respaced) or bool(self.cut))

    def describe(self) -> str:
        parts = []
        if self.mostly_valid:
            shown = ", ".join(f"{c}: {b!r} -> {a!r}" for c, b, a in self.pairs[:3])
            parts.append(f"{self.valid_hits} of the {self.changed} cells it changed held a value that looks valid "
                         f"(common in its column, or in the column's usual form), e.g. {shown}")
        if self.settled:
            shown = ", ".join(f"{c}: {v!r} ({n} rows)" for c, v, n in self.settled[:3])
            parts.append(f"it rewrites values the drop holds on many rows, which are presumed right: {shown}")
        for column, n, changed, before, after in self.rounded[:3]:
            parts.append(f"in {column}, {n} of its {changed} changes strip the unit off a number written with fewer "
                         f"decimals than the column's bare numbers, e.g. {before!r} -> {after!r}: it was rounded, "
                         "so the number left is not the value either")
        for column, n, changed, before, after in self.respaced[:3]:
            parts.append(f"in {column}, {n} of its {changed} changes only change the spacing of free text, e.g. "
                         f"{before!r} -> {after!r}: sentences keep their writer's spacing (a run of spaces, a line "
                         "break, a space at either end) unless the user asks for whitespace to be normalised")
        for column, n, changed, before, after in self.cut[:3]:
            parts.append(f"in {column}, {n} of its {changed} changes cut words out of free text and write nothing in "
                         f"their place, e.g. {before!r} -> {after!r}: what the writer put in a sentence or a list "
                         "stays unless the user asks for it to go")
        for c in self.contradicted[:3]:
            before, after, theirs = c.example
            parts.append(f"in {c.column}, {c.cells} of its {c.changed} changes write a value the other rows of the "
                         f"same {c.key} contradict, e.g. {before!r} -> {after!r} where they hold {theirs!r}"
                         + (f" ({c.where})" if c.where else ""))
        return "; ".join(parts)

    def with_contradictions(self, found: tuple[Contradicted, ...]) -> Harm:
        return replace(self, contradicted=self.contradicted + found)

    def with_text(self, other: Harm) -> Harm:
        """This harm with what `other` (the same function, over more rows) found in free text, where not found here."""
        seen = {c[0] for c in self.respaced + self.cut}
        return replace(self, respaced=self.respaced + tuple(c for c in other.respaced if c[0] not in seen),
                       cut=self.cut + tuple(c for c in other.cut if c[0] not in seen))


def estimate(before: pd.DataFrame, after: pd.DataFrame, counts: ValueCounts, *, forms: bool = True,
             spacing: bool = True) -> Harm:
    """The harm of the change from `before` to `after` (same rows, same order), judged by `counts`; `forms`
    False when the user's instructions may ask for another form (dates, numbers, case): only values count;
    `spacing` False when they ask for whitespace to be normalised: free text's spacing is then theirs to change."""
    if len(before) != len(after) or before.empty:
        return Harm()
    diff = changed_cells(before, after)
    b, a = as_text(before).reset_index(drop=True), as_text(after).reset_index(drop=True)
    changed = hits = 0
    pairs: list[tuple[str, str, str]] = []
    settled: list[tuple[str, str, int]] = []
    rounded, respaced, cut = [], [], []
    for column in diff.columns:
        name, rows = str(column), diff.index[diff[column]]
        changed += len(rows)
        olds, news = b.loc[rows, column], a.loc[rows, column]
        _free_text_harm(name, olds, news, counts, spacing, respaced, cut)
        if len(rows) >= MIN_HARM_CELLS and counts.rounded(name):
            stripped = [(old, new) for old, new in zip(olds, news) if _unit_stripped(old, new)]
            if len(stripped) >= MIN_HARM_CELLS and len(stripped) > HARM_SHARE * len(rows):
                rounded.append((name, len(stripped), len(rows), *stripped[0]))
        held, common = counts.values.get(name, Counter()), set()
        for old, new in zip(olds, news):
            if isinstance(old, str) and counts.looks_valid(name, old, new, forms=forms):
                hits += 1
                if len(pairs) < MAX_PAIRS:
                    pairs.append((name, old, "" if new is None else new))
                if held[old.strip()] >= KEEP_CELLS:
                    common.add(old.strip())
        if common:
            # the value itself is rewritten wherever it stands, not a row's value its row's context says is wrong
            kept = set(b[column].str.strip()[~diff[column].to_numpy()].dropna())
            settled += [(name, v, held[v]) for v in sorted(common - kept)]
    return Harm(changed, hits, tuple(pairs), tuple(settled), (), tuple(rounded), tuple(respaced), tuple(cut))


def text_harm(before: pd.DataFrame, after: pd.DataFrame, counts: ValueCounts, *, spacing: bool = True) -> Harm:
    """Only what `estimate` finds in free text: changes of spacing alone, words cut out. The gate judges these
    over the whole drop as well, since a kind of text the held-out rows hold a few of is still the writer's."""
    if len(before) != len(after) or before.empty:
        return Harm()
    diff = changed_cells(before, after)
    b, a = as_text(before).reset_index(drop=True), as_text(after).reset_index(drop=True)
    respaced, cut = [], []
    for column in diff.columns:
        rows = diff.index[diff[column]]
        _free_text_harm(str(column), b.loc[rows, column], a.loc[rows, column], counts, spacing, respaced, cut)
    return Harm(changed=int(diff.to_numpy().sum()), respaced=tuple(respaced), cut=tuple(cut))


def _free_text_harm(name: str, olds: pd.Series, news: pd.Series, counts: ValueCounts, spacing: bool,
                    respaced: list, cut: list) -> None:
    """Add to `respaced` and `cut` what one column's changes (`olds` -> `news`) do to free text, where most of
    them (and `MIN_HARM_CELLS` or more) only respace it or cut words out of it."""
    if len(olds) < MIN_HARM_CELLS or not counts.free_text(name):
        return
    spaced, shortened = _rewritten_text(olds, news, spacing=spacing)
    for found, kind in ((spaced, respaced), (shortened, cut)):
        if len(found) >= MIN_HARM_CELLS and len(found) > HARM_SHARE * len(olds):
            kind.append((name, len(found), len(olds), *found[0]))


def _rewritten_text(olds: pd.Series, news: pd.Series, *, spacing: bool) -> tuple[list, list]:
    """The (before, after) changes of free text that only change its spacing (when `spacing` is judged), and
    those that cut words out and write no word in their place (`cuts_words`)."""
    spaced, shortened = [], []
    for old, new in zip(olds, news):
        if not (isinstance(old, str) and isinstance(new, str)):
            continue
        if normalise(old) == normalise(new):
            if spacing:
                spaced.append((old, new))
        elif cuts_words(old, new):
            shortened.append((old, new))
    return spaced, shortened


def cuts_words(old: str, new: str) -> bool:
    """Whether `new` holds fewer of `old`'s words (`WORD`) and no word `old` does not: words were cut out
    and nothing was written in their place. A null written for the value is no cut (see `is_null_token`).

    Example:
        >>> cuts_words("T. CN  - PubMed DA  - Aug Roszkowski", "T. Roszkowski"), cuts_words("Jhon Smith", "John Smith")
        (True, False)
        >>> cuts_words("St\u00e9\u00e9ber F", "Steber F"), cuts_words("N/A", "")
        (False, False)
    """
    if not new.strip() or is_null_token(new) or is_null_token(old):
        return False
    had, has = Counter(WORD.findall(old)), Counter(WORD.findall(new))
    return bool(had - has) and not (has - had)


def _unit_stripped(old: str | None, new: str | None) -> bool:
    """Whether `old` is a number written with a unit or currency and `new` that number without it."""
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    was = number_format.parse_numbers({old.strip(): 1})
    now = number_format.parse_numbers({new.strip(): 1})
    return bool(was and now and (was[0].prefix or was[0].suffix) and not (now[0].prefix or now[0].suffix))


def contradictions(before: pd.DataFrame, after: pd.DataFrame, keys: dict[str, str]) -> tuple[Contradicted, ...]:
    """The columns where more than `CONTRADICTED_SHARE` of the change from `before` to `after` (and at least
    `MIN_HARM_CELLS` cells) writes values the other rows of their entity contradict; `keys` names each column's
    entity column (`entity_keys`)."""
    if len(before) != len(after) or before.empty:
        return ()
    b, a = as_text(before).reset_index(drop=True), as_text(after).reset_index(drop=True)
    diff = changed_cells(b, a)
    out = []
    for column in diff.columns:
        key, changed = keys.get(str(column)), int(diff[column].sum())
        if key is None or key not in a.columns or changed < MIN_HARM_CELLS:
            continue
        hit = contradicted(b, a, str(column), key)
        n = int(hit.sum())
        if n >= MIN_HARM_CELLS and n > CONTRADICTED_SHARE * changed:
            i = hit.index[hit][0]
            group = a[column][(a[key] == a.at[i, key]) & (a.index != i)].dropna().astype(str).str.strip()
            group = group[(group != "") & ~group.map(is_null_token).astype(bool)]  # what contradicts is a value
            theirs = group.value_counts().index[0] if len(group) else ""
            example = (str(b.at[i, column]), str(a.at[i, column]), str(theirs))
            where = _gathered(b[diff[column]].drop(columns=[column, key]), hit[diff[column]])
            out.append(Contradicted(str(column), key, n, changed, example, where))
    return tuple(out)


def _gathered(rows: pd.DataFrame, hit: pd.Series) -> str:
    """Where the contradicted changes (`hit`, over the changed `rows`) gather: the value of another column (a
    source, a kind) that holds the most of them with at most one good change in five, so a function can be
    narrowed to leave those rows. Empty when none does."""
    best = None
    for column in rows.columns:
        values = rows[column]
        if not 1 < values.nunique() <= WHERE_VALUES:
            continue
        for value, bad in values[hit].value_counts().items():
            good = int((values[~hit] == value).sum())
            if bad >= MIN_HARM_CELLS and bad >= 4 * good and (best is None or bad > best[0]):
                best = (int(bad), good, str(column), value)
    if best is None:
        return ""
    bad, good, column, value = best
    rest, elsewhere = int(hit.sum()) - bad, len(hit) - bad - good
    return (f"{bad} of them are in rows where {column} is {value!r}, of its {bad + good} changes there; "
            f"elsewhere {rest} of {elsewhere}")
