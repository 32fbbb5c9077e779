"""Detector: cells that break a dependency between columns which the rest of the drop keeps.

A column B depends on a column A when rows sharing an A value (a provider number, a zip code, a flight)
nearly always share their B value (the hospital's name, the city, the scheduled departure). The rows
that break such a dependency hold a typo, a swapped value or a gap, and the value the other rows of the
same key agree on is the repair. Dependencies are learned over a whole drop (the rows of one chunk rarely
repeat a key) and embedded in the repairing function as mapping tables, so a row's repair depends only
on that row and the tables.

Three kinds of evidence, each required to hold for a large majority of the drop:
- key -> value: B's majority value per A value, for keys with enough rows and a clear majority;
- multi-source entities: when every row is one source's report on one entity (each (entity, source)
  pair at most once, e.g. flight x website), the entity's values are voted on by the sources, sources
  that copy each other (identical on nearly every shared cell) counted once; a weaker majority is
  enough, since sources disagree by nature, and the entity and source columns are never repaired;
- non-default implies value: when A is set to anything but its usual value (an exemption amount other
  than 0), B nearly always has one value ("Y").

Repairs act only on strong evidence: a cell holding a value the column uses as some key's usual value (a
valid value on its own: "Premium", "IL") is overwritten only when many rows support the change (its key
has `STRONG_SUPPORT` rows, or sources voted); empty cells are filled only when the user asked for it.
Tables are bounded (`MAX_TABLE_ENTRIES` over all of them, the best-supported keys kept), so the function
that embeds them stays reviewable and under the code gate's size limit on any drop.

Unlike the per-column detectors this one reads whole frames: `learn(frame)` finds the dependencies,
`detect(rows, learned)` reports the cells of `rows` that break them, and `repair(rows, learned)` is the
reference implementation of the rule template `repair_dependencies.py.j2` (tests hold them equal).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from rapidfuzz.distance import OSA

from ..findings import Finding
from .cells import DOMINANT_SHAPE, NULL_TOKENS, WORD, shape, top_examples

KIND = "dependency_violations"

#: Rows with both columns filled needed before a pair is looked at.
MIN_ROWS = 20
#: Rows a key needs before its majority value counts as evidence.
MIN_SUPPORT = 3
#: A determinant repeats: at most this many distinct values per filled cell.
MAX_KEY_SHARE = 0.5
#: A dependency holds when this share of the rows with evidence agree with their key's majority ...
MIN_AGREEMENT = 0.9
#: ... the keys with a clear majority (this share of their rows, this many times the runner-up, and this many
#: rows behind the majority value: the value replaced is the rare one) ...
KEY_SHARE, KEY_RATIO, KEY_ROWS = 0.75, 3.0, 3
#: ... cover this share of those rows ...
MIN_COVER = 0.5
#: ... and it explains B better than B's most common value alone (violations at most this share).
MAX_VIOLATION_RATIO = 0.75
#: Multi-source entities: each (entity, source) pair at most once (this share of duplicates), several
#: sources per entity, and the weaker majority sources give.
MAX_PAIR_DUPLICATES = 0.01
MIN_SOURCES_PER_ENTITY = 3
#: A source reports on many entities (rows per source), and there are fewer sources than entities.
MIN_REPORTS_PER_SOURCE = 10
#: Do no harm: a voted value needs a clear majority of the independent sources (sources disagree by nature,
#: and a weak plurality is often a group of copies the copy test missed).
SOURCE_AGREEMENT, SOURCE_KEY_SHARE, SOURCE_COVER = 0.6, 0.6, 0.1
#: Two sources are copies when they agree on this share of (at least 10) shared cells.
COPY_SIMILARITY = 0.99
#: Non-default implies value: rows with A off its usual value, and the share of them B must agree on.
CONDITION_ROWS = 50
CONDITION_AGREEMENT = 0.98
#: A dependent with more distinct values than this is not a category an exemption could imply.
CONDITION_MAX_VALUES = 10
#: Bound the work on very wide frames: determinants tried per dependent.
MAX_DETERMINANTS = 4
#: Pairs of sources compared for copies at most (n_keys * n_sources**2 cells of work).
MAX_COPY_WORK = 50_000_000
#: A key the module finds in a drop it cleans (no learning checked it) needs more: this many rows, and its value
#: this many times the runner-up's rows (the repairing function reads the drop's own counts).
DROP_KEY_ROWS, DROP_KEY_RATIO = 5, 4.0
#: Rows a key needs before its value may overwrite a value that is valid on its own.
STRONG_SUPPORT = 50
#: A key whose runner-up value this many rows hold, and other keys have as their usual value, has two real
#: values, not a majority and typos ("Portland" is in Oregon on 40 rows and in Maine, the usual state of
#: "Bangor", on 6): it repairs nothing. Sources that vote disagree by nature.
TWO_VALUES_ROWS = 3
#: A determinant identifies an entity (an ID, an address, a zip code) when it has this many distinct values and
#: at most this many rows per value on average; a category (a state, a county, a city) does not, and a value
#: beside it is not repaired from it ("Springfield" names cities in many states).
MIN_ENTITY_KEYS, MAX_ROWS_PER_KEY = 2, 20
#: A measurement is no key: a column whose values are mostly numbers with a fraction ("39.1" mm, "4.5" %) or dates
#: and times ("05.11.2008", "7:10 a.m.") takes the same value on rows of unrelated entities by coincidence (two
#: penguins of one flipper length, two reports of one day), so the value identifies nothing.
MEASUREMENT_SHARE = 0.5
#: A name several entities share is no key: a key value whose rows fall into two groups of at least this many
#: rows that differ in at least `SHARED_COLUMNS` of the columns it determines ("ST MARYS HOSPITAL" in Rochester
#: with its own street and zip, and in Decatur with others) is two entities, and may have any value of a column
#: its groups differ in.
SHARED_GROUP_ROWS, SHARED_COLUMNS = 2, 2
#: A value far from the one its key names (not a slip of it) is replaced only when another column of the row backs
#: the key; a slip is a typing error or two: one edit per `SLIP_CHARS_PER_EDIT` characters (at least one), between
#: values of `MIN_SLIP_LENGTH` characters or more.
SLIP_CHARS_PER_EDIT, MIN_SLIP_LENGTH = 5, 4
#: A number is an attribute of a row's own item as often as of its entity (a brewery cans most of its beers in
#: 12 oz, and some in 16.9 oz): in a dependent column whose distinct values are mostly numbers (this share),
#: only a slip of the key's value is repaired ("3563x" -> "35631"), never a number far from it.
NUMBERS = 0.9
#: Keys kept over all the tables of one drop, best-supported first (about 30 characters of code each).
MAX_TABLE_ENTRIES = 2500
#: Keys of the witness tables one repairing function embeds, best-supported first: a row's key is doubted only
#: where a witness knows it, so fewer keys make the check lenient, never wrong.
MAX_WITNESS_ENTRIES = 400


@dataclass(frozen=True)
class Dependency:
    """B's value per A value; `source` names the column whose sources voted (copies counted once);
    `strong` the keys with enough rows to overwrite a value that is valid on its own."""

    determinant: str
    dependent: str
    mapping: dict[str, str]
    agreement: float
    source: str | None = None
    strong: tuple[str, ...] = ()
    support: dict[str, float] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Condition:
    """When `determinant` holds anything but `usual`, `dependent` is `value`."""

    determinant: str
    dependent: str
    usual: str
    value: str
    agreement: float


@dataclass(frozen=True)
class Dependencies:
    """Everything learned over one frame, per dependent column in column order."""

    dependencies: tuple[Dependency, ...] = ()
    conditions: tuple[Condition, ...] = ()
    protected: tuple[str, ...] = field(default=())
    #: Dependencies every row keeps (nothing to repair) on a determinant that repairs another column: they
    #: only testify whether a row's key is right (a zip code whose county and state the row contradicts).
    witnesses: tuple[Dependency, ...] = ()
    #: Dependents written as numbers: only a slip of the key's value is repaired there (see `NUMBERS`).
    numeric: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.dependencies or self.conditions)

    @property
    def dependents(self) -> list[str]:
        seen = [d.dependent for d in self.dependencies] + [c.dependent for c in self.conditions]
        return list(dict.fromkeys(seen))

    def for_columns(self, columns: list[str]) -> Dependencies:
        """Only what repairs `columns`."""
        keep = set(columns)
        kept = tuple(d for d in self.dependencies if d.dependent in keep)
        determinants = {d.determinant for d in kept}
        witnesses = [d for d in (*self.dependencies, *self.witnesses)
                     if d.dependent not in keep and d.determinant in determinants and d.source is None]
        return Dependencies(kept, tuple(c for c in self.conditions if c.dependent in keep), self.protected,
                            tuple(_bounded(witnesses, MAX_WITNESS_ENTRIES)), tuple(c for c in self.numeric if c in keep))


def cell_keys(series: pd.Series) -> pd.Series:
    """Each cell as a lookup key: stripped text with runs of spaces collapsed; empty cells, null tokens
    and non-text cells are missing (NaN)."""
    try:
        codes, distinct = pd.factorize(series)  # each distinct value is made a key once
    except TypeError:  # lists or dicts of a JSON drop: no key, and no value to group
        codes, distinct = pd.factorize(series.where(series.apply(isinstance, args=(str,))))
    text = pd.Series(distinct, dtype=object)
    text = text.where(text.apply(isinstance, args=(str,))).astype(object)
    key = text.str.strip().str.replace(r"[^\S\r\n]{2,}", " ", regex=True)
    key = key.where(~key.str.casefold().isin(NULL_TOKENS | {""}))
    return pd.Series(np.append(key.to_numpy(dtype=object), np.nan)[codes], index=series.index, dtype=object)


def learn(frame: pd.DataFrame, truth: pd.DataFrame | None = None) -> Dependencies:
    """The dependencies that hold over `frame` (the rows of a drop the analyst may see).

    `truth`: rows a person labelled, as they want them (the drop's columns). Where sources vote on an entity's
    values, each labelled entity shows which sources report it right: a source's vote then counts by how often
    it was right there (see `_reliability`), so a group of sources that are often wrong together no longer
    outvotes the few that are right.

    Example:
        >>> df = pd.DataFrame({"zip": ["35233"] * 12 + ["99501"] * 12,
        ...                    "city": ["birmingham"] * 11 + ["birminghxm"] + ["anchorage"] * 12})
        >>> [(d.determinant, d.dependent, d.mapping) for d in learn(df).dependencies]
        [('zip', 'city', {'35233': 'birmingham', '99501': 'anchorage'})]
    """
    columns, codes, values, plain, entities = _structure(frame)
    found: list[Dependency] = []
    protected = sorted({c for pair in entities.items() for c in pair})
    weights = {a: _source_weights(a, source, columns, codes, values) for a, source in entities.items()}
    reliable = {a: _reliability(a, source, columns, codes, values, truth, weights[a])
                for a, source in entities.items()} if truth is not None and len(truth) else {}
    for b in columns:
        if b in protected:
            continue
        voted = []
        for a, source in entities.items():
            odds, margin = reliable.get(a, {}).get(b, (1.0, None))
            dep = _dependency(a, b, codes, values, weights=weights[a] * odds, source=source, margin=margin)
            if dep is not None:
                voted.append(dep)
        ranked = sorted(voted or plain.get(b, []), key=lambda d: (-d.agreement, d.determinant))
        found.extend(ranked[:MAX_DETERMINANTS])
    # A dependent every row already agrees with has nothing to repair: its table only testifies to its key.
    broken = {d.dependent for d in found if d.agreement < 1.0}
    repairing = [d for d in found if d.dependent in broken]
    keys = {d.determinant for d in repairing if d.source is None}
    witnesses = [d for d in found if d.dependent not in broken and d.determinant in keys and d.source is None]
    conditions = [c for b in columns if b not in protected for c in _conditions(b, columns, codes, values)]
    order = {c: i for i, c in enumerate(columns)}
    repairing.sort(key=lambda d: order[d.dependent])
    witnesses.sort(key=lambda d: (order[d.dependent], d.determinant))
    numeric = tuple(b for b in dict.fromkeys(d.dependent for d in repairing) if _numbers(values[b]))
    return Dependencies(tuple(_bounded(repairing)), tuple(conditions), tuple(protected),
                        tuple(_bounded(witnesses, MAX_TABLE_ENTRIES // 2)), numeric)


def reporting_sources(frame: pd.DataFrame) -> dict[str, str]:
    """Entity column -> source column, where every row of `frame` is one source's report on one entity (a flight as
    a website reports it): the entities whose values the sources vote on (`learn`).

    Example:
        >>> df = pd.DataFrame({"flight": [f"F{i // 4}" for i in range(40)], "src": list("abcd") * 10,
        ...                    "dep": [f"{8 + i // 4}:0{i % 3}" for i in range(40)]})
        >>> reporting_sources(df)
        {'flight': 'src'}
    """
    return _structure(frame)[4]


def _structure(frame: pd.DataFrame):
    """The columns of `frame` (text, duplicates dropped), each column's codes and distinct values (`cell_keys`),
    the plain dependencies on its entity columns, and its reporting entities (entity column -> source column)."""
    frame = frame.loc[:, ~frame.columns.duplicated()]
    columns = [str(c) for c in frame.columns]
    codes, values = {}, {}
    for name, c in zip(columns, frame.columns):
        codes[name], values[name] = pd.factorize(cell_keys(frame[c]))
    determinants = [c for c in columns if _repeats(codes[c], len(values[c]))]
    entities = [c for c in determinants if _identifies(codes[c], len(values[c])) and not measures(values[c])]
    plain: dict[str, list[Dependency]] = {}
    for b in columns:
        for a in entities:
            if a != b and (dep := _dependency(a, b, codes, values)) is not None:
                plain.setdefault(b, []).append(dep)
    shared = _shared_keys(plain, codes)
    plain = {b: kept for b, deps in plain.items() if (kept := [d for d in deps if (d.determinant, b) not in shared])}
    reporting = _entities([c for c in determinants if c not in {a for a, _ in shared}], codes, values, plain)
    return columns, codes, values, plain, reporting


def _bounded(found: list[Dependency], limit: int = MAX_TABLE_ENTRIES) -> list[Dependency]:
    """The dependencies with at most `limit` keys over all their tables: the keys with most rows are kept,
    so the tables stay reviewable and the function embedding them under the code gate's size limit."""
    if sum(len(d.mapping) for d in found) <= limit:
        return found
    ranked = sorted(((-d.support.get(k, 0.0), i, k) for i, d in enumerate(found) for k in d.mapping))
    keep: dict[int, set[str]] = {}
    for _, i, k in ranked[:limit]:
        keep.setdefault(i, set()).add(k)
    out = []
    for i, d in enumerate(found):
        if i in keep:
            mapping = {k: v for k, v in d.mapping.items() if k in keep[i]}
            strong = tuple(k for k in d.strong if k in keep[i])
            out.append(Dependency(d.determinant, d.dependent, mapping, d.agreement, d.source, strong, d.support))
    return out


