"""Big learned tables stay out of the way: beyond COMPACT_TABLE_ENTRIES entries a rule writes them packed several
entries to a line (a dict whose keys share few values grouped by value), still plain Python that passes the gate and
reads back equal, entry for entry; the report gives their counts and samples; and the gate does not walk an unchanged
big table again on every module it screens."""

from __future__ import annotations

import random
import uuid

import pandas as pd

from smolclean_dagster.core.analysts.rules import COMPACT_TABLE_ENTRIES, RulesAnalyst, _literal
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry
from smolclean_dagster.core.report import render_report
from smolclean_dagster.core.sandbox import gate
from smolclean_dagster.core.sandbox.errors import GateRejected

#: Text a table may hold that its source must write back exactly.
AWKWARD = ["O'Neil", 'say "hi"', "back\\slash", "line\nbreak", "tab\there", "Zürich", "東京", "{k}", "# not a comment",
           "'''", '"""', "\\n", "ks", "k", "v", "\u200b", "\x00", "a" * 150]


def zip_cities(entries: int = 3000, cities: int = 300) -> dict[str, str]:
    """A zip -> city table as a dependency learns it: many zips share a city."""
    rng = random.Random(3)
    names = [f"CITY {i}" for i in range(cities)]
    return {f"{10000 + 7 * i:05d}": rng.choice(names) for i in range(entries)}


def rewrite(mapping: dict) -> CleaningFunction:
    """The rules analyst's function carrying `mapping` (each value of column `v` -> its value in the table)."""
    context = {"column": "v", "mapping": mapping, "examples": "see the table"}
    return RulesAnalyst()._render("rewrite_values.py.j2", context, "rewrite_values_v", ["v"])


def run(fn: CleaningFunction, values: list) -> list:
    namespace: dict = {}
    exec(compile(fn.code, fn.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[fn.name](pd.DataFrame({"v": values}, dtype=object))["v"].tolist()


def table_lines(code: str) -> list[str]:
    return [line for line in code.splitlines() if line.startswith("        ")]


def exact(table: dict) -> dict:
    """The table with every key and value as its repr: equal only when the types are too (1, 1.0 and True differ)."""
    return {repr(k): repr(v) for k, v in table.items()}


def test_a_3000_entry_table_of_300_values_is_written_grouped_in_few_lines_and_maps_as_the_table_does():
    table = zip_cities()
    fn = rewrite(table)
    gate.check_function(fn.code)
    assert len(fn.code.splitlines()) < len(table) / 5, "one entry per line"
    assert "'CITY 1': (" in fn.code and "for k in ks}" in fn.code  # value: (its keys), turned back
    assert max(len(line) for line in table_lines(fn.code)) <= 110
    assert run(fn, list(table)) == list(table.values())
    assert rewrite(dict(table)).code == fn.code, "the same learning must write the same bytes"


def test_a_one_to_one_table_is_packed_several_entries_to_a_line():
    table = {f"P{i:05d}": f"Hospital number {i}" for i in range(1000)}
    fn = rewrite(table)
    gate.check_function(fn.code)
    assert "for k in ks" not in fn.code and len(fn.code.splitlines()) < len(table) / 2
    assert run(fn, list(table)) == list(table.values())


def test_awkward_text_in_a_big_table_reads_back_exactly():
    keys = [f"{text}{i}" for i in range(COMPACT_TABLE_ENTRIES) for text in AWKWARD[:2]] + AWKWARD
    grouped = {key: AWKWARD[i % len(AWKWARD)] for i, key in enumerate(keys)}
    fn = rewrite(grouped)
    assert "for k in ks" in fn.code and len(fn.code.splitlines()) < len(grouped) / 2
    assert run(fn, list(grouped)) == list(grouped.values())
    one_to_one = {key: f"{key}!" for key in keys}
    fn = rewrite(one_to_one)
    assert len(fn.code.splitlines()) < len(one_to_one) / 2
    assert run(fn, list(one_to_one)) == list(one_to_one.values())


def test_any_atom_reads_back_exactly_whichever_way_a_big_table_is_written():
    atoms = [*AWKWARD, 0, 1, -7, 2**70, 0.1, -0.0, 1e300, None, True, False]
    values = {i: atoms[i % len(atoms)] for i in range(COMPACT_TABLE_ENTRIES + 50)}  # few distinct values: grouped
    keys = {key: i % 3 for i, key in enumerate([*AWKWARD, 5, 2.5, -0.0, None, True, *range(10, 310)])}
    mixed = {f"k{i}": [1, True, 1.0, 0.0, -0.0][i % 5] for i in range(300)}  # equal values of other types: not grouped
    for table in (values, keys, mixed):
        source = _literal(table)
        assert source.count("\n") < len(table) / 2
        assert exact(eval(source)) == exact(table)  # noqa: S307  (our own rendering of our own table)
    items = [*AWKWARD, 3, 4.5, None, False] * 60
    for sequence in (items, tuple(items)):
        source = _literal(sequence)
        assert source.count("\n") < len(sequence) / 2
        assert [repr(v) for v in eval(source)] == [repr(v) for v in sequence]  # noqa: S307
        assert type(eval(source)) is type(sequence)  # noqa: S307


def test_small_tables_keep_one_entry_per_line():
    table = {f"key {i}": f"value {i}" for i in range(COMPACT_TABLE_ENTRIES)}
    assert _literal(table) == "{\n" + "\n".join(f"    {k!r}: {v!r}," for k, v in table.items()) + "\n}"


def entry(fn: CleaningFunction) -> RegistryEntry:
    return RegistryEntry(function=fn, provenance=Provenance(drop="d.csv", chunk="c1", step=1, analyst="rules"))


def test_the_module_with_a_big_table_passes_the_gate_and_the_report_lists_its_count_and_samples():
    table = zip_cities()
    registry = Registry(dataset="zips").with_entry(entry(rewrite(table)))
    gate.check_module(render_module(registry))
    report = render_report(registry, None)
    assert "## Learned tables" in report
    row = next(line for line in report.splitlines() if line.startswith("| `rewrite_values_v` |"))
    first_zip = next(iter(table))
    assert "| `MAPPING` | 3000 |" in row and f"`'{first_zip}': '{table[first_zip]}'`" in row
    small = Registry(dataset="zips").with_entry(entry(rewrite({"a": "b"})))
    assert "Learned tables" not in render_report(small, None)


def test_the_gate_walks_an_unchanged_big_function_once_and_still_finds_its_missing_import(monkeypatch):
    function = "def f(df):\n    \"\"\"Map.\"\"\"\n    T = " + _literal(zip_cities()) + "\n    return pd.DataFrame(df)\n"
    gate.check_function("import pandas as pd\n" + function)
    walked = []
    aliases_of = gate._aliases_of
    monkeypatch.setattr(gate, "_aliases_of", lambda root: walked.append(root) or aliases_of(root))
    # another module, the same big function: only the statement never screened before is walked
    fresh = f"ROWS_{uuid.uuid4().hex} = 1\n"
    gate.check_function("import pandas as pd\n" + fresh + function)
    assert [type(root).__name__ for root in walked] == ["Assign"]
    code = "\n\n\n" + function  # the same text, lines further down, without the import
    try:
        gate.check_function(code)
    except GateRejected as exc:
        line = code.splitlines().index("    return pd.DataFrame(df)") + 1
        assert exc.reasons == [f"line {line}: `pd` is used but never imported; add `import pandas as pd` at the top"]
    else:
        raise AssertionError("a missing import must be found in a statement that passed before")
