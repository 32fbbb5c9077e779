"""Typed values survive: JSON, JSONL and Parquet values keep their types through learning and both ways
of cleaning (`smolclean apply` and the exported module run on its own), and both give the same output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from smolclean_dagster.core.apply import apply_module
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry


def _module(*codes: str) -> str:
    registry = Registry(dataset="typed")
    for code in codes:
        registry = registry.with_entry(RegistryEntry(
            function=CleaningFunction.from_code(code, columns=[]),
            provenance=Provenance(drop="typed.jsonl", chunk="c1", step=1, analyst="llm"),
        ))
    return render_module(registry)


def _run_module(source: str, src: Path, dst: Path, batch_rows: int | None = None) -> None:
    module = dst.parent / "clean_typed.py"
    module.write_text(source, encoding="utf-8")
    args = [sys.executable, str(module), str(src), str(dst)] + ([str(batch_rows)] if batch_rows else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _as_json(value: object) -> str:
    """A value's JSON text: tells 1 from 1.0 and from true, and a list from its text."""
    return json.dumps(value, sort_keys=False)


STRIP_NAME = '''import pandas as pd


def strip_name(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around `name`."""
    df = df.copy()
    df["name"] = df["name"].str.strip()
    return df
'''


def _typed_record(i: int) -> dict:
    return {
        "id": i,
        "tags": [["a", "b"], [], ["x"]][i % 3],
        "ok": i % 2 == 0,
        "meta": {"k": i, "nested": {"deep": [1, 2.5, None]}} if i % 4 else {"k": i},
        "score": [1.0, 2.5, 1e-7, 12345678901234567][i % 4],
        "note": None if i % 5 == 0 else "call back" if i % 5 == 1 else "",
        "name": [" Ann Lee ", "Bob Stone", "Cara  Diaz  ", "Dan Roe"][i % 4],
    }


def test_jsonl_values_keep_their_types_through_learning_and_both_ways_of_cleaning(tmp_path, sandbox):
    from smolclean_dagster.learning.embedded import learn
    from smolclean_dagster.settings import DatasetSettings

    records = [_typed_record(i) for i in range(120)]
    drop = tmp_path / "typed.jsonl"
    drop.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    outcome = learn(DatasetSettings(name="typed", workdir=tmp_path / "work", analyst="rules", concurrency=1), drop,
                    log_level="ERROR")
    source = outcome.module.read_text(encoding="utf-8")
    assert "def strip_whitespace" in source  # the rules found the names' whitespace, and nothing else to fix

    apply_module(source, drop, tmp_path / "applied.jsonl", sandbox=sandbox, batch_size=50, workers=2)
    _run_module(source, drop, tmp_path / "standalone.jsonl", batch_rows=50)
    applied = (tmp_path / "applied.jsonl").read_text(encoding="utf-8")
    assert (tmp_path / "standalone.jsonl").read_text(encoding="utf-8") == applied

    out = [json.loads(line) for line in applied.splitlines()]
    assert len(out) == len(records)
    for before, after in zip(records, out):
        assert list(after) == list(before)
        for field in ("id", "tags", "ok", "meta", "score", "note"):  # untouched by any function: unchanged, same type
            assert _as_json(after[field]) == _as_json(before[field]), (field, before[field], after[field])
        assert after["name"] == " ".join(before["name"].split())

    cleaned = pq.read_table(outcome.cleaned)  # the cleaned_data asset's Parquet: Arrow types, JSON nulls null
    assert cleaned.schema.field("id").type == pa.int64() and cleaned.schema.field("ok").type == pa.bool_()
    assert cleaned.column("note").to_pylist() == [r["note"] for r in records]


