"""A corpus of malformed drops, generated at test time (no binary fixtures in the repository).

`write_corpus(folder)` writes every case into `folder` and returns them. Each case says what reading
it must give: a DropReadError whose message holds `expect` (and `line N` when the problem has a line),
or, for files that are odd but valid, the number of rows read. docs/reliability.md ("Bad input")
describes the same classes in the user's words; keep the two in step.
"""

from __future__ import annotations

import gzip
import json
import random
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

GOOD_ROWS = ["id,city", "1,Oslo", "2, Bergen", "3,oslo"]


@dataclass(frozen=True)
class BadDrop:
    """One malformed (or odd but valid) drop and what reading it must give."""

    name: str
    kind: str  # the class of bad input, as docs/reliability.md names it
    write: Callable[[Path], None]
    expect: str | None = None  # part of the DropReadError message; None: the file is read
    line: int | None = None  # the line the message must name
    rows: int | None = None  # rows read, for files that are read
    columns: tuple[str, ...] | None = None  # columns read, where they matter

    @property
    def readable(self) -> bool:
        return self.expect is None


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def _text(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text, encoding="utf-8", newline="")


def _lines(*lines: str) -> Callable[[Path], None]:
    return _text("\n".join(lines) + "\n")


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = zlib.compress(b"\x00\xff\x00\x00" * 4)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(8).randbytes(4096))


def _deep_latin1(path: Path) -> None:
    # the bad byte comes after 20,000 good lines (~0.4 MB): past any parser's first buffer
    lines = [GOOD_ROWS[0]] + [f"{i},Oslo" for i in range(1, 20_000)]
    path.write_bytes(("\n".join(lines) + "\n").encode() + "20000,Z\xfcrich\n".encode("latin-1"))


def _huge_cell(path: Path) -> None:
    path.write_text("id,note\n1,short\n2," + "x" * (10 * 1024 * 1024) + "\n3,short\n", encoding="utf-8")


def _wide(path: Path) -> None:
    header = ",".join(f"c{i}" for i in range(5000))
    rows = [",".join(f"{r}-{i}" for i in range(5000)) for r in range(3)]
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")


def _parquet(table: pa.Table, cut: bool = False) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        pq.write_table(table, path)
        if cut:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])

    return write


def _folder(path: Path) -> None:
    path.mkdir()


