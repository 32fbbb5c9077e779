"""Reading drops raw and cutting chunks."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from smolclean_dagster.core.drops import iter_batches, make_chunks, read_drop
from smolclean_dagster.core.errors import DropReadError


def test_csv_cells_stay_exactly_as_written(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text('name,age,note\n  Ann ,N/A,""\nBob,,none\n007,12.50,"a, b"\n', encoding="utf-8")
    df = read_drop(path)
    assert df.to_dict("list") == {
        "name": ["  Ann ", "Bob", "007"],
        "age": ["N/A", "", "12.50"],
        "note": ["", "none", "a, b"],
    }


def test_tsv_reads_as_text_and_jsonl_json_parquet_keep_their_types(tmp_path):
    (tmp_path / "a.tsv").write_text("x\ty\n1\tN/A\n", encoding="utf-8")
    assert read_drop(tmp_path / "a.tsv").to_dict("list") == {"x": ["1"], "y": ["N/A"]}

    (tmp_path / "b.jsonl").write_text(
        json.dumps({"id": 1, "tags": ["a", "b"], "ok": True}) + "\n" + json.dumps({"id": 2, "extra": None}) + "\n"
    )
    b = read_drop(tmp_path / "b.jsonl")
    assert list(b.columns) == ["id", "tags", "ok", "extra"]
    assert b["id"].tolist() == [1, 2]
    assert b["tags"][0] == ["a", "b"]
    assert b["ok"][0] is True and b["ok"][1] is None

    (tmp_path / "c.json").write_text(json.dumps([{"v": 1.5}, {"v": "x"}]))
    assert read_drop(tmp_path / "c.json")["v"].tolist() == [1.5, "x"]

    pq.write_table(pa.table({"n": [1, None], "s": ["a", "b"], "l": [[1, 2], None]}), tmp_path / "d.parquet")
    d = read_drop(tmp_path / "d.parquet")
    assert d["n"].tolist() == [1, None] and d["s"].tolist() == ["a", "b"] and d["l"].tolist() == [[1, 2], None]
    assert type(d["n"][0]) is int


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.csv", b"", "empty"),
        ("bad.jsonl", b'{"a": 1}\n{"a": \n', "line 2"),
        ("obj.json", b'{"a": 1}', "expected a JSON array"),
        ("latin.csv", "a\né\n".encode("latin-1"), "UTF-8"),
        ("ragged.csv", b"a,b\n1,2\n1,2,3\n", "cannot parse"),
        ("data.xlsx", b"PK", "unknown file extension"),
    ],
)
def test_unreadable_drops_name_the_file_and_reason(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DropReadError) as err:
        read_drop(path)
    assert name in str(err.value) and expected in str(err.value)


def test_chunk_ids_are_stable_and_cover_every_row():
    a = make_chunks("customers.csv", 120, 50)
    b = make_chunks("customers.csv", 120, 50)
    assert [c.id for c in a] == [c.id for c in b]
    assert [(c.start, c.stop) for c in a] == [(0, 50), (50, 100), (100, 120)]
    assert len({c.id for c in a}) == 3
    assert a[0].id != make_chunks("orders.csv", 120, 50)[0].id


def test_batches_stream_every_row_in_order_as_text(tmp_path):
    path = tmp_path / "big.csv"
    df = pd.DataFrame({"i": [str(i) for i in range(2500)], "v": ["N/A" if i % 7 == 0 else f" {i} " for i in range(2500)]})
    df.to_csv(path, index=False)
    batches = list(iter_batches(path, 1000))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    joined = pd.concat(batches, ignore_index=True)
    assert joined["i"].tolist() == df["i"].tolist()
    assert joined["v"].tolist() == df["v"].tolist()