def _repeats(code: np.ndarray, distinct: int) -> bool:
    filled = int((code >= 0).sum())
    return filled >= MIN_ROWS and 2 <= distinct <= MAX_KEY_SHARE * filled


def _identifies(code: np.ndarray, distinct: int) -> bool:
    return distinct >= MIN_ENTITY_KEYS and int((code >= 0).sum()) <= MAX_ROWS_PER_KEY * distinct


_NUMBER_WITH_FRACTION = re.compile(r"[-+]?\d*[.,]\d+")
_DATE_OR_TIME = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}|\d{1,2}:\d{2}")


def measures(values) -> bool:
    """Whether a column's distinct values are mostly measurements (numbers with a fraction) or dates and times."""
    text = [str(v) for v in values]
    hits = sum(1 for v in text if _NUMBER_WITH_FRACTION.fullmatch(v) or _DATE_OR_TIME.search(v))
    return bool(text) and hits >= MEASUREMENT_SHARE * len(text)


def _numbers(values) -> bool:
    """Whether a column's distinct values are mostly numbers (`NUMBERS`)."""
    text = [str(v).replace(",", "") for v in values]
    hits = sum(1 for v in text if _NUMBER.fullmatch(v))
    return bool(text) and hits >= NUMBERS * len(text)


_NUMBER = re.compile(r"[-+]?\d*\.?\d+")


