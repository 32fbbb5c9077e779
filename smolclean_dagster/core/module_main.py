"""The exported module's `__main__`: smolclean's own reading and writing (`drop_io`), pasted in, then the command line.

The module must run where only pandas and pyarrow are installed, and give the same output as `smolclean
apply`, so it carries `drop_io`'s code rather than importing it. The files are pasted in the order they
build on one another, without their docstrings and their imports of one another, their own imports
gathered at the top; of their definitions only those the command line reaches (`clean_file`, and what that
calls) are kept, so the module holds no code it never runs. The same files always give the same text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import drop_io

#: `drop_io`'s files in the order they build on one another.
PASTED_FILES = ("formats", "blocks", "output_files", "writers", "parallel")
#: What the command line below uses of them.
_ENTRY_NAMES = ("clean_file", "BATCH_ROWS")

_HEAD = """

if __name__ == "__main__":
    # Cleans a file batch by batch, in memory bounded by the batch, on every core:
    #     python {filename} IN OUT [BATCH_ROWS [WORKERS]]
    # IN: .csv .tsv .jsonl .json .parquet; OUT: .csv .tsv .jsonl .parquet, never IN itself (exit code 2);
    # BATCH_ROWS: rows per batch (10000);
    # WORKERS: processes cleaning batches side by side (one per core).
    # The reading and writing below is smolclean's own (smolclean_dagster/core/drop_io/), copied here so this
    # file needs only pandas and pyarrow, and gives the same output as `smolclean apply`.
"""

_TAIL = """
    import sys as _sys

    if len(_sys.argv) not in (3, 4, 5) or not all(_a.isdigit() and int(_a) > 0 for _a in _sys.argv[3:]):
        _sys.exit("usage: python {filename} IN OUT [BATCH_ROWS [WORKERS]]")
    try:
        _rows_in, _rows_out = clean_file(clean, _sys.argv[1], _sys.argv[2], int(_sys.argv[3]) if _sys.argv[3:] else BATCH_ROWS,
                                         int(_sys.argv[4]) if _sys.argv[4:] else None{counts})
    except (OSError, ValueError) as _exc:
        print(f"{{_sys.argv[1]}}: {{_exc}}", file=_sys.stderr)
        _sys.exit(2)
    print(f"cleaned {{_rows_in}} rows of {{_sys.argv[1]}} -> {{_sys.argv[2]}} ({{_rows_out}} rows)")
"""


@dataclass(frozen=True)
class _Definition:
    """One top-level statement of a pasted file: the names it binds, the names it reads, its text."""

    file: str
    binds: frozenset[str]
    reads: frozenset[str]
    text: str
    is_import: bool


@lru_cache(maxsize=64)
def main_block(filename: str, *, counts: bool = False) -> str:
    """The module's `__main__` block for a module saved as `filename` (made once per name: it is pasted from
    drop_io's files, which do not change while the process runs). `counts`: the module's functions read the
    whole drop, which is counted before any batch is cleaned (core/drop_counts.py).

    Example:
        >>> "def clean_file(" in main_block("clean_customers.py")
        True
    """
    definitions = [d for name in PASTED_FILES for d in _definitions(name)]
    kept = _reached(definitions, _ENTRY_NAMES)
    imports = sorted({d.text for d in kept if d.is_import}, key=lambda line: (line.startswith("from "), line))
    parts, pasted = ["\n".join(imports)], set()
    for name in PASTED_FILES:
        texts = [d.text for d in kept if d.file == name and not d.is_import and d.text not in pasted]
        pasted.update(texts)
        if texts:
            parts.append(f"# drop_io/{name}.py\n# {_summary(name)}\n" + "\n\n\n".join(texts))
    body = "\n\n\n".join(parts)
    indented = "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())
    counted = ",\n                                         counts=(DROP_GROUPS, drop_counts, add_counts)" if counts else ""
    return _HEAD.format(filename=filename) + indented + "\n" + _TAIL.format(filename=filename, counts=counted)


def _source(name: str) -> str:
    return (Path(drop_io.__file__).parent / f"{name}.py").read_text(encoding="utf-8")


def _summary(name: str) -> str:
    """The first line of `drop_io/{name}.py`'s docstring."""
    return (ast.get_docstring(ast.parse(_source(name))) or "").splitlines()[0]


def _definitions(name: str) -> list[_Definition]:
    """The top-level statements of `drop_io/{name}.py`, each with the comment lines just above it."""
    source = _source(name)
    tree = ast.parse(source)
    lines = source.splitlines()
    out, previous_end = [], 0
    for i, node in enumerate(tree.body):
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            previous_end = node.end_lineno
            continue  # the file's docstring: the module has its own
        while start - 1 > previous_end and lines[start - 2].lstrip().startswith("#"):
            start -= 1  # a comment just above belongs to the statement
        text, previous_end = "\n".join(lines[start - 1:node.end_lineno]), node.end_lineno
        if isinstance(node, ast.ImportFrom) and node.level:
            continue  # a sibling's names: pasted beside it
        binds = _bound_names(node)
        reads = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        out.append(_Definition(name, binds, reads, text, isinstance(node, (ast.Import, ast.ImportFrom))))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and node not in tree.body:
            raise RuntimeError(f"drop_io/{name}.py line {node.lineno}: import siblings at the top of the file, "
                               "where pasting it into the module can leave the import out")
    return out


def _bound_names(node: ast.stmt) -> frozenset[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return frozenset({node.name})
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return frozenset(names)


def _reached(definitions: list[_Definition], entry: tuple[str, ...]) -> list[_Definition]:
    """The definitions that the names `entry` need, directly or through one another, in their order."""
    by_name: dict[str, list[_Definition]] = {}
    for d in definitions:
        for name in d.binds:
            others = by_name.setdefault(name, [])
            if others and not d.is_import and any(o.text != d.text for o in others):
                raise RuntimeError(f"{name!r} is defined in drop_io/{others[0].file}.py and drop_io/{d.file}.py; "
                                   "pasted together, one would replace the other: rename one")
            others.append(d)
    wanted, seen = list(entry), set()
    kept: set[int] = set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        for d in by_name.get(name, ()):
            if id(d) not in kept:
                kept.add(id(d))
                wanted.extend(d.reads)
    return [d for d in definitions if id(d) in kept]