CORPUS: tuple[BadDrop, ...] = (
    BadDrop("empty.csv", "empty file", _bytes(b""), "empty"),
    BadDrop("blank_lines.csv", "empty file", _bytes(b"\n\n   \n\n"), "empty"),
    BadDrop("header_only.csv", "header only", _lines("id,city"), rows=0, columns=("id", "city")),
    BadDrop("ragged_long.csv", "ragged rows", _lines(*GOOD_ROWS[:3], "3,Oslo,extra", "4,Oslo"), "3 field(s), the header has 2", line=4),
    BadDrop("ragged_short.csv", "ragged rows", _lines(*GOOD_ROWS[:2], "2", "3,Oslo"), "1 field(s), the header has 2", line=3),
    BadDrop(
        "ragged_after_multiline.csv", "ragged rows",
        _lines("id,note", '1,"two', 'lines"', "2,fine", "3,too,many"), "3 field(s)", line=5,
    ),
    BadDrop("ragged.tsv", "ragged rows", _lines("id\tcity", "1\tOslo", "2\tOslo\tx"), "cannot parse as TSV", line=3),
    BadDrop("unclosed_quote.csv", "cut off in a quoted value", _lines(*GOOD_ROWS[:2], '2,"Ber', "3,Oslo"), "never closed", line=3),
    BadDrop("duplicate_header.csv", "header names a column twice", _lines("id,city,id", "1,Oslo,2"), "'id' twice"),
    BadDrop(
        "empty_header_name.csv", "header with an empty name", _lines(",city", "0,Oslo", "1,Bergen"),
        rows=2, columns=("Unnamed: 0", "city"),
    ),
    BadDrop("latin1.csv", "not UTF-8", _bytes("id,city\n1,Oslo\n2,Z\xfcrich\n".encode("latin-1")), "not valid UTF-8", line=3),
    BadDrop("latin1_deep.csv", "not UTF-8", _deep_latin1, "not valid UTF-8", line=20_001),
    BadDrop("utf16_bom.csv", "UTF-16", _bytes("id,city\n1,Oslo\n".encode("utf-16")), "UTF-16"),
    BadDrop("utf8_bom.csv", "UTF-8 with a byte-order mark", _bytes(b"\xef\xbb\xbf" + "\n".join(GOOD_ROWS).encode() + b"\n"),
            rows=3, columns=("id", "city")),
    BadDrop("crlf.csv", "Windows line endings", _bytes("\r\n".join(GOOD_ROWS).encode() + b"\r\n"), rows=3, columns=("id", "city")),
    BadDrop("image.csv", "binary file", _bytes(_png()), "binary file"),
    BadDrop("random.csv", "binary file", _random_bytes, "binary file"),
    BadDrop("compressed.csv", "binary file", lambda p: p.write_bytes(gzip.compress(b"id,city\n1,Oslo\n", mtime=0)), "gzip"),
    BadDrop("workbook.csv", "binary file", _bytes(b"PK\x03\x04" + b"\x14\x00" * 20), "zip archive"),
    BadDrop("huge_cell.csv", "a 10 MB cell", _huge_cell, rows=3),
    BadDrop("wide.csv", "5,000 columns", _wide, rows=3),
    BadDrop("object.json", "JSON that is not an array", _text(json.dumps({"id": 1, "city": "Oslo"})), "expected a JSON array"),
    BadDrop("numbers.json", "JSON that is not an array", _text("[1, 2, 3]"), "is a JSON number, expected an object"),
    BadDrop("cut.json", "JSON cut off", _text('[{"id": 1, "city": "Oslo"},\n {"id": 2, "ci'), "cut off", line=2),
    BadDrop("empty_array.json", "JSON without records", _text("[]"), "no records"),
    BadDrop(
        "broken_line.jsonl", "JSONL with a broken line",
        _lines(json.dumps({"id": 1}), json.dumps({"id": 2}), '{"id": 3,', json.dumps({"id": 4})), "not valid JSON", line=3,
    ),
    BadDrop("list_line.jsonl", "JSONL with a broken line", _lines(json.dumps({"id": 1}), "", "[1, 2]"), "is a JSON array", line=3),
    BadDrop(
        "blob.parquet", "Parquet with an unsupported type",
        _parquet(pa.table({"id": [1, 2], "blob": pa.array([b"\x00\x01", b"\xff"], pa.binary())})), "'blob' holds raw bytes",
    ),
    BadDrop("cut.parquet", "Parquet cut off", _parquet(pa.table({"id": list(range(100))}), cut=True), "cannot read as parquet"),
    BadDrop("not_parquet.parquet", "Parquet cut off", _bytes(b"id,city\n1,Oslo\n"), "cannot read as parquet"),
    BadDrop("export.xlsx", "unknown extension", _bytes(b"PK\x03\x04"), "unknown file extension '.xlsx'"),
    BadDrop("README", "unknown extension", _text("not data"), "unknown file extension ''"),
    BadDrop("folder.csv", "a folder", _folder, "is a folder"),
)


def write_corpus(folder: Path) -> list[BadDrop]:
    """Write every case of the corpus into `folder` (created) and return them."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in CORPUS:
        case.write(folder / case.name)
    return list(CORPUS)


def write_good(path: Path, rows: int = 40) -> Path:
    """A small valid CSV with whitespace and case dirt in `city`, the drop that must go on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cities = [" Oslo", "oslo", "Bergen ", "BERGEN"]
    path.write_text("id,city\n" + "".join(f"{i},{cities[i % 4]}\n" for i in range(rows)), encoding="utf-8")
    return path
