"""Whole-drop evidence for the model: what every row of the drop says, in a few hundred tokens.

A model shown a few chunks and the most frequent values misses the dirt that lives in the rare tail: a city
misspelled on one row of 3,000, a value from another column's domain, a zip code pointing to the wrong city.
This module reads every row (the cost grows with a column's distinct values, not its rows) and writes down,
with support counts:
- rare values (one or two rows) beside the frequent value they resemble: one or two edits away, the same
  letters reordered, the string reversed, or equal once stray characters are removed;
- values off the column's dominant form (its shape: digits as 9, letters as A/a) when most cells share one;
- dependencies that hold on at least 95% of the rows (an entity key naming one value), with the rows that
  break them.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"city": ["Chicago"] * 40 + ["Chicgo"], "zip": ["60601"] * 41})
    >>> print(drop_evidence(df).render(2000))
    Rare values (rows in brackets) beside the frequent value they resemble:
    - city: "Chicago" [40] <- "Chicgo" [1] 1 edit
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from .detectors import dependencies
from .detectors.cells import is_null_token, without_stray
from .detectors.cells import shape

#: A value on at most this many rows is rare; one on at least FREQUENT_ROWS rows (and RATIO times the rare
#: one's) is frequent enough to be what was meant.
RARE_ROWS, FREQUENT_ROWS, RATIO = 2, 5, 5
#: Bound the work on wide vocabularies: rare values looked at and frequent values compared per column.
MAX_RARE, MAX_FREQUENT = 3000, 500
#: A shape is the column's dominant form when this share of its cells have it.
DOMINANT_SHARE = 0.8
#: A dependency is shown when it holds on this share of the rows with both cells filled.
DEPENDENCY_SHARE = 0.95
#: Lines per section at most, before the budget cuts further.
MAX_LINES = 40
#: Keys on this many rows each (on average) are categories: their dependencies are shown here, never repaired.
CATEGORY_ROWS = 20


@dataclass(frozen=True)
class Resemblance:
    """A rare value and the frequent value it resembles."""

    column: str
    value: str
    rows: int
    like: str
    like_rows: int
    how: str


@dataclass(frozen=True)
class OffForm:
    """A value not written in its column's dominant form."""

    column: str
    value: str
    rows: int
    form: str
    share: float


@dataclass(frozen=True)
class Break:
    """Rows where `dependent` is not the value the `determinant`'s other rows agree on."""

    determinant: str
    dependent: str
    agreement: float
    rows: tuple[tuple[str, str, str, int], ...]  # (key, value held, value the key's rows agree on, rows)


@dataclass(frozen=True)
class DropEvidence:
    """Everything computed over the drop, ready to render within a budget."""

    rows: int = 0
    resemblances: tuple[Resemblance, ...] = ()
    off_form: tuple[OffForm, ...] = ()
    breaks: tuple[Break, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.resemblances or self.off_form or self.breaks)

    def render(self, budget: int) -> str:
        """The evidence as lines of text, at most `budget` characters: each section gets its share (rare
        values half, forms and dependencies a quarter each), and what one leaves unused goes to the next."""
        groups: dict[tuple[str, str], list[Resemblance]] = {}
        for r in self.resemblances:
            groups.setdefault((r.column, r.like), []).append(r)
        rare = [f"- {column}: {_q(like)} [{found[0].like_rows}] <- "
                + ", ".join(f"{_q(r.value)} [{r.rows}] {r.how}" for r in found)
                for (column, like), found in groups.items()]
        forms: dict[str, list[OffForm]] = {}
        for o in self.off_form:
            forms.setdefault(o.column, []).append(o)
        off = [f"- {column} (`{found[0].form}` on {found[0].share:.0%} of its cells): "
               + ", ".join(f"{_q(o.value)} [{o.rows}]" for o in found[:12]) + (" ..." if len(found) > 12 else "")
               for column, found in forms.items()]
        breaks = [f"- {b.determinant} -> {b.dependent} holds on {b.agreement:.1%}: "
                  + "; ".join(f"{_q(k)} has {_q(v)} [{n}] where its other rows have {_q(e)}" for k, v, e, n in b.rows)
                  for b in self.breaks]
        sections = [
            ("Rare values (rows in brackets) beside the frequent value they resemble:", rare, 0.5),
            ("Values off their column's usual form (shape: 9 digits, A capitals, a small letters):", off, 0.25),
            ("Dependencies that hold on most rows, and the rows that break them:", breaks, 0.25),
        ]
        out: list[str] = []
        spare = 0
        for title, lines, share in sections:
            room = int(budget * share) + spare
            if not lines or len(title) + 1 > room:
                spare = room
                continue
            out.append(title)
            room -= len(title) + 1
            shown = 0
            for line in lines[:MAX_LINES]:
                if len(line) + 1 > room:
                    break
                out.append(line)
                room -= len(line) + 1
                shown += 1
            more = f"  ({len(lines) - shown} more not shown)"
            if shown < len(lines) and len(more) + 1 <= room:
                out.append(more)
                room -= len(more) + 1
            spare = room
        return "\n".join(out)


def drop_evidence(frame: pd.DataFrame) -> DropEvidence:
    """What every row of `frame` says about its dirt (see the module docstring)."""
    resemblances: list[Resemblance] = []
    off_form: list[OffForm] = []
    for column in frame.columns:
        counts = _text_counts(frame[column])
        if not counts:
            continue
        resemblances += _resemblances(str(column), counts)
        off_form += _off_form(str(column), counts)
    resemblances.sort(key=lambda r: (-r.like_rows, r.column, r.like, r.rows, r.value))
    off_form.sort(key=lambda o: (o.rows, o.column, o.value))
    return DropEvidence(len(frame), tuple(resemblances), tuple(off_form), tuple(_breaks(frame)))


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text_counts(series: pd.Series) -> Counter:
    """How often each text value (stripped) stands in `series`, null tokens aside; values of other types (numbers a
    function wrote, lists) are no text."""
    text = series[series.apply(isinstance, args=(str,))].astype(object).str.strip()
    counts = text.value_counts()
    return Counter({v: int(n) for v, n in counts.items() if not is_null_token(v)})