def test_jsonl_cleaned_to_parquet_keeps_numbers_and_nulls_whatever_each_batch_holds(tmp_path, sandbox):
    """A column null in the first batch and numbers later, integers meeting decimals in a later batch, numbers
    mixed with text: numbers stay numbers and nulls null on both paths; a column that mixes numbers and text
    is text, its numbers written as JSON writes them."""
    def record(i: int) -> dict:
        return {"id": i, "late": None if i < 10 else i * 1.5, "count": i if i < 20 else i + 0.5,
                "mixed": [12, "12 pcs", None][i % 3], "ok": None if i % 4 == 0 else i % 2 == 0, "name": f" n{i} "}

    drop = tmp_path / "typed.jsonl"
    drop.write_text("".join(json.dumps(record(i)) + "\n" for i in range(30)), encoding="utf-8")
    source = _module(STRIP_NAME)
    applied, standalone = tmp_path / "applied.parquet", tmp_path / "standalone.parquet"
    apply_module(source, drop, applied, sandbox=sandbox, batch_size=10, workers=2)
    _run_module(source, drop, standalone, batch_rows=10)
    for path in (applied, standalone):
        table = pq.read_table(path)
        types = {field.name: field.type for field in table.schema}
        assert types == {"id": pa.int64(), "late": pa.float64(), "count": pa.float64(), "mixed": pa.string(),
                         "ok": pa.bool_(), "name": pa.string()}, path
        rows = table.to_pylist()
        assert [r["late"] for r in rows] == [None] * 10 + [i * 1.5 for i in range(10, 30)]
        assert [r["count"] for r in rows] == [i if i < 20 else i + 0.5 for i in range(30)]
        assert [r["mixed"] for r in rows] == [["12", "12 pcs", None][i % 3] for i in range(30)]
        assert [r["ok"] for r in rows] == [record(i)["ok"] for i in range(30)]
        assert [r["name"] for r in rows] == [f"n{i}" for i in range(30)]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


SPLIT_TAGS = '''import pandas as pd


def split_tags(df: pd.DataFrame) -> pd.DataFrame:
    """Turn the `tags` text "a; b" into a list of tags, as the instructions ask."""
    df = df.copy()
    df["tags"] = df["tags"].map(lambda v: [t.strip() for t in v.split(";") if t.strip()] if isinstance(v, str) else v)
    return df
'''


def test_a_function_that_builds_arrays_writes_json_arrays(tmp_path, sandbox):
    drop = tmp_path / "posts.csv"
    drop.write_text('id,tags\n1,"a; b"\n2,c\n3,\n', encoding="utf-8")
    source = _module(SPLIT_TAGS)

    apply_module(source, drop, tmp_path / "out.jsonl", sandbox=sandbox)
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["tags"] for line in lines] == [["a", "b"], ["c"], []]
    assert '"tags":["a","b"]' in lines[0]  # a JSON array, not the text of one

    apply_module(source, drop, tmp_path / "out.parquet", sandbox=sandbox)
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.schema.field("tags").type == pa.list_(pa.string())
    assert table.column("tags").to_pylist() == [["a", "b"], ["c"], []]

    apply_module(source, drop, tmp_path / "out.csv", sandbox=sandbox)
    back = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert back["tags"].tolist() == ['["a", "b"]', '["c"]', "[]"]
    assert back["id"].tolist() == ["1", "2", "3"]


def _frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame({
        "code": [f"{i % 13:03d}" for i in range(rows)],  # leading zeros: text, not numbers
        "name": [[" Ann ", "Bob", 'Cara "C" Diaz ', "N/A", ""][i % 5] for i in range(rows)],
        "amount": [["1,200.50", "12", "1e3", " 7 "][i % 4] for i in range(rows)],
        "note": [["a, b", "two\nlines", "none", "x"][i % 4] for i in range(rows)],
    })


