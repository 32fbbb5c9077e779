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


#: Cells that make cutting a CSV into blocks hard: separators, quotes and line breaks inside quoted values,
#: quotes inside unquoted ones, text after a closing quote, and plain ones.
AWKWARD_CELLS = ["plain", "", " spaced ", "Zürich", 'say ""hi""', "a,b", "two\nlines", "crlf\r\ninside", '5\'10"',
                 'x"y"z', "\t", "trailing\n", '""', '"', "end\r"]


def _awkward_csv(rng, sep: str) -> bytes:
    """A CSV/TSV text with awkward cells, blank lines, mixed line endings and sometimes no final line break."""
    def cell(value: str) -> str:
        if rng.random() < 0.15 and '"' not in value and "\n" not in value and "\r" not in value and sep not in value:
            return value + ('"tail' if rng.random() < 0.5 else "")  # unquoted, a quote inside is a plain character
        if any(c in value for c in (sep, '"', "\n", "\r")) or rng.random() < 0.3:
            return '"' + value.replace('"', '""') + '"' + ("rest" if rng.random() < 0.1 else "")
        return value

    lines = [sep.join(["id", "a", "", "b"])]
    for i in range(rng.randrange(1, 60)):
        lines.append(sep.join([str(i)] + [cell(rng.choice(AWKWARD_CELLS)) for _ in range(3)]))
        if rng.random() < 0.1:
            lines.append("")
    ending = rng.choice(["\n", "\r\n"])
    text = ending.join(lines) + (ending if rng.random() < 0.8 else "")
    return (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + text.encode("utf-8")


@pytest.mark.parametrize("sep", [",", "\t"])
def test_csv_cut_into_blocks_reads_exactly_as_the_whole_file(tmp_path, sep):
    """`smolclean apply` and the exported module cut a CSV/TSV into blocks of records that the workers parse
    on their own; the rows must be exactly those learning reads from the whole file, wherever the cuts fall."""
    import random

    from smolclean_dagster.core.drop_io import decode_batch, delimited_blocks, encoded_batches
    from smolclean_dagster.core.drops import iter_encoded_batches

    rng, compared = random.Random(15), 0
    suffix = ".tsv" if sep == "\t" else ".csv"
    for case in range(80):
        path = tmp_path / f"awkward{case}{suffix}"
        path.write_bytes(_awkward_csv(rng, sep))
        try:
            whole = read_drop(path)
        except DropReadError:  # a ragged row (a cell starting with a stray quote): refused when cut, too
            for rows in (1, 1000):
                with pytest.raises(ValueError):
                    [decode_batch(kind, data) for kind, data, _ in encoded_batches(path, rows)]
            continue
        for rows in (1, 2, 7, 1000):
            blocks = list(delimited_blocks(path, sep, rows))
            assert sum(n for _, n, _ in blocks) == len(whole), path.read_bytes()
            assert all(len(lines) == n for _, n, lines in blocks)
            for batches in ([(k, d) for k, d, _ in encoded_batches(path, rows)],
                            [(k, d) for k, d, _, _ in iter_encoded_batches(path, rows)]):
                frames = [decode_batch(kind, data) for kind, data in batches]
                joined = pd.concat(frames, ignore_index=True)
                assert list(joined.columns) == list(whole.columns)
                assert joined.to_numpy().tolist() == whole.to_numpy().tolist(), path.read_bytes()
        compared += 1
    assert compared >= 40
    assert list(whole.columns) == ["id", "a", "Unnamed: 2", "b"]


def test_a_quoted_value_of_50000_lines_is_cut_and_cleaned_whole(tmp_path):
    """A record whose quoted value spans 50,000 lines (a quote on each) comes out whole from the exported
    module; each line is looked at once, so this takes well under a second (benchmarks/csv_blocks.py), where
    joining and matching the record again on every line took minutes."""
    import subprocess
    import sys

    from smolclean_dagster.core.export import render_module
    from smolclean_dagster.core.registry import Registry

    value = "\n".join(f'line {i} says "hello", then more' for i in range(50_000))
    src, out = tmp_path / "long.csv", tmp_path / "out.csv"
    pd.DataFrame({"id": ["1", "2", "3"], "text": ["short", value, "end"], "tail": ["a", "b", "c"]}).to_csv(src, index=False)
    module = tmp_path / "clean_long.py"
    module.write_text(render_module(Registry(dataset="long")), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(module), str(src), str(out), "2"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    back = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert back.to_dict("list") == {"id": ["1", "2", "3"], "text": ["short", value, "end"], "tail": ["a", "b", "c"]}


def test_learning_reads_a_drop_as_the_exported_module_does_in_every_format(tmp_path):
    """Learning (`read_drop`) and the module's `__main__` (`drop_io`) read a drop through the same block
    reader: the same rows, columns and typed values, in batches or whole."""
    from smolclean_dagster.core.drop_io import decode_batch, encoded_batches

    records = [{"id": i, "name": f" n{i} ", "tags": ["a", "b"] if i % 2 else [], "ok": i % 3 == 0,
                "score": None if i % 4 == 0 else i / 3, **({"extra": {"k": i}} if i == 5 else {})} for i in range(7)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps(records), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "extra"} for r in records]),
                   tmp_path / "a.parquet")
    (tmp_path / "a.csv").write_text('id,note\n1,"a, b"\n2,"two\nlines"\n3,N/A\n4,\n', encoding="utf-8")
    (tmp_path / "a.tsv").write_text("id\tnote\n1\t x \n2\tnone\n", encoding="utf-8")
    for name in ("a.jsonl", "a.json", "a.parquet", "a.csv", "a.tsv"):
        path = tmp_path / name
        learned = read_drop(path)
        for rows in (1, 3, 1000):
            module = pd.concat([decode_batch(kind, data) for kind, data, _ in encoded_batches(path, rows)],
                               ignore_index=True)
            module = module.where(module.notna(), None) if name.endswith(("json", "jsonl")) else module
            assert list(module.columns) == list(learned.columns), name
            assert module.to_dict("list") == learned.to_dict("list"), (name, rows)
            streamed = pd.concat(list(iter_batches(path, rows)), ignore_index=True)
            streamed = streamed.where(streamed.notna(), None) if name.endswith(("json", "jsonl")) else streamed
            assert streamed.to_dict("list") == learned.to_dict("list"), (name, rows)
    assert read_drop(tmp_path / "a.jsonl")["extra"].tolist() == [None] * 5 + [{"k": 5}, None]