def _resemblances(column: str, counts: Counter) -> list[Resemblance]:
    frequent = [(v, n) for v, n in counts.most_common(MAX_FREQUENT) if n >= FREQUENT_ROWS]
    if not frequent:
        return []
    by_value = dict(frequent)
    letters = {c for v, _ in frequent for c in v.casefold()}
    anagrams: dict[str, str] = {}
    for v, _ in frequent:
        anagrams.setdefault("".join(sorted(v.casefold())), v)
    choices = [v.casefold() for v, _ in frequent]
    rare = sorted((v for v, n in counts.items() if n <= RARE_ROWS), key=lambda v: (counts[v], v))[:MAX_RARE]
    out = []
    for value in rare:
        n = counts[value]
        like, how = _resembles(value, by_value, letters, anagrams, choices, frequent)
        if like is not None and by_value[like] >= RATIO * n:
            out.append(Resemblance(column, value, n, like, by_value[like], how))
    return out


def _resembles(value, by_value, letters, anagrams, choices, frequent) -> tuple[str | None, str]:
    if len(value) >= 4 and value[::-1] in by_value and value[::-1] != value:
        return value[::-1], "reversed"
    stripped = without_stray(value, letters)
    if stripped != value and stripped in by_value:
        return stripped, "stray characters removed"
    if len(value) >= 4:
        twin = anagrams.get("".join(sorted(value.casefold())))
        if twin is not None and twin.casefold() != value.casefold():
            return twin, "same letters reordered"
    allowed = max(1, len(value) // 6)
    if len(value) >= 4:
        match = process.extractOne(value.casefold(), choices, scorer=Levenshtein.distance, score_cutoff=allowed)
        if match is not None and match[1] > 0:
            return frequent[match[2]][0], f"{match[1]} edit{'s' if match[1] > 1 else ''}"
        if match is not None and frequent[match[2]][0] != value:
            return frequent[match[2]][0], "another case"
    return None, ""


def _off_form(column: str, counts: Counter) -> list[OffForm]:
    shapes: Counter = Counter()
    for v, n in counts.items():
        shapes[shape(v)] += n
    total = sum(shapes.values())
    form, n = shapes.most_common(1)[0]
    if total < 20 or n < DOMINANT_SHARE * total:
        return []
    share = n / total
    return [OffForm(column, v, c, form, share) for v, c in counts.items() if shape(v) != form]


def _breaks(frame: pd.DataFrame) -> list[Break]:
    learned = dependencies.learn(frame)
    tables = [(d.determinant, d.dependent, d.mapping, d.agreement) for d in learned.dependencies
              if d.source is None and d.agreement >= DEPENDENCY_SHARE]
    # Keys on many rows each (a zip code on 300 rows) are categories to the repairs, which never act on them; the
    # model judges from the evidence, so their breaks are shown too.
    tables += _held_by_categories(frame, {(t[0], t[1]) for t in tables})
    out = []
    for determinant, dependent, mapping, agreement in tables:
        keys = dependencies.cell_keys(frame[determinant])
        held = dependencies.cell_keys(frame[dependent])
        expected = keys.map(mapping)
        broken = expected.notna() & held.notna() & (expected != held)
        if not broken.any():
            continue
        triples = Counter(zip(keys[broken], held[broken], expected[broken]))
        rows = tuple((k, v, e, n) for (k, v, e), n in sorted(triples.items(), key=lambda t: (-t[1], t[0]))[:10])
        out.append(Break(determinant, dependent, agreement, rows))
    return out


def _held_by_categories(frame: pd.DataFrame, known: set[tuple[str, str]]) -> list[tuple[str, str, dict, float]]:
    """(determinant, dependent, {key: the value its rows agree on}, agreement) for the columns whose keys each
    cover `CATEGORY_ROWS` rows or more on average, where the dependent holds its key's value on at least
    `DEPENDENCY_SHARE` of the rows with both filled but not on all: zip 60601 is Chicago on 300 rows, Denver on 2."""
    keys = {str(c): dependencies.cell_keys(frame[c]) for c in frame.columns}
    codes = {c: pd.factorize(k) for c, k in keys.items()}
    out = []
    for a, (ca, va) in codes.items():
        filled = int((ca >= 0).sum())
        if len(va) < 2 or filled < CATEGORY_ROWS * max(2, len(va)):
            continue
        for b, (cb, vb) in codes.items():
            both = (ca >= 0) & (cb >= 0)
            if a == b or (a, b) in known or len(vb) < 2 or not both.any():
                continue
            pairs = pd.Series(ca[both] * len(vb) + cb[both]).value_counts()
            best = pairs.groupby(pairs.index // len(vb), sort=False).head(1)  # each key's most common value
            agreement = float(best.sum()) / int(both.sum())
            if DEPENDENCY_SHARE <= agreement < 1.0 and len(best) >= 2 and len(set(best.index % len(vb))) >= 2:
                mapping = {str(va[i // len(vb)]): str(vb[i % len(vb)]) for i in best.index}
                out.append((a, b, mapping, round(agreement, 4)))
    return sorted(out, key=lambda t: -t[3])[:MAX_LINES]