def _shared_keys(plain: dict[str, list[Dependency]], codes) -> set[tuple[str, str]]:
    """(determinant, dependent) pairs where a value of the determinant is shared by several entities: its rows fall
    into two groups of `SHARED_GROUP_ROWS` rows or more that differ in the dependent and in `SHARED_COLUMNS` - 1
    more of the columns it determines. A typo changes one cell of one row; a second facility of the same name
    brings whole rows of its own (its street, city and zip), while two facilities sharing a zip code still share
    its city: the zip stays a key for the city, not for the street."""
    determined: dict[str, list[str]] = {}
    for b, deps in plain.items():
        for d in deps:
            determined.setdefault(d.determinant, []).append(b)
    shared = set()
    for a, dependents in determined.items():
        if len(dependents) < SHARED_COLUMNS:
            continue
        rows = pd.DataFrame({b: codes[b] for b in dependents})
        rows = rows[(codes[a] >= 0) & (rows >= 0).all(axis=1)]
        groups = rows.groupby([codes[a][rows.index], *[rows[b] for b in dependents]]).size()
        groups = groups[groups >= SHARED_GROUP_ROWS]
        for _, per_key in groups.groupby(level=0):
            if len(per_key) < 2:
                continue
            combos = np.array([key[1:] for key in per_key.index])
            differs = combos[:, None, :] != combos[None, :, :]  # group x group x dependent
            apart = differs & (differs.sum(axis=2) >= SHARED_COLUMNS)[:, :, None]
            shared.update((a, b) for b, hit in zip(dependents, apart.any(axis=(0, 1))) if hit)
    return shared


