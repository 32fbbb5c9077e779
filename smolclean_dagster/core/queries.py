"""Read-only queries: the model asks a question of the drop and reads the answer in its next step.

A reply may carry `<query>df[df["city"].str.len() < 4]["city"].value_counts()</query>`: one pandas
expression over `df`, the drop's rows the analyst may see (every row but the held-out ones), as cleaned so far. It is
untrusted code like any function: wrapped in a function, screened by the same code gate, run in the sandbox
on a copy of the rows, and its result (a frame, series or scalar) comes back as text cut to a budget. A query
that fails is the model's fault and comes back as the error instead.

The answer is pandas' text of the result, made so that no two values look alike: every row writes its whole
index label (a key repeated on several rows is written on each, not left blank under the first), an empty
text reads `EMPTY` ("(empty)") and a text with spaces around it is written in quotes (`' Chicago'`), as
labels and as values. The prompt says so (`prompts/analysis.yaml`).

Example:
    >>> query_code('df["city"].value_counts()').splitlines()[4]
    '    result = (df["city"].value_counts())'
"""

from __future__ import annotations

import ast

import pandas as pd

from .validate import CodeRunner

#: Characters of a query's answer shown to the model, and its expression's length at most.
RESULT_BUDGET = 3000
MAX_QUERY_CHARS = 500
#: Rows of a frame or series result rendered before the text is cut.
RESULT_ROWS = 60
#: How an empty text reads in an answer, where pandas would leave a blank.
EMPTY = "(empty)"


class QueryError(ValueError):
    """The query is not one short expression: the model's fault, shown back to it."""


def query_code(expression: str) -> str:
    """The query as a function the sandbox can run: its result rendered as text in a one-cell frame."""
    expression = expression.strip()
    if not expression:
        raise QueryError("the <query> is empty; write one pandas expression over `df`")
    if len(expression) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(expression)} characters; keep it to one expression of at most "
                         f"{MAX_QUERY_CHARS}")
    try:
        ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise QueryError(f"the query is not one Python expression ({exc.msg}); write e.g. "
                         "df[\"city\"].value_counts().tail(20)") from exc
    return (
        "import pandas as pd\n\n\n"
        "def query(df: pd.DataFrame) -> pd.DataFrame:\n"
        f"    result = ({expression})\n"
        "\n"
        "    def shown(value):\n"
        "        if isinstance(value, str) and (value == '' or value != value.strip()):\n"
        f"            return {EMPTY!r} if value == '' else repr(value)\n"
        "        return value\n"
        "\n"
        "    def label(key):\n"
        "        return tuple(shown(k) for k in key) if isinstance(key, tuple) else shown(key)\n"
        "\n"
        "    if isinstance(result, (pd.DataFrame, pd.Series)):\n"
        f"        head, rows = result.head({RESULT_ROWS}).copy(), len(result)\n"
        "        head.index = head.index.map(label)\n"
        "        if isinstance(head, pd.DataFrame):\n"
        "            head.columns = head.columns.map(label)\n"
        "        head = head.map(shown)\n"
        "        if isinstance(head, pd.Series):  # one line per row, unpadded: one long value would pad them all\n"
        "            keys = [k if isinstance(k, tuple) else (k,) for k in head.index]\n"
        "            names = [str(n) for n in head.index.names if n is not None]\n"
        "            lines = ['  '.join(names)] if names else []  # the index's names, as pandas heads a series\n"
        "            text = '\\n'.join(lines + ['  '.join(map(str, (*k, v))) for k, v in zip(keys, head)])\n"
        "        else:\n"
        "            with pd.option_context('display.multi_sparse', False):\n"
        "                text = head.to_string()\n"
        "    else:\n"
        "        text, rows = repr(result), 0\n"
        f"    if len(text) > {RESULT_BUDGET}:\n"
        f"        text = text[:{RESULT_BUDGET}] + '\\n(cut at {RESULT_BUDGET:,} of ' + str(len(text)) + ' characters)'\n"
        f"    if rows > {RESULT_ROWS}:\n"
        f"        text += '\\n(' + str(rows) + ' rows in all; the first {RESULT_ROWS} shown)'\n"
        "    return pd.DataFrame({'result': [text]})\n"
    )


def run_query(expression: str, rows: pd.DataFrame, runner: CodeRunner, *, timeout_s: float = 10.0) -> str:
    """The query's answer as text (at most `RESULT_BUDGET` characters). Raises QueryError or the sandbox's
    errors (the gate's rejection, a failure inside the expression, a timeout): all the model's fault."""
    out = runner.run(query_code(expression), rows, entry="query", timeout_s=timeout_s)
    return str(out["result"].iloc[0])
