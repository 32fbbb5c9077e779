"""Consolidation: redundant functions become one, the module's output is unchanged, nothing disappears."""

from __future__ import annotations

from functools import partial

import pandas as pd

from smolclean_dagster.core.analysts.base import AnalysisRequest, RegisteredSummary
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.consolidate import consolidate
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry


def _rules_function(chunk: pd.DataFrame, taken: tuple[str, ...]) -> CleaningFunction:
    request = AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk,
                              registry=tuple(RegisteredSummary(name=n, docstring="") for n in taken))
    proposal = RulesAnalyst().propose(request)
    assert proposal.function is not None
    return proposal.function


def _registry(*functions: CleaningFunction) -> Registry:
    reg = Registry(dataset="d")
    for i, f in enumerate(functions):
        reg = reg.with_entry(RegistryEntry(function=f, provenance=Provenance(drop="d.csv", chunk=f"c{i}", step=1,
                                                                             analyst="rules")))
    return reg


ROWS = pd.DataFrame({"city": ["chicago", "Chicago", "Chicago", "boston", "Boston", "Boston", "Denver", "BOSTON",
                              "CHICAGO", "Denver"]}, dtype=object)


def test_two_functions_of_one_rule_become_one_and_the_output_is_unchanged(sandbox):
    first = _rules_function(pd.DataFrame({"city": ["chicago"] + ["Chicago"] * 3 + ["Denver"] * 2}, dtype=object), ())
    second = _rules_function(pd.DataFrame({"city": ["boston"] + ["Boston"] * 3 + ["Denver"] * 2}, dtype=object),
                             (first.name,))
    assert first.name == "unify_case_city" and second.name == "unify_case_city_2"
    registry = _registry(first, second)
    before = sandbox.run(render_module(registry), ROWS, entry="clean", module=True)

    result = consolidate(registry, ROWS, sandbox, rule_merger=RulesAnalyst().merge)

    assert [e.function.name for e in result.registry.entries] == ["unify_case_city"]
    assert result.registry.entries[0].merged_from == ("unify_case_city", "unify_case_city_2")
    assert result.registry.version == registry.version + 1
    after = sandbox.run(render_module(result.registry), ROWS, entry="clean", module=True)
    assert after["city"].tolist() == before["city"].tolist()
    assert after["city"].tolist()[:4] == ["Chicago", "Chicago", "Chicago", "Boston"]


def test_a_merge_that_changes_the_output_is_refused_and_both_functions_stay(sandbox):
    a = CleaningFunction.from_code('def upper_city(df):\n    """Upper-case city."""\n    df = df.copy()\n'
                                   '    df["city"] = df["city"].str.upper()\n    return df\n', columns=["city"])
    b = CleaningFunction.from_code('def strip_city(df):\n    """Strip city."""\n    df = df.copy()\n'
                                   '    df["city"] = df["city"].str.strip()\n    return df\n', columns=["city"])
    wrong = CleaningFunction.from_code('def city(df):\n    """Lower-case city."""\n    df = df.copy()\n'
                                       '    df["city"] = df["city"].str.lower()\n    return df\n', columns=["city"])
    registry = _registry(a, b)
    result = consolidate(registry, ROWS, sandbox, rule_merger=None, model_merger=lambda fns: wrong)
    assert [e.function.name for e in result.registry.entries] == ["upper_city", "strip_city"]
    assert result.registry.version == registry.version
    assert "changes the module's output" in result.merges[0].reason


def test_whitespace_fixes_from_two_chunks_on_different_columns_become_one_function(sandbox):
    rows = pd.DataFrame({"name": [" Ann", "Bo  Li", "Cy"], "city": ["Rome ", "Oslo", " Lima"],
                         "plan": ["gold", " basic ", "pro"]}, dtype=object)
    first = _rules_function(rows[["name", "city"]].copy(), ())
    second = _rules_function(rows[["city", "plan"]].copy(), (first.name,))
    assert (first.name, second.name) == ("strip_whitespace_name_city", "strip_whitespace_city_plan")
    registry = _registry(first, second)
    before = sandbox.run(render_module(registry), rows, entry="clean", module=True)

    rules = RulesAnalyst()
    result = consolidate(registry, rows, sandbox, rule_merger=rules.merge, rule_key=rules.merge_key)

    (entry,) = result.registry.entries
    assert entry.function.name == "strip_whitespace_name_city_plan"
    assert entry.function.columns == ("name", "city", "plan")
    assert entry.merged_from == ("strip_whitespace_name_city", "strip_whitespace_city_plan")
    after = sandbox.run(render_module(result.registry), rows, entry="clean", module=True)
    assert after.equals(before) and after["plan"].tolist() == ["gold", "basic", "pro"]
    # Without the rules analyst's grouping, functions on different columns are never tried together.
    assert not consolidate(registry, rows, sandbox, rule_merger=rules.merge).merged


