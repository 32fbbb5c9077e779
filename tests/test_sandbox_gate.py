"""The static gate: normal pandas code passes; each forbidden construct is refused with its line number."""

from __future__ import annotations

import pytest

from smolclean_dagster.core.errors import SmolcleanError
from smolclean_dagster.sandbox import GateRejected, SandboxError, check_function, check_module

GOOD_FUNCTION = '''
import re
import numpy as np
import pandas as pd
from collections import Counter


def normalise_city(df: pd.DataFrame) -> pd.DataFrame:
    """Title-case `city`, collapse inner whitespace and blank out null tokens."""
    df = df.copy()
    city = df["city"].astype("string").str.strip().str.replace(r"\\s+", " ", regex=True).str.title()
    df["city"] = city.where(~city.isin(["N/A", "Null"]), np.nan)
    counts = Counter(df["city"].dropna())
    df["city_rank"] = df["city"].map(lambda c: counts.get(c, 0))
    spend = pd.to_numeric(df["spend"].str.replace(r"[$,]", "", regex=True), errors="coerce")
    df["spend"] = spend.round(2)
    summary = df.to_json(orient="records")  # text only: no path
    assert isinstance(summary, str)
    return df.drop_duplicates(subset=["id"]).sort_values("id")
'''

GOOD_MODULE = '''"""Cleaning module for people.csv, exported by smolclean."""
import pandas as pd

VERSION = "1.2.0"
__all__ = ["clean", "strip_names"]


def strip_names(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around `name`."""
    df = df.copy()
    df["name"] = df["name"].str.strip()
    return df


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Apply every function in order."""
    for fn in FUNCTIONS:
        df = fn(df)
    return df


FUNCTIONS = [strip_names]

if __name__ == "__main__":
    import sys
    clean(pd.read_csv(sys.argv[1])).to_csv(sys.argv[2], index=False)
'''


def reasons_of(code: str, *, module: bool = False) -> list[str]:
    with pytest.raises(GateRejected) as info:
        (check_module if module else check_function)(code)
    return info.value.reasons


def test_a_normal_pandas_function_passes():
    check_function(GOOD_FUNCTION)


def test_an_exported_module_passes_and_its_main_block_is_not_screened():
    check_module(GOOD_MODULE)


def test_gate_rejected_is_a_smolclean_error_listing_every_reason():
    with pytest.raises(GateRejected) as info:
        check_function("def f(df):\n    open('x')\n    return eval('df')\n")
    err = info.value
    assert isinstance(err, SandboxError) and isinstance(err, SmolcleanError)
    assert len(err.reasons) == 2
    assert "line 2: `open` is not allowed" in str(err) and "line 3: `eval` is not allowed" in str(err)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    return open('/etc/passwd').read()", "`open` is not allowed: functions may not read or write files"),
        ("    return eval('df')", "`eval` is not allowed"),
        ("    return exec('x = 1')", "`exec` is not allowed"),
        ("    return compile('1', 'x', 'eval')", "`compile` is not allowed"),
        ("    return getattr(df, 'shape')", "`getattr` is not allowed"),
        ("    setattr(df, 'x', 1)", "`setattr` is not allowed"),
        ("    delattr(df, 'x')", "`delattr` is not allowed"),
        ("    return globals()", "`globals` is not allowed"),
        ("    return locals()", "`locals` is not allowed"),
        ("    return vars(df)", "`vars` is not allowed"),
        ("    return __import__('os')", "`__import__` is not allowed"),
        ("    return input()", "`input` is not allowed"),
        ("    breakpoint()", "`breakpoint` is not allowed"),
        ("    return df.__class__", "`.__class__` is not allowed"),
        ("    return df._mgr", "`._mgr` is not allowed"),
        ("    return pd.read_csv('/etc/passwd')", "`.read_csv(...)` is not allowed"),
        ("    return pd.io.common.get_handle('/etc/passwd', 'r')", "`.io` is not allowed"),
        ("    df.to_csv('/tmp/out.csv')", "`.to_csv(path)` writes a file"),
        ("    df.to_json(path_or_buf='/tmp/out.json')", "`.to_json(path)` writes a file"),
        ("    df.to_parquet('/tmp/out.parquet')", "`.to_parquet` is not allowed"),
        ("    df.to_pickle('/tmp/out.pkl')", "`.to_pickle` is not allowed"),
        ("    df.to_excel('/tmp/out.xlsx')", "`.to_excel` is not allowed"),
        ("    return df.pipe(lambda d: d.to_csv)", "`.to_csv` may only be called directly"),
        ("    return np.load('/tmp/x.npy')", "`.load` is not allowed"),
        ("    np.save('/tmp/x.npy', df.values)", "`.save` is not allowed"),
        ("    return np.fromfile('/etc/passwd')", "`.fromfile` is not allowed"),
        ("    return np.memmap('/tmp/x')", "`.memmap` is not allowed"),
        ("    return np.ctypeslib.ctypes", "`.ctypeslib` is not allowed"),
        ("    return '{0.__class__}'.format(df)", "strings may not name dunder or private attributes"),
        ("    global STATE", "`global` is not allowed"),
        ("    import os", "`import os` is not allowed"),
        ("    import subprocess", "`import subprocess` is not allowed"),
        ("    from pandas import read_csv", "importing `read_csv` from `pandas` is not allowed"),
        ("    return pd.set_option('mode.copy_on_write', False)", "`.set_option` is not allowed"),
    ],
)
def test_each_forbidden_thing_is_rejected_with_its_line(body, expected):
    code = f"import pandas as pd\nimport numpy as np\n\ndef f(df):\n{body}\n    return df\n"
    reasons = reasons_of(code)
    assert any(r.startswith("line 5: ") and expected in r for r in reasons), reasons


