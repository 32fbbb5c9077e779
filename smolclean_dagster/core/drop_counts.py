"""A drop's own counts: what a cleaning function may read of the whole drop beside the rows it cleans.

A fix that depends on what a drop holds (a key's usual value, how many rows hold a spelling) must give a
row the same result whatever batch the row is cleaned in. So the drop is counted once, before any batch is
cleaned, and every batch sees the same counts: rows per value, or per combination of values, of the groups
of columns the module's functions declare (`DROP_COUNTS = [("zip",), ("zip", "city")]` in a function's
body; the export gathers them into the module's `DROP_GROUPS`).

`smolclean apply` and the module's `__main__` count the file first (`drop_counts` per batch, summed by
`add_counts`) and hand the sum to `clean(df, drop=...)`; `clean` then gives each function its frame with
`df.attrs["smolclean_drop"]` set to a lookup: `drop("zip", "city")` is a read-only {("60601", "Chicago"):
312, ...}, or None for a group not counted (too many distinct values to keep, or a column the drop lacks).
A frame without it (rows cleaned on their own, as learning checks a function) gets no drop evidence: the
function decides by what it learned alone.

The export pastes these functions into every module whose functions read the drop, so the module on its
own counts as smolclean does. Standard library and pandas only; pandas is imported where a frame is read.
"""

from types import MappingProxyType

#: The frame attribute a function finds the drop's counts under.
DROP_ATTR = "smolclean_drop"
#: Distinct values of a group's first column kept at most: a group with more (a column of ids) is not counted.
MAX_DROP_DISTINCT = 200_000


def drop_counts(df, groups):
    """Rows per value (per combination of values) of each group of columns over `df`, as {group: counts}:
    for one column {value: rows}; for more, by the first column's value, {value: {the others' values: rows}}
    (one value for a pair, a tuple for more). Cells are counted as text, stripped, runs of spaces made one;
    rows where a cell of the group holds no text are not counted. A group with a column `df` lacks is left
    out; one with more than MAX_DROP_DISTINCT values is None (too many to keep).

    Example:
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"zip": ["1", "1 ", "2", None], "city": ["A", "A", "B", "B"]})
        >>> drop_counts(frame, [("zip", "city"), ("city",)])
        {('zip', 'city'): {'1': {'A': 2}, '2': {'B': 1}}, ('city',): {'A': 2, 'B': 2}}
    """
    import pandas as pd

    tables = {}
    for group in groups:
        group = tuple(group)
        if not group or not all(column in df.columns for column in group):
            continue
        parts = {}
        for i, column in enumerate(group):
            values = df[column]
            text = values.where(values.apply(isinstance, args=(str,))).astype(object)
            parts[i] = text.str.strip().str.replace(r"[^\S\r\n]{2,}", " ", regex=True)
        counted = pd.DataFrame(parts, index=df.index).dropna().value_counts(sort=False)
        table = {}
        for key, rows in zip(counted.index.tolist(), counted.astype(int).tolist()):
            key = key if isinstance(key, tuple) else (key,)
            if len(group) == 1:
                table[key[0]] = rows
            else:
                rest = key[1] if len(group) == 2 else key[1:]
                table.setdefault(key[0], {})[rest] = rows
        tables[group] = None if len(table) > MAX_DROP_DISTINCT else table
    return tables


def add_counts(tables, more):
    """Add `more` (counts of another part of the same drop, from `drop_counts`) into `tables`, in place, and
    return it. A group whose first column passes MAX_DROP_DISTINCT values becomes None.

    Example:
        >>> add_counts({("a",): {"x": 1}}, {("a",): {"x": 2, "y": 1}, ("a", "b"): {"x": {"z": 1}}})
        {('a',): {'x': 3, 'y': 1}, ('a', 'b'): {'x': {'z': 1}}}
    """
    for group, table in more.items():
        if table is None or (group in tables and tables[group] is None):
            tables[group] = None
            continue
        mine = tables.setdefault(group, {})
        for key, rows in table.items():
            if isinstance(rows, dict):
                inner = mine.setdefault(key, {})
                for rest, n in rows.items():
                    inner[rest] = inner.get(rest, 0) + n
            else:
                mine[key] = mine.get(key, 0) + rows
        if len(mine) > MAX_DROP_DISTINCT:
            tables[group] = None
    return tables


def with_drop(df, tables):
    """`df` (not copied: the caller's own frame) carrying the drop's counts as `df.attrs["smolclean_drop"]`.

    The lookup is a function, so pandas passes it on to the frames made from `df` as it is (it copies the
    attributes it carries deeply, and a function is copied as itself).
    """
    frozen = {group: None if table is None else MappingProxyType(table) for group, table in tables.items()}

    def drop(*columns):
        """Rows per value (combination of values) of `columns` over the whole drop, read-only; None if not counted."""
        return frozen.get(tuple(columns))

    df.attrs[DROP_ATTR] = drop
    return df
