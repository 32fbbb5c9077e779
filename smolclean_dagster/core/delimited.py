"""Checking CSV/TSV drops as a whole, and saying exactly what is wrong with a broken one.

Learning and cleaning parse delimited files the same way: cut into blocks of whole records
(`drop_io.blocks`), each parsed by pyarrow's CSV reader with every column as text and nothing turned into
null (`drop_io.formats`). Where that parser is lenient in a way that would lose or invent data, this module
is strict and says where:

- a row with more or fewer fields than the header is an error naming its line (pandas fills short rows
  with empty cells);
- a quoted value that is never closed (a file cut off in the middle of a value) is an error naming the
  line it starts on (pyarrow would read the rest of the file into that one cell);
- a header naming a column twice is an error (pandas renames the second one "a.1"); an empty header
  cell gets pandas' name "Unnamed: N", the same on every path.

Finding the line of a problem takes another pass over the file with Python's csv module, so it is done
only once something is known to be wrong.
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterator
from pathlib import Path

from .errors import DropReadError

#: The longest value the csv module reads here (pyarrow's blocks are indexed with 32-bit integers).
MAX_BLOCK_BYTES = 1 << 30


def delimited_header(path: Path, sep: str) -> list[str]:
    """The column names of a CSV/TSV file as the first non-blank row gives them, checked.

    Empty names become "Unnamed: N" (N = position from 0, as pandas names them); a name given twice
    raises DropReadError, since one of the two columns would otherwise be renamed or lost.
    """
    with _large_fields(), path.open(encoding="utf-8-sig", newline="") as fh:
        header = next((row for row in csv.reader(fh, delimiter=sep) if row), None)
    if header is None or not any(name.strip() for name in header):
        raise DropReadError(f"{path}: the file is empty (no header row)")
    names = [name if name else f"Unnamed: {i}" for i, name in enumerate(header)]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise DropReadError(
                f"{path}: the header names column {name!r} twice (columns {seen[name] + 1} and {i + 1}); "
                "rename one so that every column has its own name"
            )
        seen[name] = i
    return names


def check_quotes_closed(path: Path, sep: str) -> None:
    """Raise DropReadError naming the line where a quoted value starts that is never closed."""
    unclosed = unclosed_quote_line(path, sep)
    if unclosed is not None:
        raise DropReadError(
            f"{path}: the quoted value starting on line {unclosed} is never closed (is the file cut off?); "
            "close the quote or export the file again"
        )


def unclosed_quote_line(path: Path, sep: str) -> int | None:
    """The line where a quoted value starts that is never closed, or None.

    Every well-formed quoted value holds an even number of quote characters, so a file with an even
    number of them needs no closer look; an odd number also comes from quotes inside unquoted values
    (`5'10"`), so then the file is parsed to find out.
    """
    if _quote_count(path) % 2 == 0:
        return None
    tail_from, line = None, 0
    with _large_fields(), path.open(encoding="utf-8-sig", newline="", errors="replace") as fh:
        reader = csv.reader(fh, delimiter=sep)
        for _ in reader:
            tail_from, line = line + 1, reader.line_num
    if tail_from is None:
        return None
    # The last record is where an unclosed quote swallowed the rest of the file: parse it strictly.
    with _large_fields(), path.open(encoding="utf-8-sig", newline="", errors="replace") as fh:
        for _ in range(tail_from - 1):
            fh.readline()
        try:
            for _ in csv.reader(fh, delimiter=sep, strict=True):
                pass
        except csv.Error as exc:
            return tail_from if "unexpected end of data" in str(exc) else None
    return None


def describe_problem(path: Path, sep: str) -> str | None:
    """What is wrong with a CSV/TSV file and on which line: bad UTF-8 or a row of the wrong width."""
    bad = utf8_error(path)
    if bad is not None:
        line, offset = bad
        return f"line {line} is not valid UTF-8 (byte {offset}); re-encode the file as UTF-8"
    with _large_fields(), path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=sep)
        width, end = None, 0
        for row in reader:
            start, end = end + 1, reader.line_num
            if not row:
                continue
            if width is None:
                width = len(row)
            elif len(row) != width:
                return (
                    f"cannot parse as {'TSV' if sep == chr(9) else 'CSV'}: line {start} has {len(row)} field(s), "
                    f"the header has {width}; fix that row (a missing or "
                    f"extra {'tab' if sep == chr(9) else 'comma'}, or a value with an unquoted separator)"
                )
    return None


def utf8_error(path: Path) -> tuple[int, int] | None:
    """(line, byte offset) of the first bytes in the file that are not UTF-8, or None."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            pending = len(decoder.getstate()[0])  # the start of a character cut off by the last block
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                return _line_at(path, offset - pending + exc.start)
            offset += len(block)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return _line_at(path, offset - len(decoder.getstate()[0]))
    return None


def _line_at(path: Path, pos: int) -> tuple[int, int]:
    with path.open("rb") as fh:
        return fh.read(max(0, pos)).count(b"\n") + 1, max(0, pos)


def _quote_count(path: Path) -> int:
    count = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            count += block.count(b'"')
    return count


@contextlib.contextmanager
def _large_fields() -> Iterator[None]:
    """Let the csv module read values as long as pyarrow does (its default limit is 128 KiB)."""
    previous = csv.field_size_limit(MAX_BLOCK_BYTES)
    try:
        yield
    finally:
        csv.field_size_limit(previous)