def test_standalone_module_and_apply_give_the_same_output_for_every_input_format(tmp_path, sandbox):
    """CSV, TSV, JSONL, JSON and Parquet, each larger than one batch: the same bytes (Parquet: the same table),
    every row in order, untouched CSV cells exactly as written and typed values with their types."""
    source = _module(STRIP_NAME)
    rows = 250  # batches of 100: three batches, the last one short
    text = _frame(rows)
    typed = text.assign(
        amount=pd.Series([[1200.5, 12, None, 7][i % 4] for i in range(rows)], dtype=object),
        tags=pd.Series([[["a"], [], ["b", "c"]][i % 3] for i in range(rows)], dtype=object),
        meta=pd.Series([{"k": i, "ok": i % 2 == 0} for i in range(rows)], dtype=object),
    )
    records = [{k: v for k, v in zip(typed.columns, row)} for row in typed.itertuples(index=False)]
    inputs = {
        "csv": (text, ".csv"), "tsv": (text, ".tsv"), "jsonl": (typed, ".jsonl"), "json": (typed, ".jsonl"),
        "parquet": (typed, ".parquet"),
    }
    for fmt, (expected_in, out_suffix) in inputs.items():
        src = tmp_path / f"in_{fmt}.{fmt}"
        if fmt in ("csv", "tsv"):
            text.to_csv(src, sep="\t" if fmt == "tsv" else ",", index=False)
        elif fmt == "jsonl":
            src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        elif fmt == "json":
            src.write_text(json.dumps(records), encoding="utf-8")
        else:
            pq.write_table(pa.Table.from_pylist(records), src)
        applied, standalone = tmp_path / f"applied_{fmt}{out_suffix}", tmp_path / f"standalone_{fmt}{out_suffix}"
        apply_module(source, src, applied, sandbox=sandbox, batch_size=100, workers=2)
        _run_module(source, src, standalone, batch_rows=100)

        if out_suffix == ".parquet":
            a, b = pq.read_table(applied), pq.read_table(standalone)
            assert a.equals(b), fmt
            out = a.to_pylist()
        elif out_suffix == ".jsonl":
            assert applied.read_bytes() == standalone.read_bytes(), fmt
            out = [json.loads(line) for line in applied.read_text(encoding="utf-8").splitlines()]
        else:
            assert applied.read_bytes() == standalone.read_bytes(), fmt
            back = pd.read_csv(applied, sep="\t" if fmt == "tsv" else ",", dtype=str, keep_default_na=False)
            out = back.to_dict("records")
        assert len(out) == rows, fmt
        # Parquet in, Parquet out: the values as the input's Arrow types hold them
        before_rows = pq.read_table(src).to_pylist() if fmt == "parquet" else expected_in.to_dict("records")
        for i, (before, after) in enumerate(zip(before_rows, out)):
            for column, value in before.items():
                want = value.strip() if column == "name" else value
                assert _as_json(after[column]) == _as_json(want), (fmt, i, column, value, after[column])


def test_json_reads_and_writes_the_same_values_with_and_without_orjson(monkeypatch):
    """orjson (when installed) and the standard library give the same values, also where orjson refuses
    (integers over 64 bits, NaN) and the standard library takes over."""
    from smolclean_dagster.core import drop_io
    from smolclean_dagster.core.drop_io import formats, writers

    assert formats.orjson is not None and writers.orjson is not None, "orjson is a pinned dependency"
    lines = [json.dumps(_typed_record(i), ensure_ascii=False) for i in range(8)]
    lines += ['{"id": 8, "name": "Zoë Ünal", "score": 0.1, "when": "2024-01-02"}']
    refused = ['{"id": 9, "big": 123456789012345678901234567890}', '{"id": 10, "score": NaN}']
    blocks = ["\n".join(part).encode("utf-8") + b"\n" for part in (lines, refused)]

    def read_write() -> list[tuple[pd.DataFrame, bytes]]:
        return [(frame, drop_io.jsonl_bytes(frame)) for frame in map(drop_io.decode_jsonl, blocks)]

    fast = read_write()
    monkeypatch.setattr(formats, "orjson", None)  # the parser
    monkeypatch.setattr(writers, "orjson", None)  # the writer
    slow = read_write()
    for (fast_frame, fast_out), (slow_frame, slow_out) in zip(fast, slow):
        assert fast_frame.columns.tolist() == slow_frame.columns.tolist()
        for column in fast_frame.columns:
            assert [_as_json(v) for v in fast_frame[column]] == [_as_json(v) for v in slow_frame[column]], column
        # the same values; a number may be spelled differently (1e-7 and 1e-07)
        assert [json.loads(x) for x in fast_out.splitlines()] == [json.loads(x) for x in slow_out.splitlines()]
    written = [json.loads(line) for line in fast[1][1].decode("utf-8").splitlines()]
    assert written[0]["big"] == 123456789012345678901234567890 and written[1]["score"] is None
    last = json.loads(fast[0][1].decode("utf-8").splitlines()[8])
    assert {k: last[k] for k in json.loads(lines[8])} == json.loads(lines[8])  # other records' keys: null
