"""A messy patient-records drop and the module a capable model writes for it, for `benchmarks/speed.py`.

- `write_patients(path, rows=..., size_mb=...)`: JSONL (typed values: `age` a number, `allergies` a list,
  `insured` a boolean) or CSV (all text), 18 fields with the usual dirt: padding, case variants, dates in
  three formats, phones in five, state names and codes, zips that lost a zero or gained ".0", blood
  types and insurers spelled several ways.
- `module_source()`: an exported cleaning module (rendered by smolclean's own export, with its `__main__`)
  of nine functions written the way a model writes them when asked to vectorise: mapping tables, regexes,
  date parsing, a whitespace pass over every text column, per-value work done once per distinct value.
- `python benchmarks/patients.py records IN OUT`: the same logic record at a time, one dict per row (json or
  csv in, the same format out), as a record-by-record cleaning library runs it.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

FIELDS = ["patient_id", "first_name", "last_name", "gender", "dob", "age", "phone", "email", "street", "city",
          "state", "zip", "blood_type", "insurer", "insured", "admission_date", "allergies", "notes"]

STATES = {"california": "CA", "calif.": "CA", "ca": "CA", "texas": "TX", "tex.": "TX", "tx": "TX", "new york": "NY",
          "n.y.": "NY", "ny": "NY", "florida": "FL", "fla.": "FL", "fl": "FL", "ohio": "OH", "oh": "OH"}
BLOOD = {"a+": "A+", "apos": "A+", "apositive": "A+", "a-": "A-", "aneg": "A-", "anegative": "A-", "b+": "B+",
         "bpos": "B+", "b-": "B-", "bneg": "B-", "o+": "O+", "opos": "O+", "opositive": "O+", "o-": "O-",
         "oneg": "O-", "ab+": "AB+", "abpos": "AB+", "ab-": "AB-", "abneg": "AB-"}
INSURERS = {"aetna": "Aetna", "aetna inc.": "Aetna", "aetna inc": "Aetna", "blue cross": "Blue Cross Blue Shield",
            "bcbs": "Blue Cross Blue Shield", "blue cross blue shield": "Blue Cross Blue Shield",
            "united": "UnitedHealthcare", "unitedhealthcare": "UnitedHealthcare", "uhc": "UnitedHealthcare",
            "cigna": "Cigna", "cigna corp": "Cigna", "humana": "Humana"}
GENDERS = {"m": "M", "male": "M", "f": "F", "female": "F", "x": "X", "other": "X"}
DATE_FORMATS = ["%Y-%m-%d", "%m/%d/%Y", "%B %d, %Y"]


# ------------------------------------------------------------------------------------------- the drop

def _block(rng: np.random.Generator, start: int, n: int) -> pd.DataFrame:
    def pick(options):
        return np.array(options, dtype=object)[rng.integers(0, len(options), n)]

    ids = np.arange(start, start + n)
    days = (np.datetime64("1940-01-01") + rng.integers(0, 30_000, n)).astype("datetime64[D]").astype(object)
    adm = (np.datetime64("2020-01-01") + rng.integers(0, 1_500, n)).astype("datetime64[D]").astype(object)
    style = rng.integers(0, 3, n)
    fmt = np.array(DATE_FORMATS, dtype=object)
    digits = rng.integers(200, 999, (n, 3))
    phone_style = rng.integers(0, 5, n)
    phones = [
        [f"({a}) {b:03d}-{c:04d}", f"{a}.{b:03d}.{c:04d}", f"{a}{b:03d}{c:04d}", f"+1 {a} {b:03d} {c:04d}",
         f"{a}-{b:03d}-{c:04d}"][s] for (a, b, c), s in zip(digits * [1, 1, 10], phone_style)
    ]
    zips = rng.integers(1_000, 99_999, n)
    zip_style = rng.integers(0, 10, n)
    first = pick(["Ann", "Bob", "Cara", "Dan", "Eve", "Finn", "Gia", "Hal", "Ivy", "Jon"])
    last = pick(["Lee", "Stone", "Diaz", "Roe", "Khan", "Ng", "Olsen", "Park", "Smith", "Smyth"])
    pad = rng.random(n)
    return pd.DataFrame({
        "patient_id": [f"P{i:08d}" for i in ids],
        "first_name": np.where(pad < 0.05, np.char.add(" ", first.astype(str)).astype(object), first),
        "last_name": np.where(pad > 0.95, np.char.add(last.astype(str), "  ").astype(object), last),
        "gender": pick(["M", "F", "male", "Female", "f", "m", "F", "M"]),
        "dob": [d.strftime(fmt[s]) for d, s in zip(days, style)],
        "age": rng.integers(0, 100, n),
        "phone": phones,
        "email": [f"{f.lower()}.{l.lower()}{i % 997}@{'Example.COM' if i % 9 == 0 else 'example.com'}"
                  for f, l, i in zip(first, last, ids)],
        "street": [f"{i % 9999} {s}" for i, s in zip(ids, pick(["Main St", "Oak  Ave", " Pine Rd", "Elm St "]))],
        "city": pick(["Austin", "austin", "Dallas ", "Miami", "MIAMI", "Columbus", " Albany"]),
        "state": pick(["CA", "california", "Calif.", "ca", "TX", "texas", "NY", "n.y.", "FL", "fla.", "OH"]),
        "zip": [f"{z:05d}" if s < 6 else (f"{z}" if s < 7 else f"{z:05d}.0" if s < 9 else f"{z:05d}-1234")
                for z, s in zip(zips, zip_style)],
        "blood_type": pick(["A+", "a pos", "A positive", "O-", "o neg", "B+", "AB+", "ab neg", "O+", "O+"]),
        "insurer": pick(["Aetna", "AETNA Inc.", "aetna", "Blue Cross", "BCBS", "Cigna", "cigna corp", "UHC", "Humana"]),
        "insured": rng.random(n) < 0.8,
        "admission_date": [d.strftime(fmt[s]) for d, s in zip(adm, style[::-1])],
        "allergies": [[], ["penicillin"], ["peanuts", "latex"], [], ["sulfa"]] * (n // 5) + [[]] * (n % 5),
        "notes": pick(["", "follow up  in 2 weeks", " no known issues", "N/A", "refer to cardiology "]),
    }, columns=FIELDS)


def write_patients(path: Path, *, rows: int | None = None, size_mb: float | None = None, seed: int = 0) -> int:
    """Write `rows` patients (or about `size_mb` MB of them) as JSONL or CSV, by the extension; returns the rows."""
    rng = np.random.default_rng(seed)
    written, block = 0, 100_000
    as_json = path.suffix == ".jsonl"
    with path.open("w", encoding="utf-8", newline="") as fh:
        while (rows is not None and written < rows) or (size_mb is not None and fh.tell() < size_mb * 1e6):
            n = block if rows is None else min(block, rows - written)
            frame = _block(rng, written, n)
            if as_json:
                cols = [frame[c].tolist() for c in FIELDS]
                fh.write("".join(json.dumps(dict(zip(FIELDS, row))) + "\n" for row in zip(*cols)))
            else:
                frame = frame.assign(age=frame["age"].astype(str), insured=np.where(frame["insured"], "yes", "no"),
                                     allergies=[";".join(a) for a in frame["allergies"]])
                frame.to_csv(fh, header=written == 0, index=False)
            written += n
    return written


# ------------------------------------------------------------------------------------------- the module

FUNCTIONS = [
    ('''import numpy as np
import pandas as pd


def strip_whitespace(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around the text of every column and collapse runs of spaces inside it."""
    df = df.copy(deep=False)
    for column in df.columns:
        values = df[column]
        if pd.api.types.infer_dtype(values, skipna=True) != "string":
            continue  # numbers, booleans, lists: not text
        codes, uniques = pd.factorize(values)
        text = pd.Series(uniques, dtype=object)
        fixed = text.str.strip().str.replace(r" {2,}", " ", regex=True)
        changed = (fixed != text).to_numpy()
        if changed.any():
            rows = np.append(changed, False)[codes]
            cells = values.to_numpy(dtype=object, copy=True)
            cells[rows] = fixed.to_numpy(dtype=object)[codes[rows]]
            df[column] = pd.Series(cells, index=values.index, dtype=object)
    return df
