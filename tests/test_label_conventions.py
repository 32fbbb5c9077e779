"""Taught by a few corrected rows, the conventions: the rules read what a person's corrections show (a number's form,
a date layout, a unit's spelling, a digit layout, a case) as the rule each exemplifies and serve it on the next drop
too; the same conventions asked in words. Real Dagster runs in a temporary workdir, the sandbox, real files."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from instructed_model import InstructedModel
from llm_server import ScriptedLLM
from smolclean_dagster.cli import main
from smolclean_dagster.core.labels import ROW, Labels, read_labels


def payroll(path: Path, rows: int, seed: int) -> Path:
    """A payroll export as a float-typed tool writes it: every whole tax rate with ".0" ("7.0" beside "5.25"), and
    zip codes with their leading zeros ("02134"), both consistent throughout: only a person can say they are not
    the form wanted."""
    rng = random.Random(seed)
    records = [{"emp_id": f"E{seed}{i:05d}", "zip": rng.choice(["02134", "07030", "10001", "60601", "94105", "00501"]),
                "rate": rng.choice(["7.0", "0.0", "5.25", "6.0", "4.75", "9.0"]), "salary": f"{rng.randint(30, 90)}000"}
               for i in range(rows)]
    pd.DataFrame(records, dtype=str).to_csv(path, index=False)
    return path


def test_two_corrected_numbers_teach_the_columns_form_for_the_next_drop(tmp_path):
    drop, later = payroll(tmp_path / "payroll.csv", 400, seed=1), payroll(tmp_path / "later.csv", 300, seed=2)

    def learned(workdir: Path, *extra: str, env: dict | None = None) -> pd.DataFrame:
        proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", "payroll",
                               "--workdir", str(workdir), "--concurrency", "1", "--chunk-budget", "2", *extra],
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr
        out = tmp_path / f"{workdir.name}.csv"
        ran = subprocess.run([sys.executable, str(workdir / "modules" / "payroll" / "clean_payroll.py"), str(later),
                              str(out)], capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr
        return pd.read_csv(out, dtype=str, keep_default_na=False)

    raw = pd.read_csv(later, dtype=str, keep_default_na=False)
    assert main(["label", str(drop), "--name", "payroll", "--rows", "20", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    whole = sample.index[sample["rate"].str.endswith(".0")][0]
    zero = sample.index[sample["zip"].str.startswith("0") & (sample.index != whole)][0]
    path = tmp_path / "corrected.csv"
    # the person hands back the two rows, each cell as it should be (a cell left as it was is confirmed)
    picked = sample.loc[[whole, zero]].copy()
    picked["rate"] = picked["rate"].str.replace(r"\.0$", "", regex=True)
    picked["zip"] = picked["zip"].str.replace(r"^0+(?=\d)", "", regex=True)
    picked.to_csv(path, index=False)

    taught = learned(tmp_path / "taught", "--labels", str(path))
    expected = raw.assign(rate=raw["rate"].str.replace(r"\.0$", "", regex=True),
                          zip=raw["zip"].str.replace(r"^0+(?=\d)", "", regex=True))
    assert expected.ne(raw).any(axis=1).sum() >= 50  # the file alone keeps them (its own forms on most rows)
    differs = taught.ne(expected).any(axis=1)
    assert not differs.any(), (
        f"every whole rate loses its '.0' and every zip its leading zeros, nothing else: {taught[differs].head()} "
        f"against {expected[differs].head()}")

    # With a model, the rules' functions the corrections call for are offered to it, and the one it adopts lands
    model = InstructedModel(code={}, adopt=("normalize_numbers",))
    with ScriptedLLM(responder=model) as llm:
        env = {**os.environ, "SMOLCLEAN_MODEL": "openai/test-model", "SMOLCLEAN_API_BASE": llm.api_base,
               "SMOLCLEAN_API_KEY": "k"}
        adopted = learned(tmp_path / "model", "--labels", str(path), env=env)
    assert any("`normalize_numbers_rate`" in p for p in model.prompts), "offered to the model"
    # each candidate says what it does to the corrected rows: the model need not guess which one the person meant
    assert any(re.search(r"`normalize_numbers_rate` \[rate\]: [^\n]* On the rows the user corrected: makes 1 of "
                         r"the corrections and breaks no labelled cell\.", p) for p in model.prompts)
    assert adopted.equals(expected)


def test_a_placeholder_corrected_to_an_empty_field_teaches_the_null_rule_of_a_csv_drop(tmp_path):
    # In a CSV an empty field and a null are one value: the null rule writes None, the person wrote "", and the
    # labels take both for the same, in learning and in the shipped tests.
    rng = random.Random(3)
    drop = tmp_path / "brews.csv"
    pd.DataFrame([{"beer": f"Beer {i}", "ibu": rng.choice(["N/A", "N/A", "35", "60", "18"]),
                   "abv": rng.choice(["0.05", "0.061", "0.07"])} for i in range(300)], dtype=str).to_csv(drop, index=False)
    assert main(["label", str(drop), "--name", "brews", "--rows", "20", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    corrected = sample.assign(ibu=sample["ibu"].replace("N/A", ""))
    assert (corrected["ibu"] == "").sum() >= 2
    corrected.to_csv(tmp_path / "corrected.csv", index=False)
    proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", "brews",
                           "--workdir", str(tmp_path / "w"), "--concurrency", "1", "--chunk-budget", "2", "--labels",
                           str(tmp_path / "corrected.csv")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    module_dir = tmp_path / "w" / "modules" / "brews"
    out = tmp_path / "out.csv"
    ran = subprocess.run([sys.executable, str(module_dir / "clean_brews.py"), str(drop), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    raw = pd.read_csv(drop, dtype=str, keep_default_na=False)
    assert cleaned["ibu"].tolist() == raw["ibu"].replace("N/A", "").tolist()
    shipped = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                              str(module_dir / "test_clean_brews.py")], capture_output=True, text=True, timeout=300,
                             cwd=module_dir)
    assert shipped.returncode == 0, shipped.stdout[-2000:]
    passed = int(re.search(r"(\d+) passed", shipped.stdout)[1])
    assert "def test_a_labelled_row_keeps_the_persons_values" in (module_dir / "test_clean_brews.py").read_text()
    assert passed >= len(sample), "each labelled row is a shipped test, and passes"


def publications(path: Path, rows: int, seed: int) -> pd.DataFrame:
    """A reference manager's export of journal articles, and the truth written first: the dates of articles since
    2002 went through an importer that wrote them year/month/day ("4/2/15" for 2 February 2004, day 15), the older
    ones stayed month/day/year ("3/28/73"). Most of the importer's dates read as month/day/year too ("1/1/13"):
    nothing in the file says which they are. Returns the truth; the file holds the export."""
    rng = random.Random(seed)
    journals = ["Nature", "BMJ", "Lancet", "Science", "J Biol Chem", "Ann Rheum Dis"]
    truth, written = [], []
    for i in range(rows):
        year, month, day = rng.choice([rng.randint(1965, 2001), rng.randint(2002, 2015), rng.randint(2002, 2015)]), \
            rng.randint(1, 12), rng.randint(1, 28)
        record = {"id": str(700000 + seed * 10000 + i), "title": f"Study {i} of case series {rng.randint(1, 99)}",
                  "journal": rng.choice(journals), "created": f"{month}/{day}/{year % 100:02d}",
                  "pages": f"{rng.randint(1, 900)}-{rng.randint(1, 9)}"}
        truth.append(record)
        written.append({**record, "created": f"{year % 100}/{month}/{day:02d}"} if year >= 2002 else record)
    pd.DataFrame(written, dtype=str).to_csv(path, index=False)
    return pd.DataFrame(truth, dtype=str)


def test_corrected_dates_teach_the_layout_they_are_wanted_in_for_the_next_drop(tmp_path):
    drop, later = tmp_path / "articles.csv", tmp_path / "later.csv"
    publications(drop, 500, seed=1)
    truth = publications(later, 400, seed=2)

    def cleaned_later(workdir: Path, *extra: str) -> pd.DataFrame:
        proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", "articles",
                               "--workdir", str(workdir), "--concurrency", "1", "--chunk-budget", "2", *extra],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        module, out = workdir / "modules" / "articles" / "clean_articles.py", tmp_path / f"{workdir.name}.csv"
        ran = subprocess.run([sys.executable, str(module), str(later), str(out)], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        again = tmp_path / f"{workdir.name}_again.csv"
        ran = subprocess.run([sys.executable, str(module), str(out), str(again)], capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
        cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
        assert pd.read_csv(again, dtype=str, keep_default_na=False).equals(cleaned), "its own output stays as it is"
        return cleaned

    raw = pd.read_csv(later, dtype=str, keep_default_na=False)
    assert cleaned_later(tmp_path / "alone").equals(raw), "without labels no date is read in another layout"

    assert main(["label", str(drop), "--name", "articles", "--rows", "30", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    first = publications(tmp_path / "again.csv", 500, seed=1)
    # the person writes each date of the sample as it should be; every other cell is confirmed
    sample["created"] = [first["created"].iat[int(n) - 1] for n in sample[ROW]]
    sample.to_csv(tmp_path / "corrected.csv", index=False)
    taught = cleaned_later(tmp_path / "taught", "--labels", str(tmp_path / "corrected.csv"))

    changed = taught["created"] != raw["created"]
    wrong = raw["created"] != truth["created"]
    assert (taught.drop(columns="created") == raw.drop(columns="created")).all().all()
    assert (taught.loc[changed, "created"] == truth.loc[changed, "created"]).all(), \
        taught.loc[changed & (taught["created"] != truth["created"]), "created"].head()
    # every wrong date whose right form cannot be read year/month/day in turn is put right: the dates that read
    # both ways as well as those that do not ("13/5/01" has no month 13)
    settled = wrong & ~truth["created"].str.fullmatch(r"([1-9]|1[0-2])/([1-9]|1[0-2])/\d\d")
    both_ways = settled & raw["created"].str.fullmatch(r"([1-9]|1[0-2])/\d{1,2}/\d\d")
    assert both_ways.sum() > 100 and (changed == settled).all(), (changed.sum(), settled.sum())


def learned_and_cleaned(drop: Path, later: Path, name: str, workdir: Path, *extra: str) -> pd.DataFrame:
    """`later` as the module learned from `drop` (with `extra` options) in `workdir` writes it."""
    proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", name,
                           "--workdir", str(workdir), "--concurrency", "1", "--chunk-budget", "2", *extra],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = workdir.with_suffix(".csv")
    ran = subprocess.run([sys.executable, str(workdir / "modules" / name / f"clean_{name}.py"), str(later), str(out)],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return pd.read_csv(out, dtype=str, keep_default_na=False)


#: How the suppliers of `groceries` spell each unit, the right spelling first.
UNIT_SPELLINGS = {"g": ["g", "G", "gr."], "ml": ["ml", "ML", "mL."]}


def groceries(path: Path, rows: int, seed: int, spellings: dict[str, list[str]] = UNIT_SPELLINGS) -> pd.DataFrame:
    """A grocery export merged from several suppliers, and the truth written first: each supplier writes pack sizes
    its own way ("500 G", "500 gr.", "330 ML"), each spelling on many rows, so nothing in the file says which is
    right. Sizes in kilograms and counts of pieces are written one way only. Returns the truth; the file holds the
    export."""
    rng = random.Random(seed)
    truth, written = [], []
    for i in range(rows):
        unit = rng.choice(["g", "g", "ml", "ml", "kg", "pcs"])
        amount = {"g": rng.choice(["250", "500", "750"]), "ml": rng.choice(["330", "500", "1000"]),
                  "kg": rng.choice(["1", "2.5"]), "pcs": rng.choice(["6", "12"])}[unit]
        record = {"sku": f"G{seed}{i:05d}", "item": rng.choice(["Rice", "Oats", "Milk", "Juice", "Flour", "Eggs"]),
                  "size": f"{amount} {unit}", "price": f"{rng.randint(1, 9)}.{rng.randint(0, 99):02d}"}
        truth.append(record)
        written.append({**record, "size": f"{amount} {rng.choice(spellings[unit])}"} if unit in spellings else record)
    pd.DataFrame(written, dtype=str).to_csv(path, index=False)
    return pd.DataFrame(truth, dtype=str)


def test_corrected_units_teach_how_each_unit_is_spelled_for_the_next_drop(tmp_path):
    drop, later = tmp_path / "groceries.csv", tmp_path / "later.csv"
    first = groceries(drop, 500, seed=1)
    # the next drop brings spellings of the same units the first never held: "G." and "Ml"
    truth = groceries(later, 400, seed=2, spellings={"g": ["g", "G", "gr.", "G."], "ml": ["ml", "ML", "mL.", "Ml"]})

    raw = pd.read_csv(later, dtype=str, keep_default_na=False)
    wrong = raw["size"] != truth["size"]

    assert main(["label", str(drop), "--name", "groceries", "--rows", "20", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    held = {size.split(" ")[1] for size in sample["size"]}
    assert held >= {"G", "gr.", "ML", "mL."}, held  # the rows picked hold every spelling of the first drop
    # the person writes each size of the sample as it should be; every other cell is confirmed
    sample["size"] = [first["size"].iat[int(n) - 1] for n in sample[ROW]]
    sample.to_csv(tmp_path / "corrected.csv", index=False)
    taught = learned_and_cleaned(drop, later, "groceries", tmp_path / "taught", "--labels",
                                 str(tmp_path / "corrected.csv"))

    assert taught.drop(columns="size").equals(raw.drop(columns="size"))
    assert taught["size"].equals(truth["size"]), taught.loc[taught["size"] != truth["size"], "size"].value_counts()
    assert (raw["size"].str.endswith((" G.", " Ml")) & wrong).sum() > 50  # spellings the labels never showed


def contacts(path: Path, rows: int, seed: int, layouts: tuple[str, ...]) -> pd.DataFrame:
    """A contact list merged from several tools, and the truth written first: each tool lays phone numbers out its
    own way ("(555) 123-4567", "555.123.4567", "5551234567"), each on many rows, and the list wants 555-123-4567.
    International numbers and numbers with an extension are written as they came. Returns the truth; the file
    holds the export."""
    rng = random.Random(seed)
    truth, written = [], []
    for i in range(rows):
        a, b, c = rng.randint(201, 989), rng.randint(200, 999), rng.randint(0, 9999)
        kind = rng.choice(["local"] * 8 + ["international", "extension"])
        phone = {"local": f"{a}-{b}-{c:04d}", "international": f"+44 20 {b} {c:04d}",
                 "extension": f"{a}-{b}-{c:04d} x{rng.randint(10, 99)}"}[kind]
        record = {"contact_id": f"C{seed}{i:05d}", "name": rng.choice(["Ann Lee", "Bo Diaz", "Cy Roe", "Di Park"]),
                  "zip": rng.choice(["02134", "07030", "10001", "94105"]), "phone": phone}
        truth.append(record)
        layout = rng.choice(layouts)
        local = layout.format(a=a, b=b, c=f"{c:04d}")
        written.append({**record, "phone": local} if kind == "local" else record)
    pd.DataFrame(written, dtype=str).to_csv(path, index=False)
    return pd.DataFrame(truth, dtype=str)


def test_corrected_phone_numbers_teach_the_layout_of_the_columns_digits_for_the_next_drop(tmp_path):
    drop, later = tmp_path / "contacts.csv", tmp_path / "later.csv"
    layouts = ("{a}-{b}-{c}", "({a}) {b}-{c}", "{a}.{b}.{c}", "{a}{b}{c}")
    first = contacts(drop, 500, seed=1, layouts=layouts)
    # the next drop brings a layout the first never held: "555 123 4567"
    truth = contacts(later, 400, seed=2, layouts=layouts + ("{a} {b} {c}",))

    raw = pd.read_csv(later, dtype=str, keep_default_na=False)
    wrong = raw["phone"] != truth["phone"]

    assert main(["label", str(drop), "--name", "contacts", "--rows", "20", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    assert sample["phone"].str.fullmatch(r"\d{10}").any()  # a number written in one run is among the rows picked
    # the person writes each phone number of the sample as it should be; every other cell is confirmed
    sample["phone"] = [first["phone"].iat[int(n) - 1] for n in sample[ROW]]
    sample.to_csv(tmp_path / "corrected.csv", index=False)
    taught = learned_and_cleaned(drop, later, "contacts", tmp_path / "taught", "--labels",
                                 str(tmp_path / "corrected.csv"))

    assert taught.drop(columns="phone").equals(raw.drop(columns="phone")), "zip codes keep their leading zeros"
    assert taught["phone"].equals(truth["phone"]), taught.loc[taught["phone"] != truth["phone"], "phone"].head()
    assert (raw["phone"].str.fullmatch(r"\d{3} \d{3} \d{4}") & wrong).sum() > 20  # a layout the labels never showed
    assert (raw["phone"].str.startswith("+") | raw["phone"].str.contains(" x")).sum() > 40  # kept as they came


def test_a_layout_asked_in_words_is_carried_out_by_the_rules_where_no_detector_sees_dirt(tmp_path):
    drop = tmp_path / "contacts.csv"
    truth = contacts(drop, 300, seed=3, layouts=("{a}-{b}-{c}", "({a}) {b}-{c}", "{a}.{b}.{c}", "{a}{b}{c}"))
    workdir = tmp_path / "w"
    proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", "contacts",
                           "--workdir", str(workdir), "--concurrency", "1", "--instructions",
                           "Write the digits of column 'phone' in the layout '999-999-9999', also those written in one "
                           "run."], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "1 instruction: 1 served" in proc.stdout, proc.stdout
    out = tmp_path / "out.csv"
    ran = subprocess.run([sys.executable, str(workdir / "modules" / "contacts" / "clean_contacts.py"), str(drop),
                          str(out)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert pd.read_csv(out, dtype=str, keep_default_na=False).equals(truth)


def readings(path: Path, rows: int, seed: int) -> pd.DataFrame:
    """Water samples with a pH reading missing on about one row in six. Returns the truth, where a missing reading
    is written "n/a (not measured)"; the file leaves it empty."""
    rng = random.Random(seed)
    truth = pd.DataFrame([{"sample_id": f"S{seed}{i:04d}", "site": rng.choice(["North", "South", "East"]),
                           "ph": "n/a (not measured)" if rng.random() < 0.15 else f"{rng.uniform(6, 8):.2f}",
                           "temp": f"{rng.uniform(10, 20):.1f}"} for i in range(rows)], dtype=str)
    truth.assign(ph=truth["ph"].where(truth["ph"] != "n/a (not measured)", "")).to_csv(path, index=False)
    return truth


def test_a_placeholder_for_empty_cells_asked_in_words_is_written_and_one_corrected_is_no_fill(tmp_path):
    drop = tmp_path / "readings.csv"
    truth = readings(drop, 300, seed=1)
    raw = pd.read_csv(drop, dtype=str, keep_default_na=False)
    asked = learned_and_cleaned(drop, drop, "readings", tmp_path / "asked", "--instructions",
                                "Write the empty cells of column 'ph' as 'n/a (not measured)'.")
    assert (raw["ph"] == "").sum() > 20 and asked.equals(truth)
    # a person's "" -> "n/a (not measured)" says how a missing value is written: no value is missing to fill
    labels = Labels(source="corrected.csv", rows=raw.iloc[[0, 1]].set_axis([1, 2]).assign(ph=["", "7.01"]),
                    truth=raw.iloc[[0, 1]].set_axis([1, 2]).assign(ph=["n/a (not measured)", "7.01"]))
    assert labels.conventions() == ""


SITE_CITIES = ["Rochester", "Decatur", "St. Louis", "Winston-Salem", "McAllen", "Boston", "Fort Wayne", "Sioux Falls",
               "Lake Charles", "Grand Rapids", "El Paso", "Baton Rouge", "Santa Fe", "Green Bay", "Ann Arbor"]
SITE_STATES = ["NY", "IL", "MO", "NC", "TX", "MA", "IN", "SD", "LA", "MI", "NM", "WI", "IA"]


def sites(path: Path, rows: int, seed: int, cities: list[str] = SITE_CITIES) -> pd.DataFrame:
    """A list of storage sites merged from two systems, and the truth written first: the older system, 60% of the
    rows, writes cities in capitals ("ST. LOUIS", "MCALLEN") and state codes in lower case ("mo"); the list wants
    "St. Louis" and "MO". Each way is on hundreds of rows, so nothing in the file says which is right. Returns the
    truth; the file holds the export."""
    rng = random.Random(seed)
    truth, written = [], []
    for i in range(rows):
        record = {"site_id": f"S{seed}{i:05d}", "name": rng.choice(["Acme Storage", "Northside Depot", "Hub 7"]),
                  "city": rng.choice(cities), "state": rng.choice(SITE_STATES), "zip": f"{rng.randint(1000, 99999):05d}"}
        truth.append(record)
        older = rng.random() < 0.6
        written.append({**record, "city": record["city"].upper(), "state": record["state"].lower()} if older else record)
    pd.DataFrame(written, dtype=str).to_csv(path, index=False)
    return pd.DataFrame(truth, dtype=str)


def test_corrected_case_teaches_each_columns_case_for_the_next_drop(tmp_path):
    drop, later = tmp_path / "sites.csv", tmp_path / "later.csv"
    first = sites(drop, 500, seed=1)
    # the next drop brings cities the first never held, in capitals too
    truth = sites(later, 400, seed=2, cities=SITE_CITIES + ["Coral Springs", "Round Rock", "Palm Bay"])
    raw = pd.read_csv(later, dtype=str, keep_default_na=False)
    assert (raw["city"] == raw["city"].str.upper()).sum() > 200 and (raw["state"] == raw["state"].str.lower()).sum() > 200

    assert main(["label", str(drop), "--name", "sites", "--rows", "20", "-o", str(tmp_path / "to_label.csv")]) == 0
    sample = pd.read_csv(tmp_path / "to_label.csv", dtype=str, keep_default_na=False)
    # the person writes each row of the sample as it should be
    sample[["city", "state"]] = [first.loc[int(n) - 1, ["city", "state"]].tolist() for n in sample[ROW]]
    sample.to_csv(tmp_path / "corrected.csv", index=False)
    conventions = read_labels(tmp_path / "corrected.csv", drop).conventions()
    assert "column 'city' in title case" in conventions and "column 'state' in upper case" in conventions
    taught = learned_and_cleaned(drop, later, "sites", tmp_path / "taught", "--labels", str(tmp_path / "corrected.csv"))

    wrong = taught != truth
    assert not wrong.any().any(), taught[wrong.any(axis=1)].head()  # "McAllen" too, and "PALM BAY" never seen
    assert (raw["city"] == "PALM BAY").any()


def test_a_case_asked_in_words_is_written_in_the_column_named_only(tmp_path):
    drop = tmp_path / "sites.csv"
    truth = sites(drop, 300, seed=3)
    raw = pd.read_csv(drop, dtype=str, keep_default_na=False)
    workdir = tmp_path / "w"
    proc = subprocess.run([sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", "sites",
                           "--workdir", str(workdir), "--concurrency", "1", "--instructions",
                           "Write the values of column 'state' in upper case."], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "1 instruction: 1 served" in proc.stdout, proc.stdout
    out = tmp_path / "out.csv"
    ran = subprocess.run([sys.executable, str(workdir / "modules" / "sites" / "clean_sites.py"), str(drop), str(out)],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert cleaned["state"].equals(truth["state"]) and (raw["state"] != truth["state"]).sum() > 100
    assert cleaned.drop(columns="state").equals(raw.drop(columns="state")), "the cities were not asked"