def _key_stats(ca: np.ndarray, cb: np.ndarray, nb: int, weights: np.ndarray | None):
    """Per key of A (rows with both filled): key code, rows, weighted support, top and runner-up weight,
    top and runner-up value code (-1 where there is no runner-up)."""
    both = (ca >= 0) & (cb >= 0)
    pair = ca[both].astype(np.int64) * nb + cb[both]
    uniq, inverse = np.unique(pair, return_inverse=True)
    rows = np.bincount(inverse)
    weight = rows.astype(float) if weights is None else np.bincount(inverse, weights=weights[both])
    key, value = uniq // nb, uniq % nb
    order = np.lexsort((-weight, key))
    key, value, weight, rows = key[order], value[order], weight[order], rows[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    top = weight[starts]
    second = np.zeros_like(top)
    has_second = np.diff(np.r_[starts, len(key)]) > 1
    second[has_second] = weight[starts[has_second] + 1]
    second_value = np.full_like(top, -1, dtype=np.int64)
    second_value[has_second] = value[starts[has_second] + 1]
    return (key[starts], np.add.reduceat(rows, starts), np.add.reduceat(weight, starts), top, second, value[starts],
            second_value)


def _dependency(a, b, codes, values, *, weights=None, source=None, margin=None) -> Dependency | None:
    ca, cb = codes[a], codes[b]
    nb = len(values[b])
    if nb < 2 or int(((ca >= 0) & (cb >= 0)).sum()) < MIN_ROWS:
        return None
    keys, rows, support, top, second, top_value, second_value = _key_stats(ca, cb, nb, weights)
    evidence = rows >= MIN_SUPPORT
    if not evidence.any():
        return None
    if margin is not None:  # sources weighed by what the labels show of them (`_reliability`), clear votes only
        return _led(a, b, codes, values, (keys, rows, top, second, top_value), evidence, margin, source, weights)
    share, ratio, cover, agreement, top_rows = (
        (SOURCE_KEY_SHARE, 1.0, SOURCE_COVER, SOURCE_AGREEMENT, 0) if source
        else (KEY_SHARE, KEY_RATIO, MIN_COVER, MIN_AGREEMENT, KEY_ROWS)
    )
    clear = evidence & (top >= share * support) & (top >= ratio * second) & (top > second) & (top >= top_rows)
    if source is None:  # a runner-up many rows hold, and other keys' usual value, is a second real value
        clear &= ~((second >= TWO_VALUES_ROWS) & np.isin(second_value, top_value[clear]))
    agree = top[evidence].sum() / support[evidence].sum()
    if support[clear].sum() < cover * support[evidence].sum() or agree < agreement:
        return None
    filled = cb[(ca >= 0) & (cb >= 0)]
    constant_share = 1 - np.bincount(filled).max() / len(filled)  # rows off B's most common value
    if 1 - agree > MAX_VIOLATION_RATIO * constant_share:
        return None
    # A key whose usual value is out of the column's own form while its runner-up is in it ("8:41aDec 1" from two
    # sources, "8:41 a.m." from five that copy each other, where the column reads "8:41 a.m.") repairs nothing: a
    # dependency says what a value is, not how it is written. (A city of two words where most are one is no form.)
    in_form = _in_form(values[b], cb)
    clear &= in_form[top_value] | ~((second_value >= 0) & in_form[np.maximum(second_value, 0)])
    return _table(a, b, values, keys[clear], top_value[clear], rows[clear], support[clear], agree, source)


def _led(a, b, codes, values, stats, evidence, margin, source, weights) -> Dependency | None:
    """The dependency of B on A voted by sources weighed as `_evidence` weighs their reports (`weights`, per row): a
    key takes the value whose score leads the runner-up's by `margin` and that `MIN_BACKERS` sources of some weight
    report (a value out of the column's form never); its agreement is the share of those keys' rows that hold their
    key's value."""
    keys, rows, top, second, top_value = stats
    ca, cb = codes[a], codes[b]
    voted = np.full(len(values[a]), -1, dtype=np.int64)
    voted[keys] = top_value
    backing = (ca >= 0) & (cb >= 0) & (weights > 0)  # reports of sources that count, of their key's voted value
    backing[backing] = cb[backing] == voted[ca[backing]]
    backers = np.bincount(ca[backing], minlength=len(values[a]))[keys]
    clear = evidence & (top - second >= margin) & _in_form(values[b], cb)[top_value] & (backers >= MIN_BACKERS)
    if not clear.any():
        return None
    wanted = np.full(len(values[a]), -1, dtype=np.int64)
    wanted[keys[clear]] = top_value[clear]
    held = (ca >= 0) & (cb >= 0)
    held[held] = wanted[ca[held]] >= 0
    agree = float((cb[held] == wanted[ca[held]]).mean())
    return _table(a, b, values, keys[clear], top_value[clear], rows[clear], rows[clear], agree, source)


def _table(a, b, values, keys, taken, rows, support, agree, source) -> Dependency:
    """The dependency of B on A whose `keys` take the values `taken` (codes), with their `rows` and `support`."""
    mapping = {str(values[a][k]): str(values[b][v]) for k, v in zip(keys, taken)}
    strong = tuple(sorted(str(values[a][k]) for k in keys[rows >= STRONG_SUPPORT]))
    weight = {str(values[a][k]): float(w) for k, w in zip(keys, support)}
    return Dependency(a, b, dict(sorted(mapping.items())), round(float(agree), 4), source, strong, weight)


def _in_form(values, codes: np.ndarray) -> np.ndarray:
    """Per value of a column: whether it is written in the column's dominant form (every value is, when no form
    is dominant)."""
    shapes = pd.Series([shape(str(v)) for v in values])
    rows = np.bincount(codes[codes >= 0], minlength=len(values))
    per_shape = pd.Series(rows).groupby(shapes).sum()
    if per_shape.empty or per_shape.max() < DOMINANT_SHAPE * rows.sum():
        return np.ones(len(values), dtype=bool)
    return (shapes == per_shape.idxmax()).to_numpy()


def _entities(determinants, codes, values, plain) -> dict[str, str]:
    """Entity column -> source column, for frames of one row per (entity, source) report.

    A source column takes part in no plain dependency (sources are not attributes of anything); of the
    columns that pair with a source uniquely, the entity is the one with the fewest values (a flight
    rather than the flight's departure times)."""
    involved = {d.determinant for deps in plain.values() for d in deps} | set(plain)
    candidates: dict[str, list[str]] = {}
    for s in determinants:
        ns = len(values[s])
        if s in involved or ns < MIN_SOURCES_PER_ENTITY:
            continue
        for a in determinants:
            na = len(values[a])
            both = (codes[a] >= 0) & (codes[s] >= 0)
            n = int(both.sum())
            if a == s or not n:
                continue
            distinct = len(np.unique(codes[a][both].astype(np.int64) * ns + codes[s][both]))
            many = n / na >= MIN_SOURCES_PER_ENTITY and n / ns >= MIN_REPORTS_PER_SOURCE and ns < na
            if many and 1 - distinct / n <= MAX_PAIR_DUPLICATES:
                candidates.setdefault(s, []).append(a)
    out: dict[str, str] = {}
    for s, entities in candidates.items():
        a = min(entities, key=lambda c: (len(values[c]), c))
        if a not in out and a not in candidates:
            out[a] = s
    return out


#: A source's weight in a column is the odds of its right reports there on the labelled entities, with this many
#: right and wrong reports assumed besides: a source the labels never meet counts 1, and a few labelled
#: entities move it less than many.
RELIABILITY_PRIOR = 2.0
#: Do no harm: the weights are used in a column only when they settle this share of the labelled entities right,
#: each weighed without its own label (and at least `MIN_RELIABLE_ENTITIES` of them).
RELIABLE_SHARE, MIN_RELIABLE_ENTITIES = 0.95, 3
#: Where they settle too few, the sources may still settle the entities whose vote is clear. Each report then
#: counts by the log of its source's odds, a source no more often right than wrong by nothing (a group of such
#: sources, often wrong together, is sometimes right together), and an entity's value is repaired only where its
#: score leads the runner-up's by one of these margins (1 to 3 in quarter steps): the lowest at which
#: `RELIABLE_SHARE` of the labelled entities that clear, and at least `MIN_CLEAR_ENTITIES`, are voted right.
#: (`benchmarks/clear_margins.py`: on made-up reports by sites and by mirrors often wrong together, 20 labelled
#: entities, 120 drops: quarter steps settle 1-5% more entities than steps of 1, and none more wrong.)
CLEAR_MARGINS, MIN_CLEAR_ENTITIES = tuple(1.0 + step / 4 for step in range(9)), 5
#: One source's word is no clear vote: the value voted must be reported by this many sources that count. Where the
#: others count for nothing, a good site's lone slip led by its whole weight, and was written into every report of
#: the entity. (`benchmarks/clear_margins.py`: 8,675 entities settled right and 19 wrong, against 8,431 and 45
#: when one source could settle an entity.)
MIN_BACKERS = 2


def _reliability(entity, source, columns, codes, values, truth: pd.DataFrame,
                 base: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, float | None]]:
    """Per column: per row, the odds that the row's source reports that column of a labelled entity as the person
    has it, from (right + 2) / (compared + 4) over the labelled entities' rows, with None; or, per row, what its
    report counts for in a clear vote (`_evidence`), with the margin a repaired entity's value must lead by
    (`_clear_margin`). A column apart from the others: a site right on scheduled times may be wrong on actual
    ones. The odds are used where, learned without an entity's own label, they vote that entity's value right on
    `RELIABLE_SHARE` of the labelled entities; the clear votes where they do so on the entities those settle. A
    column neither settles is left out: its sources vote as they would without labels. `base` is the rows'
    weight besides (copies counted once).

    Example:
        >>> frame = pd.DataFrame({"flight": [f"F{i // 3}" for i in range(12)], "src": ["a", "b", "c"] * 4,
        ...                       "dep": ["8:00", "9:00", "9:00"] * 4})
        >>> codes, values = {}, {}
        >>> for c in frame.columns:
        ...     codes[c], values[c] = pd.factorize(cell_keys(frame[c]))
        >>> truth = pd.DataFrame({"flight": ["F0", "F1", "F2"], "src": ["b"] * 3, "dep": ["8:00"] * 3})
        >>> weights, margin = _reliability("flight", "src", list(frame.columns), codes, values, truth)["dep"]
        >>> weights.round(2).tolist()[:3], margin
        ([2.5, 0.4, 0.4], None)
    """
    ce, cs = codes[entity], codes[source]
    ns = len(values[source])
    base = np.ones(len(ce)) if base is None else base
    position = {str(v): i for i, v in enumerate(values[entity])}
    labelled = cell_keys(truth[entity]) if entity in truth.columns else pd.Series(dtype=object)
    compared_columns = [c for c in columns if c not in (entity, source) and c in truth.columns]
    out: dict[str, tuple[np.ndarray, float | None]] = {}
    if not labelled.notna().any():
        return out
    for c in compared_columns:
        known = {str(v): j for j, v in enumerate(values[c])}
        labelled_rows = {}  # entity code -> its rows with a report of `c`, and the person's value's code
        for key, wanted in zip(labelled.tolist(), cell_keys(truth[c]).tolist()):
            if key is not None and wanted is not None and str(key) in position:
                rows = np.flatnonzero((ce == position[str(key)]) & (cs >= 0) & (codes[c] >= 0))
                labelled_rows.setdefault(position[str(key)], (rows, known.get(str(wanted), -2)))
        seen = []  # per labelled entity: its rows, the person's value, and its sources' reports compared and right
        for rows, wanted in labelled_rows.values():
            compared_here, right_here = np.zeros(ns), np.zeros(ns)
            np.add.at(compared_here, cs[rows], 1)
            np.add.at(right_here, cs[rows][codes[c][rows] == wanted], 1)
            seen.append((rows, wanted, compared_here, right_here))
        compared = sum((e[2] for e in seen), np.zeros(ns))
        right = sum((e[3] for e in seen), np.zeros(ns))
        settled, clear = 0, []
        for rows, wanted, compared_here, right_here in seen:  # each voted with weights learned without its label
            odds = _odds(right - right_here, compared - compared_here)[cs[rows]]
            votes = np.bincount(codes[c][rows], weights=odds * base[rows], minlength=len(values[c]))
            settled += bool(len(rows)) and int(np.argmax(votes)) == wanted
            top, lead = _lead(codes[c][rows], _evidence(odds) * base[rows], len(values[c]))
            clear.append((top == wanted, lead))
        margin = None
        if len(seen) < MIN_RELIABLE_ENTITIES or settled < RELIABLE_SHARE * len(seen):
            margin = _clear_margin(clear)
            if margin is None:
                continue
        weight = np.ones(len(ce)) if margin is None else np.zeros(len(ce))
        odds = _odds(right, compared)[cs[cs >= 0]]
        weight[cs >= 0] = odds if margin is None else _evidence(odds)
        out[c] = (weight, margin)
    return out