''', []),
    ('''import pandas as pd


def dates_to_iso(df: pd.DataFrame) -> pd.DataFrame:
    """Write `dob` and `admission_date` as ISO dates (03/14/1985 and March 14, 1985 -> 1985-03-14)."""
    FORMATS = ["%Y-%m-%d", "%m/%d/%Y", "%B %d, %Y"]
    df = df.copy(deep=False)
    for column in ("dob", "admission_date"):
        codes, uniques = pd.factorize(df[column])
        text = pd.Series(uniques, dtype=object)
        fixed = pd.Series(None, index=text.index, dtype=object)
        for fmt in FORMATS:
            parsed = pd.to_datetime(text.where(fixed.isna()), format=fmt, errors="coerce")
            fixed = fixed.mask(parsed.notna(), parsed.dt.strftime("%Y-%m-%d"))
        fixed = fixed.fillna(text)
        df[column] = pd.Series(fixed.to_numpy(dtype=object)[codes], index=df.index, dtype=object).where(codes >= 0, df[column])
    return df
''', ["dob", "admission_date"]),
    ('''import pandas as pd


def normalize_phone(df: pd.DataFrame) -> pd.DataFrame:
    """Write US phone numbers as (555) 123-4567, whatever their separators or +1 prefix."""
    df = df.copy(deep=False)
    codes, uniques = pd.factorize(df["phone"])
    digits = pd.Series(uniques, dtype=object).str.replace(r"\\D", "", regex=True).str.replace(r"^1(?=\\d{10}$)", "", regex=True)
    ok = digits.str.len() == 10
    fixed = ("(" + digits.str[:3] + ") " + digits.str[3:6] + "-" + digits.str[6:]).where(ok, pd.Series(uniques, dtype=object))
    df["phone"] = pd.Series(fixed.to_numpy(dtype=object)[codes], index=df.index, dtype=object).where(codes >= 0, df["phone"])
    return df
