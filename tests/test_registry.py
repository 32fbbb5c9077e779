"""The registry: versions, unique names, atomic writes, concurrent writers."""

import json
import multiprocessing as mp

import pytest

from smolclean_dagster.core.errors import RegistryError
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.instructions import Declined
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry, RegistryStore


def entry(name: str, body: str = "return df", chunk: str = "c1") -> RegistryEntry:
    code = f'def {name}(df):\n    """Fix {name}."""\n    {body}\n'
    return RegistryEntry(
        function=CleaningFunction.from_code(code, columns=["a"]),
        provenance=Provenance(drop="d.csv", chunk=chunk, step=1, analyst="rules"),
    )


def test_adding_bumps_version_and_keeps_order(tmp_path):
    store = RegistryStore(tmp_path / "registry.json", "ds")
    store.update(lambda r: r.with_entry(entry("first")))
    reg = store.update(lambda r: r.with_entry(entry("second")))
    assert reg.version == 2
    assert [f.name for f in store.load().functions] == ["first", "second"]


def test_identical_code_is_not_added_twice_and_name_clashes_get_a_suffix(tmp_path):
    store = RegistryStore(tmp_path / "registry.json", "ds")
    store.update(lambda r: r.with_entry(entry("fix")))
    store.update(lambda r: r.with_entry(entry("fix")))
    reg = store.update(lambda r: r.with_entry(entry("fix", body="return df.copy()")))
    assert [f.name for f in reg.functions] == ["fix", "fix_2"]
    assert "def fix_2(df):" in reg.functions[1].code
    assert reg.version == 2