def _evidence(odds: np.ndarray) -> np.ndarray:
    """What a report of a source with these odds of being right counts for in a clear vote: their log, and nothing
    for a source no more often right than wrong."""
    return np.log(np.maximum(odds, 1.0))


def _lead(reported: np.ndarray, scores: np.ndarray, n: int) -> tuple[int, float]:
    """The value with the highest summed score among those `reported` (codes, -1 for none), and how far it leads
    the runner-up (or zero, when it is alone, or when fewer than `MIN_BACKERS` reports of some score back it);
    (-1, 0.0) when nothing is reported."""
    held = reported >= 0
    if not held.any():
        return -1, 0.0
    total = np.bincount(reported[held], weights=scores[held], minlength=n)
    present = np.flatnonzero(np.bincount(reported[held], minlength=n))
    ranked = present[np.argsort(-total[present], kind="stable")]
    if ((reported == ranked[0]) & (scores > 0)).sum() < MIN_BACKERS:
        return int(ranked[0]), 0.0
    return int(ranked[0]), float(total[ranked[0]] - (total[ranked[1]] if len(ranked) > 1 else 0.0))


def _clear_margin(voted: list[tuple[bool, float]]) -> float | None:
    """The lowest of `CLEAR_MARGINS` by which the labelled entities whose value leads by it, voted without their own
    labels ((right, lead) each), are voted right on `RELIABLE_SHARE` of them, at least `MIN_CLEAR_ENTITIES`; None
    when no margin settles enough of them.

    Example:
        >>> _clear_margin([(True, 2.5)] * 6 + [(False, 1.5)]), _clear_margin([(True, 2.5)] * 4 + [(False, 1.5)])
        (1.75, None)
    """
    for margin in CLEAR_MARGINS:
        clear = [right for right, lead in voted if lead >= margin]
        if len(clear) >= MIN_CLEAR_ENTITIES and sum(clear) >= RELIABLE_SHARE * len(clear):
            return margin
    return None


