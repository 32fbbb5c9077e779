"""CleaningFunction: one reviewed unit of cleaning code, and the facts read off its source."""

from __future__ import annotations

import ast
import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RuleSpec(BaseModel):
    """How a rules-made function was rendered: its template and the template's context (its constants).

    Kept so that consolidation can merge two functions of one rule on one column by merging their
    constants and rendering the template again, instead of guessing from code.
    """

    model_config = ConfigDict(frozen=True)

    template: str
    context: dict[str, Any]

    def names(self, value: str) -> bool:
        """Whether one of its tables holds an entry for `value`: a key of a mapping or an item of a list, written
        as the value or, for a table keyed by lower-cased text, as its lower-cased, whitespace-normalised text.

        Example:
            >>> rule = RuleSpec(template="t", context={"column": "state", "keep": ["ca"], "spellings": {"tx": "TX"}})
            >>> rule.names("TX"), rule.names("state")
            (True, False)
        """
        return any(_names_in(table, _forms(value)) for table in self.context.values())

    def without(self, values: set[str] | frozenset[str]) -> RuleSpec:
        """The same rule with the entries its tables hold for `values` taken out (see `names`): what it decided
        about those values is left to another function's tables, or to its own general rule. Settings (text and
        numbers outside tables) stay as they are.

        Example:
            >>> RuleSpec(template="t", context={"column": "state", "keep": ["ca", "Tx"]}).without({"ca"}).context
            {'column': 'state', 'keep': ['Tx']}
        """
        forms = frozenset().union(*(_forms(v) for v in values)) if values else frozenset()
        if not forms:
            return self
        return self.model_copy(update={"context": {k: _without(v, forms) for k, v in self.context.items()}})


def _forms(value: str) -> frozenset[str]:
    """How a table may hold `value`: as written, or lower-cased with its whitespace normalised (a table keyed by
    lower-cased text holds "ca" for "CA")."""
    return frozenset({value, " ".join(value.split()).casefold()})


def _named(key: object, forms: frozenset[str]) -> bool:
    # a key written in capitals is a spelling, not lower-cased text: "Boston" holds "Boston", never "BOSTON"
    return isinstance(key, str) and (key in forms or (key == key.casefold() and " ".join(key.split()) in forms))


def _names_in(table: object, forms: frozenset[str]) -> bool:
    if isinstance(table, dict):
        return any(_named(k, forms) or _names_in(v, forms) for k, v in table.items())
    if isinstance(table, list):
        return any(_named(item, forms) or _names_in(item, forms) for item in table)
    return False


def _without(table: object, forms: frozenset[str]) -> object:
    if isinstance(table, dict):
        return {k: _without(v, forms) for k, v in table.items() if not _named(k, forms)}
    if isinstance(table, list):
        return [_without(item, forms) for item in table if not _named(item, forms)]
    return table


class CleaningFunction(BaseModel):
    """One function `def name(df: pd.DataFrame) -> pd.DataFrame` with the imports it needs.

    `code` is the complete source: optional top-level `import` lines followed by exactly one top-level
    function whose docstring says what it fixes. `columns` lists the columns it touches.

    Example:
        >>> f = CleaningFunction.from_code('''
        ... def strip_name(df):
        ...     \"\"\"Strip whitespace around `name`.\"\"\"
        ...     df = df.copy()
        ...     df["name"] = df["name"].str.strip()
        ...     return df
        ... ''', columns=["name"])
        >>> f.name
        'strip_name'
    """

    model_config = ConfigDict(frozen=True)

    name: str
    code: str
    docstring: str = ""
    columns: tuple[str, ...] = Field(default_factory=tuple)
    rule: RuleSpec | None = None

    @classmethod
    def from_code(
        cls, code: str, *, columns: list[str] | tuple[str, ...] = (), rule: RuleSpec | None = None
    ) -> CleaningFunction:
        """Build a CleaningFunction from source, reading the name and docstring off the code.

        Raises SyntaxError when the code does not parse and ValueError when it has no top-level function;
        the sandbox gate gives the fuller, model-facing verdict.
        """
        code = code.strip("\n") + "\n"
        tree = ast.parse(code)
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        if not defs:
            raise ValueError("the code defines no top-level function")
        fn = defs[-1]
        return cls(name=fn.name, code=code, docstring=ast.get_docstring(fn) or "", columns=tuple(columns), rule=rule)

    def renamed(self, name: str) -> CleaningFunction:
        """The same function under another name (its `def` line changed to match).

        Example:
            >>> CleaningFunction.from_code("def fix_2(df):\\n    return df\\n").renamed("fix").code
            'def fix(df):\\n    return df\\n'
        """
        if name == self.name:
            return self
        return self.model_copy(update={"name": name, "code": self.code.replace(f"def {self.name}(", f"def {name}(", 1)})

    @property
    def concern(self) -> tuple | None:
        """What a rule-made function fixes and where: its template and its columns (None for code a model wrote).
        Two functions of one concern do one job: consolidation makes them one function, under one name."""
        return None if self.rule is None else (self.rule.template, self.columns)

    @property
    def code_hash(self) -> str:
        """A short content hash of the code, stable across runs."""
        return hashlib.sha256(self.code.encode()).hexdigest()[:12]

    @property
    def summary(self) -> str:
        """The first line of the docstring: what the function fixes, for prompts and reports."""
        return (self.docstring.strip().splitlines() or [self.name])[0]