def test_case_fixes_on_different_columns_stay_apart(sandbox):
    """Case mappings are learned per column: the rules analyst never merges them across columns."""
    rules = RulesAnalyst()
    a = _rules_function(pd.DataFrame({"city": ["Rome", "Rome", "Rome", "ROME"]}, dtype=object), ())
    b = _rules_function(pd.DataFrame({"country": ["Peru", "Peru", "Peru", "PERU"]}, dtype=object), (a.name,))
    assert rules.merge_key(a) != rules.merge_key(b) and rules.merge([a, b]) is None


def test_a_merge_that_loops_over_cells_in_python_is_refused_for_its_cost(sandbox):
    a = CleaningFunction.from_code('def upper_city(df):\n    """Upper-case city."""\n    df = df.copy()\n'
                                   '    df["city"] = df["city"].str.upper()\n    return df\n', columns=["city"])
    b = CleaningFunction.from_code('def strip_city(df):\n    """Strip city."""\n    df = df.copy()\n'
                                   '    df["city"] = df["city"].str.strip()\n    return df\n', columns=["city"])
    # the same output as the two, one cell at a time through a heavy Python function
    slow = CleaningFunction.from_code(
        'def tidy_city(df):\n    """Strip and upper-case city."""\n    df = df.copy()\n'
        "    def tidy(x):\n        for _ in range(40_000):\n            x = x.strip()\n        return x.upper()\n"
        '    df["city"] = [tidy(x) for x in df["city"]]\n    return df\n', columns=["city"])
    registry = _registry(a, b)
    result = consolidate(registry, ROWS, sandbox, rule_merger=None, model_merger=lambda fns: slow, timeout_s=120)
    assert [e.function.name for e in result.registry.entries] == ["upper_city", "strip_city"]
    assert "the merged function was rejected: too slow for real drops" in result.merges[0].reason
    assert "us per cell" in result.merges[0].reason
    # the same merge done on whole columns is kept
    fast = CleaningFunction.from_code(
        'def tidy_city(df):\n    """Strip and upper-case city."""\n    df = df.copy()\n'
        '    df["city"] = df["city"].str.strip().str.upper()\n    return df\n', columns=["city"])
    kept = consolidate(registry, ROWS, sandbox, rule_merger=None, model_merger=lambda fns: fast)
    assert [e.function.name for e in kept.registry.entries] == ["tidy_city"]


def test_a_merge_names_its_columns_in_the_drop_s_order_whichever_chunk_wrote_which(sandbox):
    rows = pd.DataFrame({"name": [" Ann", "Bo", "Cy"], "city": ["Rome ", "Oslo", " Lima"],
                         "plan": ["gold", " basic ", "pro"]}, dtype=object)
    city_plan = _rules_function(rows[["city", "plan"]].copy(), ())
    name = _rules_function(rows[["name"]].copy(), ())
    rules = RulesAnalyst()
    merged = []
    for functions in ((city_plan, name), (name, city_plan)):
        result = consolidate(_registry(*functions), rows, sandbox, rule_key=rules.merge_key,
                             rule_merger=partial(rules.merge, column_order=tuple(rows.columns)))
        (entry,) = result.registry.entries
        merged.append(entry.function)
    assert merged[0].name == merged[1].name == "strip_whitespace_name_city_plan"
    assert merged[0].columns == ("name", "city", "plan") and merged[0].code == merged[1].code


def test_a_module_too_long_for_one_sandbox_run_is_still_consolidated(sandbox):
    """Functions carrying big tables (a later wave's beside the first's, before they are merged) can make the
    module longer than the sandbox takes in one run: it is checked in consecutive parts, which clean the same."""
    from smolclean_dagster.core.sandbox.gate import MAX_CODE_CHARS

    rows = pd.DataFrame({"name": [" Ann", "Bo", "Cy"], "city": ["Rome ", "Oslo", " Lima"],
                         "code": ["k1", "k2", "x"]}, dtype=object)
    table = {f"k{i}": f"K{i}" for i in range(MAX_CODE_CHARS // 30)}  # about 0.6 of what one run takes

    def spell(name: str) -> CleaningFunction:
        constant = name.upper()
        return CleaningFunction.from_code(
            f'{constant} = {table!r}\n\n\ndef {name}(df):\n    """Spell codes."""\n'
            f'    return df.assign(code=df["code"].map({constant}).fillna(df["code"]))\n', columns=["code"])

    first = _rules_function(rows[["name"]].copy(), ())
    second = _rules_function(rows[["city"]].copy(), (first.name,))
    registry = _registry(first, spell("codes"), spell("codes_again"), second)
    assert len(render_module(registry)) > MAX_CODE_CHARS

    rules = RulesAnalyst()
    result = consolidate(registry, rows, sandbox, rule_key=rules.merge_key,
                         rule_merger=partial(rules.merge, column_order=tuple(rows.columns)))

    assert [e.function.name for e in result.registry.entries] == ["strip_whitespace_name_city", "codes", "codes_again"]