def test_imports_outside_the_allow_list_are_rejected_at_top_level():
    reasons = reasons_of("import os\nimport pandas as pd\nfrom socket import socket\n\ndef f(df):\n    return df\n")
    assert reasons[0].startswith("line 1: `import os` is not allowed; import only from:")
    assert "pandas" in reasons[0]
    assert reasons[1].startswith("line 3: `import socket` is not allowed")


def test_code_that_does_not_parse_names_the_line_and_the_error():
    reasons = reasons_of("import pandas as pd\n\ndef f(df)\n    return df\n")
    assert reasons == ["line 3: the code does not parse: expected ':': `def f(df)`"]


def test_exactly_one_top_level_function_is_required():
    assert "defines no function" in reasons_of("import pandas as pd\n")[0]
    two = reasons_of("def f(df):\n    return df\n\ndef g(df):\n    return df\n")
    assert two == ["line 4: a second top-level function `g` is defined; define exactly one, with helpers nested "
                   "inside it"]


def test_top_level_statements_other_than_imports_and_literal_constants_are_rejected_in_a_function():
    reasons = reasons_of("import pandas as pd\nLOOKUP = pd.DataFrame()\n\ndef f(df):\n    return df\n")
    assert reasons[0].startswith("line 2: only imports, constants (`NAME = ` a literal dict")
    assert reasons_of("X = [v for v in 'ab']\ndef f(df):\n    return df\n")[0].startswith("line 1: only imports, constants")
    assert reasons_of("import re\nP = re.compile(some_name)\ndef f(df):\n    return df\n")[0].startswith("line 2:")
    check_function("import re\nP = re.compile('a+', re.I | re.X)\nT = {'a': (1, -2.5)}\ndef f(df):\n    return df\n")


def test_the_function_must_take_the_frame():
    assert "must take the DataFrame as its first argument" in reasons_of("def f():\n    return 1\n")[0]


def test_a_missing_pandas_import_is_pointed_out():
    reasons = reasons_of("def f(df):\n    return pd.to_numeric(df['x'])\n")
    assert reasons == ["line 2: `pd` is used but never imported; add `import pandas as pd` at the top"]


def test_module_rejects_statements_that_are_not_constants():
    code = GOOD_MODULE.replace('VERSION = "1.2.0"', "LOOKUP = pd.read_csv('lookup.csv')")
    reasons = reasons_of(code, module=True)
    assert reasons[0].startswith("line 4: only a docstring, imports, functions, simple constants")


def test_module_functions_are_each_screened():
    code = GOOD_MODULE.replace('df["name"].str.strip()', 'open("/etc/passwd").read()')
    assert any(r.startswith("line 11: `open` is not allowed") for r in reasons_of(code, module=True))


def test_module_main_guard_with_an_else_branch_is_rejected():
    assert reasons_of(GOOD_MODULE + "else:\n    clean(None)\n", module=True)


def test_module_may_not_rebind_dunder_names():
    code = GOOD_MODULE.replace('VERSION = "1.2.0"', '__name__ = "__main__"')
    assert any("assigning `__name__` is not allowed" in r for r in reasons_of(code, module=True))


def test_an_exported_modules_main_block_does_not_count_towards_the_size_limit():
    from smolclean_dagster.core.export import render_module
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry
    from smolclean_dagster.core.sandbox.gate import MAX_CODE_CHARS, check_module

    table = "{" + ", ".join(f"'v{i:06d}': 'V{i:06d}'" for i in range(8_800)) + "}"
    code = f'def fix(df):\n    """Map values of `v`."""\n    TABLE = {table}\n    return df.assign(v=df["v"].map(TABLE))\n'
    registry = Registry(dataset="big").with_entry(RegistryEntry(
        function=CleaningFunction.from_code(code, columns=["v"]),
        provenance=Provenance(drop="d.csv", chunk="c1", step=1, analyst="rules")))
    source = render_module(registry)
    functions_only = source[: source.index('if __name__ == "__main__":')]
    assert len(functions_only) < MAX_CODE_CHARS < len(source)  # the functions fit; with the `__main__` block they would not
    check_module(source)