def _odds(right: np.ndarray, compared: np.ndarray) -> np.ndarray:
    """Per source, the odds of a right report, `RELIABILITY_PRIOR` right and wrong ones assumed besides: a source
    right as often as wrong (or never compared) counts 1."""
    share = (right + RELIABILITY_PRIOR) / (compared + 2 * RELIABILITY_PRIOR)
    return share / (1 - share)


def _source_weights(entity, source, columns, codes, values) -> np.ndarray:
    """Per row, 1 / the number of sources copying the row's source (itself included)."""
    ce, cs = codes[entity], codes[source]
    ne, ns = len(values[entity]), len(values[source])
    attributes = [c for c in columns if c not in (entity, source) and _repeats(codes[c], len(values[c]))]
    weights = np.ones(len(ce))
    if not attributes or ne * ns * ns * len(attributes) > MAX_COPY_WORK:
        return weights
    same = np.zeros((ns, ns))
    shared = np.zeros((ns, ns))
    rows = (ce >= 0) & (cs >= 0)
    for c in attributes:
        grid = np.full((ne, ns), -1, dtype=np.int64)
        grid[ce[rows], cs[rows]] = codes[c][rows]
        filled = grid >= 0
        both = filled[:, :, None] & filled[:, None, :]
        shared += both.sum(axis=0)
        same += ((grid[:, :, None] == grid[:, None, :]) & both).sum(axis=0)
    parent = list(range(ns))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(ns), 2):
        if shared[i, j] >= 10 and same[i, j] >= COPY_SIMILARITY * shared[i, j]:
            parent[root(i)] = root(j)
    roots = [root(i) for i in range(ns)]
    size = np.bincount(roots, minlength=ns)
    per_source = 1.0 / size[roots]
    weights[cs >= 0] = per_source[cs[cs >= 0]]
    return weights


def _conditions(b, columns, codes, values) -> list[Condition]:
    cb, nb = codes[b], len(values[b])
    if not 2 <= nb <= CONDITION_MAX_VALUES:
        return []
    out = []
    for a in columns:
        ca = codes[a]
        if a == b or not _repeats(ca, len(values[a])):
            continue
        both = (ca >= 0) & (cb >= 0)
        usual = np.bincount(ca[both]).argmax() if both.any() else -1
        off = both & (ca != usual)
        if off.sum() < CONDITION_ROWS:
            continue
        counts = np.bincount(cb[off], minlength=nb)
        value = counts.argmax()
        agreement = counts[value] / off.sum()
        on = both & (ca == usual)
        # Informative: B is mixed where A is usual; otherwise B is nearly constant and nothing is implied.
        mixed = on.any() and np.bincount(cb[on], minlength=nb).max() < 0.9 * on.sum()
        if agreement >= CONDITION_AGREEMENT and agreement < 1.0 and mixed:
            out.append(Condition(a, b, str(values[a][usual]), str(values[b][value]), round(float(agreement), 4)))
    return out[:MAX_DETERMINANTS]