def split_imports(code: str) -> tuple[list[str], str]:
    """Split a function's source into its top-level import lines and the rest (the function itself).

    Only top-level imports move: an import inside the function body stays where it is, so hoisting
    never changes what the function sees.
    """
    tree = ast.parse(code)
    lines = code.splitlines()
    imports: list[str] = []
    skip: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno or node.lineno
            imports.append("\n".join(lines[node.lineno - 1 : end]).strip())
            skip.update(range(node.lineno - 1, end))
    body = "\n".join(line for i, line in enumerate(lines) if i not in skip).strip("\n") + "\n"
    return imports, body


def constants_of(code: str) -> dict[str, str]:
    """The module-level constants a function's code defines beside it: name -> the source of its value.

    Example:
        >>> constants_of("CODES = {'a': 1}\\ndef f(df):\\n    return df\\n")
        {'CODES': "{'a': 1}"}
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    out[target.id] = ast.unparse(node.value)
    return out


def columns_in_code(code: str, columns: list[str] | tuple[str, ...]) -> list[str]:
    """The `columns` the code names in a string literal, in the order of `columns`. The entries of a table of
    values are values, not columns: "id" in {"id": "Indonesian"} does not name the column `id` (a key mapped to
    a table, {"city": {...}}, still may).

    Example:
        >>> columns_in_code("def f(df):\\n    return df.assign(city=df['city'].str.strip())\\n", ["id", "city"])
        ['city']
        >>> columns_in_code("LANGS = {'id': 'ind'}\\ndef f(df):\\n    return df.assign(lang=df['lang'].replace(LANGS))\\n",
        ...                 ["id", "lang"])
        ['lang']
    """
    tree = ast.parse(code)
    # a value table's entries: a text value, and a key mapped to one (a key mapped to a table may be a column)
    in_tables = {id(n) for d in ast.walk(tree) if isinstance(d, ast.Dict) for k, v in zip(d.keys, d.values)
                 if isinstance(v, ast.Constant) for n in (k, v) if n is not None}
    literals = {n.value for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in in_tables}
    return [str(c) for c in columns if str(c) in literals]


def kept_as_written(code: str, name: str, kept: dict[str, list[str]]) -> str:
    """`code` (one function `name`) as a function that runs it as it was, then gives back the cells of `kept`'s
    columns holding its values (as the function received them) their value: what a person's labelled rows show
    the function must not change, wherever it meets those values.

    Example:
        >>> code = 'import pandas as pd\\n\\n\\ndef f(df):\\n    return df.assign(a=df["a"].str.lower())\\n'
        >>> "KEPT = {'a': ['ACME']}" in kept_as_written(code, "f", {"a": ["ACME"]})
        True
    """
    node = next((n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if node is None or not node.body:
        raise ValueError(f"the code defines no function {name!r} to keep values of")
    lines = code.splitlines()
    head = "\n".join(lines[:node.lineno - 1]).rstrip("\n")
    body = "\n".join("    " + line if line.strip() else "" for line in lines[node.body[0].lineno - 1:node.end_lineno])
    summary = (ast.get_docstring(node) or name).split("\n\n")[0].replace("\n", " ").rstrip(".").replace('"', "'")
    kept = {column: sorted(set(values)) for column, values in sorted(kept.items()) if values}
    return "\n".join([
        ("" if "import pandas as pd" in head else "import pandas as pd\n") + head,
        "",
        "",
        f"def {name}(df: pd.DataFrame) -> pd.DataFrame:",
        f'    """{summary}; values the user\'s labelled rows show it must not change stay as written (KEPT)."""',
        f"    KEPT = {kept!r}  # column -> values kept as written: changing them broke a labelled cell",
        "",
        "    def as_learned(df):",
        body,
        "",
        "    out = as_learned(df)",
        "    if len(out) != len(df):",
        "        return out",
        "    out = out.copy(deep=False)",
        "    for column, values in KEPT.items():",
        "        if column in df.columns and column in out.columns:",
        "            held = df[column].isin(values).to_numpy()",
        "            if held.any():",
        "                cells = out[column].to_numpy(dtype=object, copy=True)",
        "                cells[held] = df[column].to_numpy(dtype=object)[held]",
        "                out[column] = pd.Series(cells, index=out.index, dtype=object)",
        "    return out",
        "",
    ])