''', ["phone"]),
    (f'''import pandas as pd


def normalize_state(df: pd.DataFrame) -> pd.DataFrame:
    """Write states as two-letter codes ("california", "Calif." -> "CA")."""
    STATES = {STATES!r}
    df = df.copy(deep=False)
    key = df["state"].astype(object).str.strip().str.lower()
    df["state"] = key.map(STATES).fillna(df["state"])
    return df
''', ["state"]),
    (f'''import pandas as pd


def normalize_blood_type(df: pd.DataFrame) -> pd.DataFrame:
    """Write blood types as A+, O-, AB+ ("a pos", "A positive" -> "A+")."""
    BLOOD = {BLOOD!r}
    df = df.copy(deep=False)
    key = df["blood_type"].astype(object).str.lower().str.replace(r"[\\s]", "", regex=True)
    df["blood_type"] = key.map(BLOOD).fillna(df["blood_type"])
    return df
''', ["blood_type"]),
    ('''import pandas as pd


def normalize_zip(df: pd.DataFrame) -> pd.DataFrame:
    """Write zips as five digits: restore a lost leading zero, drop a float's ".0", keep ZIP+4."""
    df = df.copy(deep=False)
    codes, uniques = pd.factorize(df["zip"].astype(object))
    text = pd.Series(uniques, dtype=object).str.replace(r"\\.0$", "", regex=True)
    fixed = text.where(~text.str.fullmatch(r"\\d{4}"), "0" + text)
    df["zip"] = pd.Series(fixed.to_numpy(dtype=object)[codes], index=df.index, dtype=object).where(codes >= 0, df["zip"])
    return df
''', ["zip"]),
    (f'''import pandas as pd


def normalize_insurer(df: pd.DataFrame) -> pd.DataFrame:
    """Write each insurer by its one name ("AETNA Inc.", "aetna" -> "Aetna"; "BCBS" -> "Blue Cross Blue Shield")."""
    INSURERS = {INSURERS!r}
    df = df.copy(deep=False)
    df["insurer"] = df["insurer"].astype(object).str.strip().str.lower().map(INSURERS).fillna(df["insurer"])
    return df