def repair(frame: pd.DataFrame, learned: Dependencies, *, rounds: int = 10, fill_empty: bool = False) -> pd.DataFrame:
    """`frame` with the cells that break `learned` repaired; the reference for the rule template.

    A cell is repaired when every determinant that knows the row's key names the same value, and, unless
    sources voted, the key agrees with every other column of the row it determines (else the key itself may
    be the wrong cell), and the new value fits the row's other columns better than the old one (an
    established key is not re-labelled by a coincidence) and contradicts none of them. Unless sources voted, the
    value held must be a slip of the new one (a typing error or two), or another column of the row must back the
    key: a row of a facility the drop never held, sharing a key's value, keeps its own values. A cell holding a
    value that is valid on its own (some key's usual value) changes only when sources voted or, with the key
    backed, a key with `STRONG_SUPPORT` rows names the new value; an empty cell is filled only with `fill_empty`.

    Example:
        >>> df = pd.DataFrame({"zip": ["35233"] * 12 + ["99501"] * 12,
        ...                    "city": ["birmingham"] * 11 + ["birminghxm"] + ["anchorage"] * 11 + [""]})
        >>> repair(df, learn(df))["city"].iloc[[11, 23]].tolist()
        ['birmingham', '']
        >>> repair(df, learn(df), fill_empty=True)["city"].iloc[[11, 23]].tolist()
        ['birmingham', 'anchorage']
    """
    out = frame.copy()
    keys = _Keys(out)
    n = len(out)
    for _ in range(rounds):
        changed = False
        for b in learned.dependents:
            if b not in out.columns:
                continue
            proposal, conflict = np.full(n, None, dtype=object), np.zeros(n, bool)
            strong, backed, conditioned = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
            valid: set[str] = set()
            voted = False
            for d in (d for d in learned.dependencies if d.dependent == b and d.determinant in out.columns):
                voted |= d.source is not None
                valid |= set(d.mapping.values())
                strong |= keys.isin(d.determinant, set(d.strong))
                named = keys.named(d.determinant, d.mapping)
                if d.source is None:  # a key the row's other columns contradict may be the wrong cell itself
                    doubted, agreed = keys.witnessed(d.determinant, b, learned)
                    named = np.where(doubted, None, named)
                    backed |= pd.notna(named) & agreed
                proposal, conflict = _vote(proposal, conflict, named)
            for c in (c for c in learned.conditions if c.dependent == b and c.determinant in out.columns):
                held_key = keys(c.determinant)
                off = pd.notna(held_key) & (held_key != c.usual)
                strong |= off  # a condition holds over many rows (CONDITION_ROWS) by construction
                conditioned |= off
                proposal, conflict = _vote(proposal, conflict, np.where(off, c.value, None))
            held_key = keys(b)
            held = pd.notna(held_key)
            change = pd.notna(proposal) & ~conflict & (proposal != np.where(held, held_key, "\0"))
            if not fill_empty:
                change &= held
            if not voted:
                held_valid = keys.isin(b, valid)
                if b in learned.numeric:  # a number far from its key's is the item's own: slips only
                    backed = np.zeros(n, bool)
                decided = ~held | conditioned | (backed & (strong | ~held_valid))
                change &= decided | ~held_valid
                for i in np.flatnonzero(change & ~decided):  # else only a slip of the key's value is repaired
                    change[i] = _near(held_key[i], proposal[i])
            if not voted and change.any():
                change &= _fits(keys, b, proposal, learned, out.columns)
            for i in np.flatnonzero(change & held):
                change[i] = not _own_value(out, i, b, held_key[i], proposal[i])
            if change.any():
                out[b] = out[b].mask(change, proposal)
                keys.forget(b)
                changed = True
        if not changed:
            break
    return out


class _Keys:
    """The columns of a frame under repair as lookup keys (object arrays, None where a cell is no key) and what
    each table names for them, kept until the column changes: a round looks one key up in many tables."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self._keys: dict[str, np.ndarray] = {}
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._named: dict[tuple[str, int], np.ndarray] = {}
        self._witnessed: dict[str, tuple[np.ndarray, np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]] = {}

    def __call__(self, column: str) -> np.ndarray:
        if column not in self._keys:
            self._keys[column] = cell_keys(self.frame[column]).to_numpy(dtype=object, na_value=None)
        return self._keys[column]

    def _factorized(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        if column not in self._codes:
            self._codes[column] = pd.factorize(self(column))
        return self._codes[column]

    def named(self, column: str, mapping: dict[str, str]) -> np.ndarray:
        """Per row, the value `mapping` names for the row's key in `column` (None where it names none)."""
        if (column, id(mapping)) not in self._named:
            codes, uniques = self._factorized(column)
            self._named[(column, id(mapping))] = _lookup(codes, uniques, mapping)
        return self._named[(column, id(mapping))]

    def isin(self, column: str, values: set[str]) -> np.ndarray:
        codes, uniques = self._factorized(column)
        return np.append(np.array([u in values for u in uniques], dtype=bool), False)[codes]

    def witnessed(self, determinant: str, dependent: str, learned: Dependencies) -> tuple[np.ndarray, np.ndarray]:
        """Per row, whether its key in `determinant` is doubted and whether it is backed, by the row's columns
        other than `dependent` that the key determines.

        Doubted: the key names, for another column, a value the row does not hold; then the key may be the wrong
        cell (a zip code typed wrong), and it repairs nothing in that row. Backed: some other column holds the
        value the key names for it; only then may a value far from the key's (not a slip of it) be replaced,
        since a row whose other columns say nothing of its key may be another entity of the same key's value."""
        if determinant not in self._witnessed:
            n = len(self.frame)
            doubts, agrees, each = np.zeros(n, int), np.zeros(n, int), {}
            for other in (*learned.dependencies, *learned.witnesses):
                if other.determinant == determinant and other.source is None and other.dependent in self.frame.columns:
                    named, held = self.named(determinant, other.mapping), self(other.dependent)
                    known = pd.notna(named)
                    against = known & pd.notna(held) & (named != held)
                    agree = known & (named == held)
                    doubts, agrees = doubts + against, agrees + agree
                    was = each.get(other.dependent, (np.zeros(n, int), np.zeros(n, int)))
                    each[other.dependent] = (was[0] + against, was[1] + agree)
            self._witnessed[determinant] = (doubts, agrees, each)
        doubts, agrees, each = self._witnessed[determinant]
        own = each.get(dependent, (0, 0))
        return doubts - own[0] > 0, agrees - own[1] > 0

    def forget(self, column: str) -> None:
        """`column` was repaired: its keys, the lookups of its keys and every row's witnesses are stale."""
        self._keys.pop(column, None)
        self._codes.pop(column, None)
        for stale in [k for k in self._named if k[0] == column]:
            del self._named[stale]
        self._witnessed.clear()