def test_a_corrupt_registry_file_gives_a_clear_error(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text('{"dataset": "ds", "entries": [', encoding="utf-8")
    with pytest.raises(RegistryError) as err:
        RegistryStore(path, "ds").load()
    assert str(path) in str(err.value)


def test_writes_leave_no_temporary_files_and_stable_json(tmp_path):
    store = RegistryStore(tmp_path / "registry.json", "ds")
    store.update(lambda r: r.with_entry(entry("one")))
    first = (tmp_path / "registry.json").read_bytes()
    store.save(store.load())
    assert (tmp_path / "registry.json").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["registry.json", "registry.lock"]
    assert json.loads(first)["entries"][0]["function"]["name"] == "one"


def _add_many(path: str, worker: int) -> None:
    store = RegistryStore(path, "ds")
    for i in range(10):
        store.update(lambda r, i=i: r.with_entry(entry(f"w{worker}_f{i}", chunk=f"c{worker}")))


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "registry.json")
    procs = [mp.get_context("fork").Process(target=_add_many, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    reg = RegistryStore(path, "ds").load()
    assert len(reg.entries) == 40
    assert len({f.name for f in reg.functions}) == 40
    assert reg.version == 40


def test_an_empty_registry_is_version_zero():
    assert Registry(dataset="ds").version == 0


def _strip(columns: list[str]) -> str:
    return (
        "def strip_whitespace(df):\n"
        f'    """Strip whitespace in {", ".join(columns)}."""\n'
        "    df = df.copy()\n"
        f"    for c in {columns!r}:\n"
        "        df[c] = df[c].str.strip()\n"
        "    return df\n"
    )


def test_a_merge_that_keeps_a_name_is_reported_as_a_changed_function_not_as_nothing_learned():
    from smolclean_dagster.core.registry_changes import registry_changes

    prov = Provenance(drop="d", chunk="c", step=1, analyst="rules")
    old = CleaningFunction.from_code(_strip(["carrier"]), columns=["carrier"])
    gone = CleaningFunction.from_code('def upper_city(df):\n    """Upper-case city."""\n    return df\n', columns=["city"])
    before = Registry(dataset="d").with_entry(RegistryEntry(function=old, provenance=prov))
    before = before.with_entry(RegistryEntry(function=gone, provenance=prov))
    learned = before.with_entry(RegistryEntry(function=CleaningFunction.from_code(_strip(["status"])), provenance=prov))
    merged = CleaningFunction.from_code(_strip(["carrier", "status"]), columns=["carrier", "status"])
    after = learned.with_entries([
        RegistryEntry(function=merged, provenance=prov, merged_from=("strip_whitespace", "strip_whitespace_2", "upper_city")),
    ])
    changes = registry_changes(before, after)
    assert (changes.version_before, changes.version_after) == (2, 4)
    assert [c.name for c in changes.changed] == ["strip_whitespace"] and changes.changed[0].columns == ("carrier", "status")
    assert changes.added == () and [c.name for c in changes.removed] == ["upper_city"]
    text = changes.markdown()
    assert "- changed `strip_whitespace` (carrier, status)" in text
    assert "- removed `upper_city` (merged into `strip_whitespace`)" in text
    assert registry_changes(after, after).markdown() == "No change: the module is the same as before (registry revision 4)."


def test_a_wave_publishes_the_same_registry_whichever_of_its_chunks_accepted_first(tmp_path):
    """Two chunks side by side (neither sees the other's functions) accept the same function and decline the same
    item; once the wave is published, the registry is the same byte for byte in either order: the function once,
    from the first chunk, and the later chunk's reason for the decline."""
    published = []
    for order in (("c1", "c2"), ("c2", "c1")):
        store = RegistryStore(tmp_path / f"{order[0]}.json", "ds")
        store.update(lambda r: r.with_entry(entry("earlier", chunk="c0")))
        for chunk in order:
            beside = frozenset({"c1", "c2"} - {chunk})
            store.update(lambda r: r.with_entry(entry("fix", chunk=chunk), beside=beside))
            store.update(lambda r: r.with_entry(entry(f"own_{chunk}", chunk=chunk), beside=beside))
            store.update(lambda r: r.with_declined([Declined(item="dedupe", reason=f"not in {chunk}", chunk=chunk)],
                                                   beside=beside))
            # Each chunk goes on from its own copy: it sees the function it accepted.
            assert store.load().without_chunks(beside).find(entry("fix").function) is not None
        reg = store.update(lambda r: r.in_chunk_order(["c1", "c2"]))
        published.append(reg)
    first, second = published
    assert json.dumps(first.model_dump(mode="json")) == json.dumps(second.model_dump(mode="json"))
    assert [(e.function.name, e.provenance.chunk) for e in first.entries] == [
        ("earlier", "c0"), ("fix", "c1"), ("own_c1", "c1"), ("own_c2", "c2")]
    assert [d.reason for d in first.declined] == ["not in c2"]


def test_a_function_the_model_rewrote_from_the_same_prompt_is_told_apart_from_one_learned_anew():
    from smolclean_dagster.core.registry_changes import registry_changes

    def learned(columns: list[str], prompt: str, reply: str) -> Registry:
        prov = Provenance(drop="d", chunk="c", step=1, analyst="llm", model="m", prompt_hash=prompt, reply_hash=reply)
        fn = CleaningFunction.from_code(_strip(columns), columns=columns)
        return Registry(dataset="d").with_entry(RegistryEntry(function=fn, provenance=prov))

    before = learned(["carrier"], "p1", "r1")
    varied = registry_changes(before, learned(["carrier", "status"], "p1", "r2")).markdown()
    assert "the model answered the same prompt with another reply" in varied
    asked_anew = registry_changes(before, learned(["carrier", "status"], "p2", "r2")).markdown()
    assert asked_anew.startswith("- changed `strip_whitespace`") and "another reply" not in asked_anew


def _rule_made(name: str, columns: list[str], table: dict) -> CleaningFunction:
    from smolclean_dagster.core.functions import RuleSpec

    code = f'TABLE = {table!r}\n\n\ndef {name}(df):\n    """Fix {name}."""\n    return df.replace({{{columns[0]!r}: TABLE}})\n'
    return CleaningFunction.from_code(code, columns=columns, rule=RuleSpec(template="t.py.j2", context={"table": table}))


def test_a_function_keeps_the_name_its_chunk_gave_it_beside_a_chunk_with_one_of_the_same_concern():
    """Two chunks side by side fix the same column the same way with tables of their own: each keeps the name
    (publishing the wave makes the two one function under it); a model's function named like another chunk's, or
    a rule's on other columns, is another job and gets a suffix."""
    reg = Registry(dataset="ds")
    for chunk, table in (("c1", {"ca": "CA"}), ("c2", {"tx": "TX"})):
        fn = _rule_made("unify_case_state", ["state"], table)
        reg = reg.with_entry(RegistryEntry(function=fn, provenance=Provenance(drop="d", chunk=chunk, step=1,
                                                                              analyst="rules")),
                             beside=frozenset({"c1", "c2"} - {chunk}))
    assert [e.function.name for e in reg.entries] == ["unify_case_state", "unify_case_state"]
    assert [e.function.name for e in reg.without_chunks({"c1"}).entries] == ["unify_case_state"]
    other = _rule_made("unify_case_state", ["city"], {"bend": "Bend"})
    reg = reg.with_entry(RegistryEntry(function=other, provenance=Provenance(drop="d", chunk="c3", step=1,
                                                                             analyst="rules")), beside=frozenset({"c1"}))
    model = entry("unify_case_state", body="return df.copy()", chunk="c4")
    reg = reg.with_entry(model, beside=frozenset({"c1", "c2"}))
    assert [e.function.name for e in reg.entries][2:] == ["unify_case_state_2", "unify_case_state_3"]
