"""The static gate in front of the sandbox: refuse out-of-policy code early, with messages the model can act on.

This is a first gate, not the security boundary (the kernel layers in `lockdown.py` are): code such as
`pd.io.common.get_handle(...)` hidden behind aliases can slip past any static check. Its job is to keep
honest code inside the envelope and to explain, line by line, what to change.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

from .errors import GateRejected

ALLOWED_IMPORTS = frozenset({
    "pandas", "numpy", "re", "math", "datetime", "decimal", "json", "string", "collections", "itertools",
    "functools", "statistics", "unicodedata", "zoneinfo", "typing", "html",
})

#: Modules the allowed ones import from C at call time, through the caller's `__import__`
#: (`datetime.strftime` imports `time`, `datetime.strptime` imports `_strptime`): the runtime import guard
#: admits them so allowed code works in full; the static gate still refuses them in the code itself.
INDIRECT_IMPORTS = frozenset({"time", "_strptime", "calendar", "locale"})

#: The one import from outside the allow-list, in exported modules: `from types import MappingProxyType`, which
#: `read_only` (core/frozen.py) makes their constants read-only with.
READ_ONLY_IMPORT = ("types", "MappingProxyType")
#: The call an exported module wraps its constants in: `NAME = read_only({...})`.
READ_ONLY_CALL = "read_only"

_NO_FILES = "functions may not read or write files; work only on the `df` argument"
_NO_DYNAMIC = "no dynamic code; write the logic out in the function"
_NO_INTROSPECTION = "no reflection on the interpreter; use plain attribute access like `df.col` or `df[\"col\"]`"
FORBIDDEN_BUILTINS = {
    "open": _NO_FILES,
    "eval": _NO_DYNAMIC, "exec": _NO_DYNAMIC, "compile": _NO_DYNAMIC,
    "getattr": _NO_INTROSPECTION, "setattr": _NO_INTROSPECTION, "delattr": _NO_INTROSPECTION,
    "globals": _NO_INTROSPECTION, "locals": _NO_INTROSPECTION, "vars": _NO_INTROSPECTION,
    "__import__": "write `import x` at the top with a module from the allow-list",
    "input": "functions run unattended; take everything from the `df` argument",
    "breakpoint": "functions run unattended; remove the debugging call",
    "exit": "return the DataFrame instead of stopping the interpreter",
    "quit": "return the DataFrame instead of stopping the interpreter",
    "help": "functions run unattended; remove the call",
}

_INTERNALS = "it reaches interpreter internals; use the public pandas/numpy API"
_OTHER_MODULE = "it reaches a module outside the allow-list through another module"
_NOT_ALLOWED_ATTRS = {
    **dict.fromkeys(("gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "ag_frame", "ag_code",
                     "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame", "tb_next",
                     "co_code", "func_globals"), _INTERNALS),
    **dict.fromkeys(("sys", "os", "modules", "subprocess", "builtins", "importlib", "socket", "shutil",
                     "pathlib", "ctypes", "ctypeslib", "mmap", "signal", "posix", "pickle", "marshal",
                     "tempfile", "glob", "f2py", "distutils", "system", "popen"), _OTHER_MODULE),
    **dict.fromkeys(("load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
                     "fromfile", "tofile", "memmap", "open_memmap", "fromregex", "DataSource",
                     "to_pickle", "to_parquet", "to_feather", "to_hdf", "to_sql", "to_excel", "to_stata",
                     "to_orc", "to_clipboard", "to_gbq", "to_iceberg", "ExcelWriter", "ExcelFile", "HDFStore", "io"),
                    _NO_FILES),
    "eval": "write the expression in Python instead of a string",
    "set_option": "pandas options are global; pass the setting to the call instead",
}
# These return text when called without a path; given a path (or used as a value) they write files.
_TEXT_WRITERS = frozenset({"to_csv", "to_json", "to_html", "to_xml", "to_latex", "to_markdown", "to_string"})
_PATH_KEYWORDS = frozenset({"path_or_buf", "buf", "path", "excel_writer"})
_BANNED_NODES = {
    ast.ClassDef: "class definitions are not allowed; use functions",
    ast.AsyncFunctionDef: "async functions are not allowed",
    ast.AsyncFor: "async loops are not allowed", ast.AsyncWith: "async with is not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "generators are not allowed; return a DataFrame",
    ast.YieldFrom: "generators are not allowed; return a DataFrame",
    ast.Global: "`global` is not allowed; keep state inside the function",
    ast.Nonlocal: "`nonlocal` is not allowed; return values instead",
}
_MODULE_DUNDERS = frozenset({"__all__", "__version__", "__author__"})
_DUNDER_TEXT = re.compile(r"__\w+__|\{[^{}]*\.\s*_")
# Common aliases whose missing import is the model's most frequent slip.
_IMPORT_HINTS = {"pd": "import pandas as pd", "np": "import numpy as np", "re": "import re",
                 "math": "import math", "json": "import json", "datetime": "import datetime"}
#: What runs in the sandbox at most: the functions with their learned tables (compacted past a few hundred
#: entries) and smolclean's own helpers the module carries (reading the whole drop's counts, read-only constants).
MAX_CODE_CHARS = 240_000
#: Room for an exported module's `__main__` block (smolclean's own file reading and writing, never run in the
#: sandbox) on top of MAX_CODE_CHARS.
MAIN_BLOCK_CHARS = 50_000


@dataclass(frozen=True)
class Program:
    """Code that passed the gate: the source to execute (main-guard blocks blanked) and the entry to call."""

    source: str
    entry: str


def check_function(code: str) -> None:
    """Gate one candidate: allow-listed imports and exactly one top-level function. Raises GateRejected.

    Example:
        >>> check_function("import pandas as pd\\ndef f(df: pd.DataFrame) -> pd.DataFrame:\\n    return df.dropna()\\n")
        >>> check_function("def f(df):\\n    return open('x')\\n")
        Traceback (most recent call last):
        ...
        smolclean_dagster.core.sandbox.errors.GateRejected: the code was rejected before running; ...
    """
    prepare(code, module=False)


def check_module(code: str) -> None:
    """Gate an exported module: docstring, imports, functions, simple constants, an unscreened main block.

    The `if __name__ == "__main__":` block is not screened because it never runs in the sandbox.

    Example:
        >>> check_module('\"\"\"Cleaning.\"\"\"\\nimport pandas as pd\\ndef clean(df):\\n    return df\\n'
        ...              'FUNCTIONS = [clean]\\nif __name__ == "__main__":\\n    import sys\\n')
    """
    prepare(code, module=True)


@lru_cache(maxsize=512)
def prepare(code: str, *, module: bool, entry: str | None = None) -> Program:
    """Gate the code and decide what to call: `entry`, else the only function (or `clean` for a module).

    The verdict depends on the code alone, so a passed one is kept: learning runs the same functions and
    modules many times (code that is rejected is screened again, and rejected again).
    """
    if len(code) > MAX_CODE_CHARS + (MAIN_BLOCK_CHARS if module else 0):
        raise GateRejected([f"the code is {len(code)} characters long; keep it under {MAX_CODE_CHARS}"])
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        shown = f": `{exc.text.strip()}`" if exc.text and exc.text.strip() else ""
        raise GateRejected([f"line {exc.lineno}: the code does not parse: {exc.msg}{shown}"]) from None
    reasons: list[str] = []
    screened, main_blocks = _split_top_level(tree, module, reasons)
    functions = [node for node in screened if isinstance(node, ast.FunctionDef)]
    if not module:
        _check_single_function(functions, reasons)
    lines = code.encode().splitlines(keepends=True)  # as the parser counts them; offsets are in bytes
    aliases = [(node.lineno, _screen_once(lines, node, reasons)) for node in screened]
    _check_imported_aliases(aliases, reasons)
    names = [fn.name for fn in functions]
    if module or len(names) == 1:  # otherwise the missing or extra functions are already reported
        entry = entry or ("clean" if module else names[0])
        if entry not in names:
            reasons.append(f"the code defines no top-level function `{entry}`; define `def {entry}(df): ...`")
    if reasons:
        raise GateRejected(sorted(dict.fromkeys(reasons), key=_line_of))
    source = _blank_lines(code, main_blocks)
    if len(source.rstrip()) > MAX_CODE_CHARS:  # what runs in the sandbox: a module's `__main__` block does not
        raise GateRejected([f"the code is {len(source.rstrip())} characters long; keep it under {MAX_CODE_CHARS}"])
    return Program(source=source, entry=entry)


def _line_of(reason: str) -> int:
    match = re.match(r"line (\d+):", reason)
    return int(match.group(1)) if match else 0


def _split_top_level(tree: ast.Module, module: bool, reasons: list[str]) -> tuple[list[ast.stmt], list[ast.If]]:
    """Sort top-level statements into screened ones and main-guard blocks; reject everything else."""
    screened, main_blocks = [], []
    for index, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
            screened.append(node)
        elif _is_docstring(node) and (index == 0 or not module):
            continue
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_simple_assignment(node, reasons, module=module):
            screened.append(node)
        elif module and _is_main_guard(node):
            main_blocks.append(node)
        elif module:
            reasons.append(f"line {node.lineno}: only a docstring, imports, functions, simple constants and an "
                           f"`if __name__ == \"__main__\":` block may appear at the top level of the module")
        else:
            reasons.append(f"line {node.lineno}: only imports, constants (`NAME = ` a literal dict, set, list, "
                           f"tuple, string or number, or `re.compile(\"literal\")`) and one function definition may "
                           f"appear at the top level; move this statement into the function")
    return screened, main_blocks


def _check_single_function(functions: list[ast.FunctionDef], reasons: list[str]) -> None:
    if not functions:
        reasons.append("the code defines no function; define exactly one "
                       "`def name(df: pd.DataFrame) -> pd.DataFrame`")
        return
    for extra in functions[1:]:
        reasons.append(f"line {extra.lineno}: a second top-level function `{extra.name}` is defined; define "
                       f"exactly one, with helpers nested inside it")
    fn = functions[0]
    if not fn.args.posonlyargs and not fn.args.args:
        reasons.append(f"line {fn.lineno}: `{fn.name}` must take the DataFrame as its first argument: "
                       f"`def {fn.name}(df: pd.DataFrame) -> pd.DataFrame`")


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_simple_assignment(node: ast.Assign | ast.AnnAssign, reasons: list[str], *, module: bool) -> bool:
    """A constant: plain names on the left; on the right a literal (dict, set, list, tuple, string, number,
    nested as deep as needed) or `re.compile` of a literal; in a module also names (`FUNCTIONS = [f, g]`)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if not all(isinstance(t, ast.Name) for t in targets) or node.value is None:
        return False
    if not (_is_simple(node.value, names=module) or _is_compiled_pattern(node.value)
            or (module and _is_read_only_constant(node.value))):
        return False
    for target in targets:
        if target.id.startswith("__") and target.id not in _MODULE_DUNDERS:
            reasons.append(f"line {node.lineno}: assigning `{target.id}` is not allowed; only "
                           f"{', '.join(sorted(_MODULE_DUNDERS))} may be set at module level")
    return True