def _own_value(frame: pd.DataFrame, i: int, column: str, held: str, proposal: str) -> bool:
    """Whether the held value is built from the row's own cells: a word of it (2 characters or more) that the new
    value lacks is another cell of the row ("ak_pn-7" beside the state "ak", where the measure's usual value is
    "al_pn-7"). Such a value is the row's own, whatever the key's other rows hold."""
    words = {w.casefold() for w in WORD.findall(held)} - {w.casefold() for w in WORD.findall(proposal)}
    return any(isinstance(v, str) and v.strip().casefold() in words
               for c, v in zip(frame.columns, frame.iloc[i].tolist()) if c != column)


def _lookup(codes: np.ndarray, uniques: np.ndarray, mapping: dict[str, str]) -> np.ndarray:
    """Per row, `mapping`'s value for the row's code among `uniques` (None for code -1 and keys it lacks)."""
    return np.array([mapping.get(u) for u in uniques] + [None], dtype=object)[codes]


def _near(held: str, proposal: str) -> bool:
    """Whether the value held is a slip of the value proposed: a typing error or two away (`SLIP_CHARS_PER_EDIT`
    characters per edit: a letter typed, dropped, replaced, or two swapped), case aside; values shorter than
    `MIN_SLIP_LENGTH` are never slips of each other ("PA" and "CA" are two states)."""
    if min(len(held), len(proposal)) < MIN_SLIP_LENGTH:
        return False
    return OSA.distance(held.casefold(), proposal.casefold()) <= max(1, len(proposal) // SLIP_CHARS_PER_EDIT)


def _vote(proposal: np.ndarray, conflict: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    has, adds = pd.notna(proposal), pd.notna(new)
    return np.where(has, proposal, new), conflict | (has & adds & (proposal != new))


def _fits(keys: _Keys, b: str, proposal: np.ndarray, learned: Dependencies, columns) -> np.ndarray:
    """Per row, whether the proposed value fits the row's other columns better than the value held, and
    contradicts none of them."""
    n = len(proposal)
    better, known, contradicts = np.zeros(n, int), np.zeros(n, bool), np.zeros(n, bool)
    codes, uniques = pd.factorize(proposal)
    for d in (d for d in learned.dependencies if d.determinant == b and d.dependent in columns):
        other = keys(d.dependent)
        new, old = _lookup(codes, uniques, d.mapping), keys.named(b, d.mapping)
        has_new, has_old, has_other = pd.notna(new), pd.notna(old), pd.notna(other)
        better += (has_new & (new == other)).astype(int) - (has_old & (old == other)).astype(int)
        known |= has_old
        contradicts |= has_new & has_other & (new != other)
    return ~contradicts & ((better > 0) | ~known)


def detect(rows: pd.DataFrame, learned: Dependencies, *, fill_empty: bool = False) -> list[Finding]:
    """One finding per column of `rows` with cells that `repair` would change, in column order.

    Example:
        >>> df = pd.DataFrame({"zip": ["35233"] * 12 + ["99501"] * 12,
        ...                    "city": ["birmingham"] * 11 + ["birminghxm"] + ["anchorage"] * 12})
        >>> [(f.column, f.count) for f in detect(df, learn(df))]
        [('city', 1)]
    """
    if not learned or rows.empty:
        return []
    fixed = repair(rows, learned, fill_empty=fill_empty)
    keyed: dict[str, pd.Series] = {}  # each column's cells as lookup keys, for the examples' support
    findings = []
    for b in learned.dependents:
        if b not in rows.columns:
            continue
        before, after = rows[b], fixed[b]
        changed = ~((before == after) | (before.isna() & after.isna()))
        n = int(changed.sum())
        if not n:
            continue
        determinants = [d.determinant for d in learned.dependencies if d.dependent == b]
        determinants += [c.determinant for c in learned.conditions if c.dependent == b]
        shown = changed.index[changed][:3]
        examples = {f"{before[i]!r} -> {after[i]!r}{_held(rows, learned, b, i, after[i], keyed)}": 1 for i in shown}
        findings.append(Finding(
            kind=KIND, column=b, count=n,
            message=(f"{n} cells of {b!r} break a dependency on {', '.join(map(repr, dict.fromkeys(determinants)))} "
                     "that the rest of the drop keeps"),
            examples=top_examples(examples),
            params={"determinants": list(dict.fromkeys(determinants))},
        ))
    return findings


def _held(rows: pd.DataFrame, learned: Dependencies, b: str, i, value, keyed: dict[str, pd.Series]) -> str:
    """How many rows of the repaired cell's key hold the value it gets: " (flight 'AA-12' has it on 9 of its 11
    rows with a value)", from the first determinant whose table knows the row's key; empty when none does.
    `keyed` keeps each column's `cell_keys` across calls."""
    def key(column: str) -> pd.Series:
        if column not in keyed:
            keyed[column] = cell_keys(rows[column])
        return keyed[column]

    for d in learned.dependencies:
        if d.dependent != b or d.determinant not in rows.columns:
            continue
        keys = key(d.determinant)
        if pd.notna(keys[i]) and keys[i] in d.mapping:
            values = key(b)[keys == keys[i]].dropna()
            held = int((values == cell_keys(pd.Series([value]))[0]).sum())
            return f" ({d.determinant} {keys[i]!r} has it on {held} of its {len(values)} rows with a value)"
    return ""


__all__ = ["KIND", "Condition", "Dependencies", "Dependency", "cell_keys", "detect", "learn", "repair"]
