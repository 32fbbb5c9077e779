"""Typed values in and out: a drop read in blocks, and cleaned batches written, the same way on every path.

Learning (`drops.read_drop`), `smolclean apply` and the exported module's `__main__` read drops with this
code, and the last two write with it: the export pastes these files into the module (`module_main`), so the
module imports nothing from smolclean and gives the same output as `smolclean apply` for the same drop. Each
file therefore imports only the standard library, pandas, pyarrow (and orjson when installed) and its
siblings, and loads pandas and pyarrow where a frame or an Arrow table is made, not when it is loaded.

One file per concern, in the order they build on one another:
- `formats.py`: what each format reads as; a block of bytes parsed into a frame (`decode_batch`).
- `blocks.py`: a drop cut into blocks of whole records, as bytes (`encoded_batches`).
- `output_files.py`: never writing over the input; temporary names until an output is complete.
- `writers.py`: a cleaned frame as the output file's bytes (`encode_batch`), appended in order (`BatchWriter`).
- `parallel.py`: a drop cleaned batch by batch on every core (`clean_file`, the module's `__main__`).

A batch travels as bytes on both sides of the cleaning, so `smolclean apply`'s process only cuts the drop
and appends what its workers wrote.
"""

from .blocks import BATCH_ROWS, delimited_blocks, encoded_batches, json_array_blocks, jsonl_blocks
from .formats import (INPUT_SUFFIXES, JsonlError, arrow_frame, arrow_stream, decode_batch, decode_jsonl, json_frame,
                      json_kind, parse_json_lines)
from .output_files import OutputIsInput, check_output, remove_stale_temporaries, temporary_path
from .parallel import clean_file
from .writers import BatchWriter, cell_text, encode_batch, jsonl_bytes, output_kind, plain_value

__all__ = [
    "BATCH_ROWS", "INPUT_SUFFIXES", "BatchWriter", "JsonlError", "OutputIsInput", "arrow_frame", "arrow_stream",
    "cell_text", "check_output", "clean_file", "decode_batch", "decode_jsonl", "delimited_blocks", "encode_batch",
    "encoded_batches", "json_array_blocks", "json_frame", "json_kind", "jsonl_blocks", "jsonl_bytes", "output_kind",
    "parse_json_lines", "plain_value", "remove_stale_temporaries", "temporary_path",
]