def _is_simple(value: ast.expr, *, names: bool = True) -> bool:
    if isinstance(value, ast.Constant) or (names and isinstance(value, ast.Name)):
        return True
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_simple(v, names=names) for v in value.elts)
    if isinstance(value, ast.Dict):
        return all(k is not None and _is_simple(k, names=names) for k in value.keys) and \
            all(_is_simple(v, names=names) for v in value.values)
    return isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant)


def _is_read_only_constant(value: ast.expr) -> bool:
    """`read_only(literal)`: how an exported module writes a constant (see core/frozen.py)."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == READ_ONLY_CALL
            and len(value.args) == 1 and not value.keywords and _is_simple(value.args[0], names=False))


def _is_compiled_pattern(value: ast.expr) -> bool:
    """`re.compile("literal")`, optionally with flags such as `re.IGNORECASE | re.VERBOSE`."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "compile"
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "re"):
        return False
    if not value.args or not (isinstance(value.args[0], ast.Constant) and isinstance(value.args[0].value, (str, bytes))):
        return False
    flags = list(value.args[1:]) + [k.value for k in value.keywords if k.arg == "flags"]
    if len(value.args) > 2 or any(k.arg != "flags" for k in value.keywords):
        return False
    return all(_is_flag(f) for f in flags)


