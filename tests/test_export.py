"""The exported module: readable, byte-identical on re-export, runnable on its own."""

import subprocess
import sys

import pandas as pd

from smolclean_dagster.core.export import render_module, write_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry

STRIP = '''import re


def strip_city(df):
    """Strip surrounding whitespace and collapse inner runs of spaces in `city`."""
    df = df.copy()
    df["city"] = df["city"].map(lambda v: re.sub(r"\\s+", " ", v).strip() if isinstance(v, str) else v)
    return df
'''

NULLS = '''def null_tokens_age(df):
    """Turn null tokens in `age` into real nulls."""
    df = df.copy()
    df["age"] = df["age"].where(~df["age"].isin(["N/A", "none"]), None)
    return df
'''


def registry() -> Registry:
    reg = Registry(dataset="people")
    for code, cols in ((STRIP, ["city"]), (NULLS, ["age"])):
        reg = reg.with_entry(
            RegistryEntry(
                function=CleaningFunction.from_code(code, columns=cols),
                provenance=Provenance(drop="people.csv", chunk="c1", step=1, analyst="rules"),
            )
        )
    return reg


def test_module_has_header_imports_functions_in_order_and_clean():
    src = render_module(registry())
    assert src.startswith('"""Cleaning module for dataset \'people\'')
    assert f"\nRegistry revision: {registry().version}\n" in src  # the registry's counter, not an approved version
    assert src.index("import pandas as pd") < src.index("def strip_city")
    assert src.count("\nimport re\n") == 1  # once among the module's imports (the reader's own are in `__main__`)
    assert src.index("def strip_city") < src.index("def null_tokens_age") < src.index("def clean(")
    assert "FUNCTIONS = [strip_city, null_tokens_age]" in src


def test_the_module_imports_nothing_from_smolclean():
    """The module's reader and writer are pasted in, so it runs where only pandas and pyarrow are installed."""
    import ast

    tree = ast.parse(render_module(registry()))
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m.startswith("smolclean")]
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
    assert {"pandas", "pyarrow", "pyarrow.parquet"} <= set(imported)


def test_reexporting_an_unchanged_registry_is_byte_identical(tmp_path):
    reg = registry()
    path = write_module(reg, tmp_path)
    first = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    reloaded = Registry.model_validate_json(reg.model_dump_json())
    assert write_module(reloaded, tmp_path).read_bytes() == first
    assert path.stat().st_mtime_ns == mtime


def test_module_cleans_a_file_in_a_fresh_interpreter_and_keeps_every_row(tmp_path):
    path = write_module(registry(), tmp_path)
    src = tmp_path / "in.csv"
    src.write_text("city,age\n  New   York ,N/A\nBoston,41\n,none\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    proc = subprocess.run([sys.executable, "-I", str(path), str(src), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert cleaned["city"].tolist() == ["New York", "Boston", ""]
    assert cleaned["age"].tolist() == ["", "41", ""]
    assert len(cleaned) == 3
