"""A drop cut into blocks of bytes, each a batch that `formats.decode_batch` parses on its own.

CSV/TSV and JSONL are cut into blocks of whole records as written (the process that cuts them never parses
a value), so memory is bounded by the batch; Parquet is read row group by row group. A JSON array is one
value, so it is read whole (keep JSON drops under a few hundred MB, or export them as JSONL) and handed on
as blocks of JSONL lines.
"""

import codecs
import json
import os
import re

from .formats import INPUT_SUFFIXES, arrow_stream

#: Rows per batch by default, for `smolclean apply` and the module's `__main__` alike.
BATCH_ROWS = 10_000
#: The first bytes of files that are no text drop, and what to say of them.
BINARY_STARTS = {
    b"\x1f\x8b": "is gzip-compressed; decompress it first",
    b"PK\x03\x04": "is a zip archive (an Excel workbook?); export the sheet as CSV",
    b"PAR1": "is a Parquet file; give it the extension .parquet",
    b"%PDF": "is a PDF document, not data",
}


def check_text(path, fmt):
    """Raise ValueError for a text drop (`fmt` csv, tsv, jsonl or json) that is no UTF-8 text: a binary file,
    UTF-16 or UTF-32; and for a CSV/TSV without even a header row. `smolclean apply` and the module's
    `__main__` refuse the same files with the same words."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise ValueError("the file is UTF-32 text (it starts with a byte-order mark); save it as UTF-8")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ValueError("the file is UTF-16 text (it starts with a byte-order mark); save it as UTF-8")
    for magic, what in BINARY_STARTS.items():
        if head.startswith(magic):
            raise ValueError(f"the file {what}")
    nul = head.find(b"\x00")
    if nul >= 0:
        raise ValueError(f"byte {nul} is a NUL byte: this is a binary file (or UTF-16 text without a byte-order "
                         f"mark), not {fmt.upper()} text; export it as UTF-8 {fmt.upper()}")
    if fmt in ("csv", "tsv") and not head.strip():
        raise ValueError("the file is empty (no header row)")


def encoded_batches(path, batch_rows=BATCH_ROWS):
    """A drop in batches of bytes that `decode_batch` turns into frames, as (kind, bytes, line numbers):
    JSONL as its lines ("jsonl", with each line's number), CSV/TSV as the header and whole records as
    written ("csv"/"tsv", see `delimited_blocks`), Parquet as Arrow streams of its row groups' batches
    ("table"), a JSON array (read whole) as JSONL lines."""
    path = os.fspath(path)
    fmt = INPUT_SUFFIXES.get(os.path.splitext(path)[1].lower())
    if fmt in ("csv", "tsv", "jsonl", "json"):
        check_text(path, fmt)
    if fmt in ("csv", "tsv"):
        for block, _, lines in delimited_blocks(path, "\t" if fmt == "tsv" else ",", batch_rows):
            yield fmt, block, lines
    elif fmt == "jsonl":
        for block, numbers in jsonl_blocks(path, batch_rows):
            yield "jsonl", block, numbers
    elif fmt == "json":
        with open(path, encoding="utf-8-sig") as fh:
            records = json.load(fh)
        for block in json_array_blocks(records, batch_rows):
            yield "jsonl", block, None
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=batch_rows):
            yield "table", arrow_stream(batch), None
    else:
        raise ValueError(f"{path}: cannot read this file type; use {', '.join(sorted(INPUT_SUFFIXES))}")


def json_array_blocks(records, batch_rows=BATCH_ROWS):
    """The records of a JSON array (read whole) as blocks of `batch_rows` JSONL lines."""
    for start in range(0, len(records), batch_rows):
        lines = [json.dumps(record, ensure_ascii=False) for record in records[start:start + batch_rows]]
        yield ("\n".join(lines) + "\n").encode("utf-8")


def jsonl_blocks(path, batch_rows=BATCH_ROWS):
    """The non-blank lines of a JSONL file in blocks of `batch_rows` lines, as (bytes, their line numbers: a
    range, or a list where blank lines fall between); a leading byte-order mark is dropped."""
    with open(path, "rb") as fh:
        block, numbers = bytearray(), []
        for number, line in enumerate(fh, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if line.strip():
                block += line if line.endswith(b"\n") else line + b"\n"
                numbers.append(number)
                if len(numbers) == batch_rows:
                    yield bytes(block), _compact(numbers)
                    block, numbers = bytearray(), []
        if numbers:
            yield bytes(block), _compact(numbers)


def delimited_blocks(path, sep, batch_rows=BATCH_ROWS):
    """A CSV/TSV file in blocks of bytes that pyarrow's CSV reader parses on their own, as (block, records,
    the line each record starts on): each block is the header record, then up to `batch_rows` records
    exactly as written; the lines are a range, or a list where blank lines or line breaks inside quotes
    fall between.

    Records end where the reader ends them: at a line break outside quotes. A value is quoted when its
    field starts with a quote; `""` inside is a quote, and a quote anywhere else is a plain character
    (`5'10"`). Blank lines are left out (the reader skips them) and so is a leading byte-order mark.
    Only lines holding a quote are looked at closely, and each line once (a quoted value over many lines
    costs in proportion to its size), so splitting costs little beside parsing.
    """
    record, rest = _record_pattern(sep), _record_pattern(sep, inside_quotes=True)
    header, parts, starts, pending = None, [], [], []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.endswith(b"\n"):
                line += b"\n"
            if pending:  # inside a quoted value that holds line breaks: it can only end on a line with a quote
                pending.append(line)
                if b'"' not in line or not rest.fullmatch(line):
                    continue
                line, start, pending = b"".join(pending), number - len(pending) + 1, []
            elif b'"' in line and not record.fullmatch(line):
                pending = [line]
                continue
            else:
                start = number
            if not line.strip(b"\r\n"):
                continue
            if header is None:
                header = line
                continue
            parts.append(line)
            starts.append(start)
            if len(parts) == batch_rows:
                yield header + b"".join(parts), len(parts), _compact(starts)
                parts, starts = [], []
    if pending:  # a quote never closed: the reader says what is wrong with it
        if header is None:
            raise ValueError(f"{path}: a quoted name in the header is never closed")
        parts.append(b"".join(pending))
        starts.append(number - len(pending) + 1)
    if parts:
        yield header + b"".join(parts), len(parts), _compact(starts)


def _compact(numbers):
    """Ascending line numbers as a range where they follow one another, else the list itself."""
    return range(numbers[0], numbers[-1] + 1) if numbers[-1] - numbers[0] == len(numbers) - 1 else numbers


def _record_pattern(sep, inside_quotes=False):
    """A regular expression matching one whole CSV/TSV record (its line break included); `inside_quotes`: the
    rest of a record from inside a quoted value (a line that closes the value and ends the record).

    The quantifiers are possessive, so the match never backtracks: it fails exactly where a quoted value
    runs past the line break."""
    s = re.escape(sep.encode())
    tail = rb'(?:[^"' + s + rb'\n][^' + s + rb'\n]*+)?'  # text after a closing quote is kept as written
    field = rb'"(?:[^"]++|"")*+"' + tail + rb'|(?!")[^' + s + rb'\n]*+'
    first = rb'(?:[^"]++|"")*+"' + tail if inside_quotes else rb"(?:" + field + rb")"
    return re.compile(first + rb"(?:" + s + rb"(?:" + field + rb"))*+\n")