def _is_flag(node: ast.expr) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_flag(node.left) and _is_flag(node.right)
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re" \
        and node.attr.isupper()


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` with no else (an else branch would run inside the sandbox)."""
    if not isinstance(node, ast.If) or node.orelse or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


@dataclass(frozen=True)
class _Aliases:
    """The usual import aliases (`pd`, `np`: `_IMPORT_HINTS`) one top-level statement binds, and those it reads,
    each with the first line reading it counted from the statement's first line (so the facts hold wherever the
    statement stands in a module)."""

    bound: frozenset[str]
    read: tuple[tuple[str, int], ...]


#: Digests of top-level statements that passed the screen, with their `_Aliases`. A module is its functions put
#: together, and learning gates many modules that differ in one function; a statement's verdict and aliases depend
#: on its text alone, and walking its nodes again (thousands in a learned table) is most of a module's gating.
_PASSED: OrderedDict[bytes, _Aliases] = OrderedDict()
PASSED_KEPT = 4096


def _screen_once(lines: list[bytes], root: ast.stmt, reasons: list[str]) -> _Aliases:
    """`_screen`, skipped for a statement whose very text passed before (a failing one is screened again, so its
    reasons carry this code's line numbers); and the statement's `_Aliases`, kept with its verdict."""
    digest = None
    if root.end_lineno is not None and root.end_col_offset is not None:
        first, last = root.lineno - 1, root.end_lineno - 1
        if first == last:
            text = lines[first][root.col_offset:root.end_col_offset]
        else:
            text = lines[first][root.col_offset:] + b"".join(lines[first + 1:last]) + lines[last][:root.end_col_offset]
        digest = hashlib.blake2b(type(root).__name__.encode() + b"\0" + text, digest_size=16).digest()
    aliases = _PASSED.get(digest) if digest is not None else None
    if aliases is None:
        found: list[str] = []
        _screen(root, found)
        reasons.extend(found)
        aliases = _aliases_of(root)
        if digest is not None and not found:
            _PASSED[digest] = aliases
            if len(_PASSED) > PASSED_KEPT:
                _PASSED.popitem(last=False)
    return aliases


def _screen(root: ast.stmt, reasons: list[str]) -> None:
    """Walk one top-level statement and record every forbidden construct with its line."""
    docstrings = {id(fn.body[0].value) for fn in ast.walk(root)
                  if isinstance(fn, ast.FunctionDef) and _is_docstring(fn.body[0])}
    direct_calls = {id(node.func) for node in ast.walk(root) if isinstance(node, ast.Call)}

    def bad(node: ast.AST, message: str) -> None:
        reasons.append(f"line {getattr(node, 'lineno', root.lineno)}: {message}")

    for node in ast.walk(root):
        if type(node) in _BANNED_NODES:
            bad(node, _BANNED_NODES[type(node)])
        elif isinstance(node, ast.FunctionDef) and node.decorator_list:
            bad(node, f"decorators are not allowed on `{node.name}`")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _screen_import(node, bad)
        elif isinstance(node, ast.Name):
            _screen_name(node, root, bad)
        elif isinstance(node, ast.Attribute):
            _screen_attribute(node, id(node) in direct_calls, bad)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_WRITERS:
            if node.args or any(k.arg in _PATH_KEYWORDS or k.arg is None for k in node.keywords):
                bad(node, f"`.{node.func.attr}(path)` writes a file: {_NO_FILES}; call it without a path to get text")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if _DUNDER_TEXT.search(node.value):
                bad(node, "strings may not name dunder or private attributes (like `{0.__class__}`): "
                          + _INTERNALS)


def _screen_import(node: ast.Import | ast.ImportFrom, bad) -> None:
    allowed = ", ".join(sorted(ALLOWED_IMPORTS))
    if isinstance(node, ast.ImportFrom):
        if node.level:
            bad(node, "relative imports are not allowed")
            return
        modules, imported = [node.module or ""], [alias.name for alias in node.names]
    else:
        modules, imported = [alias.name for alias in node.names], []
    if isinstance(node, ast.ImportFrom) and (node.module, imported) == (READ_ONLY_IMPORT[0], [READ_ONLY_IMPORT[1]]):
        return
    for module in modules:
        if module.split(".")[0] not in ALLOWED_IMPORTS:
            bad(node, f"`import {module}` is not allowed; import only from: {allowed}")
            continue
        for part in module.split(".")[1:] + imported:
            if part == "*":
                bad(node, f"`from {module} import *` is not allowed; import the names you use")
            elif part.startswith("_") or part in _NOT_ALLOWED_ATTRS or part.startswith("read_"):
                reason = _NOT_ALLOWED_ATTRS.get(part, _NO_FILES if part.startswith("read_") else _INTERNALS)
                bad(node, f"importing `{part}` from `{module}` is not allowed: {reason}")


def _screen_name(node: ast.Name, root: ast.stmt, bad) -> None:
    if node.id in FORBIDDEN_BUILTINS:
        bad(node, f"`{node.id}` is not allowed: {FORBIDDEN_BUILTINS[node.id]}")
    elif node.id.startswith("__") and not (isinstance(root, (ast.Assign, ast.AnnAssign)) and node.id in _MODULE_DUNDERS):
        bad(node, f"`{node.id}` is not allowed: {_INTERNALS}")


def _screen_attribute(node: ast.Attribute, called: bool, bad) -> None:
    attr = node.attr
    if attr.startswith("_"):
        bad(node, f"`.{attr}` is not allowed: private and dunder attributes are off limits; {_INTERNALS}")
    elif attr in _NOT_ALLOWED_ATTRS:
        bad(node, f"`.{attr}` is not allowed: {_NOT_ALLOWED_ATTRS[attr]}")
    elif attr.startswith("read_"):
        bad(node, f"`.{attr}(...)` is not allowed: {_NO_FILES}")
    elif attr in _TEXT_WRITERS and not called:
        bad(node, f"`.{attr}` may only be called directly, without a path: {_NO_FILES}")


def _aliases_of(root: ast.stmt) -> _Aliases:
    """Which of the usual import aliases one top-level statement binds (by import, argument, function name or
    assignment) and reads, in the order `ast.walk` meets them."""
    bound: set[str] = set()
    read: dict[str, int] = {}
    for node in ast.walk(root):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read.setdefault(node.id, node.lineno - root.lineno)
        elif isinstance(node, ast.Name):
            bound.add(node.id)
    return _Aliases(frozenset(bound & _IMPORT_HINTS.keys()),
                    tuple((alias, offset) for alias, offset in read.items() if alias in _IMPORT_HINTS))


def _check_imported_aliases(aliases: list[tuple[int, _Aliases]], reasons: list[str]) -> None:
    """Point at `pd.` or `np.` used without the import that defines them (`aliases`: each top-level statement's
    first line and aliases)."""
    bound = set().union(*(statement.bound for _, statement in aliases))
    used: dict[str, int] = {}
    for first, statement in aliases:
        for alias, offset in statement.read:
            used.setdefault(alias, first + offset)
    for alias, line in used.items():
        if alias not in bound:
            reasons.append(f"line {line}: `{alias}` is used but never imported; add `{_IMPORT_HINTS[alias]}` "
                           f"at the top")


def _blank_lines(code: str, blocks: list[ast.If]) -> str:
    """Replace the lines of main-guard blocks with empty lines, keeping every other line number."""
    if not blocks:
        return code
    lines = code.splitlines(keepends=True)
    for block in blocks:
        for index in range(block.lineno - 1, block.end_lineno):
            lines[index] = "\n"
    return "".join(lines)