''', ["insurer"]),
    (f'''import pandas as pd


def normalize_gender(df: pd.DataFrame) -> pd.DataFrame:
    """Write gender as M, F or X ("male", "Female", "f" -> "M", "F", "F")."""
    GENDERS = {GENDERS!r}
    df = df.copy(deep=False)
    df["gender"] = df["gender"].astype(object).str.strip().str.lower().map(GENDERS).fillna(df["gender"])
    return df
''', ["gender"]),
    ('''import pandas as pd


def lowercase_email(df: pd.DataFrame) -> pd.DataFrame:
    """Write email addresses in lower case."""
    df = df.copy(deep=False)
    df["email"] = df["email"].astype(object).str.lower()
    return df
''', ["email"]),
]


def module_source(dataset: str = "patients", functions: bool = True) -> str:
    """The exported module, rendered by smolclean's export (so it has the real `__main__`)."""
    from smolclean_dagster.core.export import render_module
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry

    registry = Registry(dataset=dataset)
    for code, columns in FUNCTIONS if functions else []:
        registry = registry.with_entry(RegistryEntry(
            function=CleaningFunction.from_code(code, columns=columns),
            provenance=Provenance(drop="patients.jsonl", chunk="c1", step=1, analyst="llm", model="benchmark"),
        ))
    return render_module(registry)


# ------------------------------------------------------------------------------------------- record at a time

_SPACES = re.compile(r" {2,}")
_NOT_DIGIT = re.compile(r"\D")
_FOUR = re.compile(r"\d{4}")


def clean_record(rec: dict) -> dict:
    """The module's logic for one record."""
    for key, value in rec.items():
        if isinstance(value, str):
            rec[key] = _SPACES.sub(" ", value.strip())
    for key in ("dob", "admission_date"):
        value = rec.get(key)
        if isinstance(value, str):
            for fmt in DATE_FORMATS:
                try:
                    rec[key] = dt.datetime.strptime(value, fmt).strftime("%Y-%m-%d")
                    break
                except ValueError:
                    continue
    phone = rec.get("phone")
    if isinstance(phone, str):
        digits = _NOT_DIGIT.sub("", phone)
        if len(digits) == 11 and digits.startswith("1"):
            digits = digits[1:]
        if len(digits) == 10:
            rec["phone"] = f"({digits[:3]}) {digits[3:6]}-{digits[6:]}"
    for key, table, prepare in (("state", STATES, lambda v: v.strip().lower()),
                                ("blood_type", BLOOD, lambda v: re.sub(r"\s", "", v.lower())),
                                ("insurer", INSURERS, lambda v: v.strip().lower()),
                                ("gender", GENDERS, lambda v: v.strip().lower())):
        value = rec.get(key)
        if isinstance(value, str):
            rec[key] = table.get(prepare(value), value)
    zip_code = rec.get("zip")
    if isinstance(zip_code, str):
        zip_code = zip_code[:-2] if zip_code.endswith(".0") else zip_code
        rec["zip"] = "0" + zip_code if _FOUR.fullmatch(zip_code) else zip_code
    if isinstance(rec.get("email"), str):
        rec["email"] = rec["email"].lower()
    return rec


def clean_records(source: Path, destination: Path) -> int:
    """Clean a JSONL or CSV file one record at a time; returns the rows."""
    n = 0
    with source.open(encoding="utf-8", newline="") as fin, destination.open("w", encoding="utf-8", newline="") as fout:
        if source.suffix == ".jsonl":
            for line in fin:
                fout.write(json.dumps(clean_record(json.loads(line)), ensure_ascii=False) + "\n")
                n += 1
        else:
            reader = csv.DictReader(fin)
            writer = csv.DictWriter(fout, fieldnames=reader.fieldnames)
            writer.writeheader()
            for record in reader:
                writer.writerow(clean_record(record))
                n += 1
    return n


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "records":
        sys.exit("usage: python benchmarks/patients.py records IN OUT")
    rows = clean_records(Path(sys.argv[2]), Path(sys.argv[3]))
    print(f"cleaned {rows} rows of {sys.argv[2]} -> {sys.argv[3]} ({rows} rows)")
