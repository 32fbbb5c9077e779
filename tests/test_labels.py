"""Taught by a few corrected rows: `smolclean label` picks them, `smolclean learn --labels` holds every function to
them (a rule that breaks one is dropped, a model's is sent back with the cells), the conventions they show are
served, and the shipped tests replay them. Real Dagster runs in a temporary workdir, the sandbox, real files."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from instructed_model import InstructedModel
from llm_server import ScriptedLLM, reply
from smolclean_dagster.cli import main
from smolclean_dagster.core.labels import ROW, Labels, pick_rows, read_labels
from smolclean_dagster.core.errors import LabelError

CITIES = [("Boston", "MA"), ("Chicago", "IL"), ("Denver", "CO"), ("Austin", "TX"), ("Portland", "OR"),
          ("Atlanta", "GA"), ("Seattle", "WA"), ("Phoenix", "AZ")]


def swapped(city: str) -> str:
    """A typing slip: the last two letters swapped ("Boston" -> "Bostno")."""
    return city[:-2] + city[-1] + city[-2]


#: Every slip `products` makes, and the city it stands for.
SLIPS = {swapped(city): city for city, _ in CITIES}


def products(path: Path, rows: int = 600) -> Path:
    """A product export where two ways of writing a size are equally common ("12 oz" and "12", 300 rows each):
    nothing in the file says which one is right. A few city typos and stray spaces besides."""
    rng = random.Random(7)
    records = []
    for i in range(rows):
        city, state = rng.choice(CITIES)
        size = rng.choice(["12", "16", "22"])
        records.append({"sku": f"P-{10000 + i}", "city": city, "state": state,
                        "size": f"{size} oz" if i % 2 else size, "price": f"{rng.randint(2, 9)}.{rng.randint(0, 99):02d}"})
    for i in (41, 388, 505):
        records[i]["city"] = swapped(records[i]["city"])
    for i in (120, 360, 560):
        records[i]["city"] = f" {records[i]['city']}"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return path


def learn(path: Path, workdir: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "smolclean_dagster.cli", "learn", str(path), "--name", "products", "--workdir",
           str(workdir), "--concurrency", "1", "--chunk-budget", "2", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env or {**os.environ})


def label_sample(path: Path, out: Path, rows: int = 20) -> pd.DataFrame:
    assert main(["label", str(path), "--name", "products", "--rows", str(rows), "-o", str(out)]) == 0
    return pd.read_csv(out, dtype=str, keep_default_na=False)


def corrected(sample: pd.DataFrame, path: Path, fix) -> Path:
    """The sample as a person hands it back: `fix(row)` corrects a row in place (a dict of the row's cells)."""
    rows = sample.to_dict("records")
    for row in rows:
        fix(row)
    pd.DataFrame(rows, dtype=str).to_csv(path, index=False)
    return path


def test_label_picks_the_rows_that_hold_the_dirt_and_writes_them_as_read(tmp_path):
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv", rows=12)
    raw = pd.read_csv(drop, dtype=str, keep_default_na=False)
    assert list(sample.columns) == [ROW, *raw.columns] and len(sample) == 12
    numbers = sample[ROW].astype(int)
    assert sample.drop(columns=ROW).reset_index(drop=True).equals(raw.iloc[numbers - 1].reset_index(drop=True))
    # the typos and the stray spaces are each held by a row of the sample, and the rows spread over the drop
    picked = set(numbers - 1)
    assert picked & {41, 388, 505} and picked & {120, 360, 560}
    assert numbers.min() < 120 and numbers.max() > 480
    # a JSON drop gets a JSON lines sample, typed values kept
    jsonl = tmp_path / "products.jsonl"
    jsonl.write_text("".join(json.dumps({**r, "price": float(r["price"])}) + "\n" for r in raw.to_dict("records")))
    assert main(["label", str(jsonl), "--name", "products", "--rows", "5", "-o", str(tmp_path / "s.jsonl")]) == 0
    first = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    assert list(first)[0] == ROW and isinstance(first["price"], float)


def test_corrected_rows_decide_the_convention_and_take_out_a_rule_that_breaks_them(tmp_path):
    drop = products(tmp_path / "products.csv")
    workdir = tmp_path / "w"
    alone = learn(drop, workdir)
    assert alone.returncode == 0, alone.stderr
    module_dir = workdir / "modules" / "products"
    sizes = pd.read_parquet(workdir / "cleaned" / "products" / "products.parquet")["size"]
    assert sizes.str.endswith(" oz").sum() == 300, "without labels nothing says which way is right"
    assert "def strip_whitespace" in (module_dir / "clean_products.py").read_text()

    # the person hands back a few rows of the sample: two sizes written without their unit, and a city whose
    # leading space is right (their source writes it so); every other cell of those rows is confirmed
    sample = label_sample(drop, tmp_path / "to_label.csv")
    units = list(sample.index[sample["size"].str.endswith(" oz") & ~sample["city"].str.startswith(" ")][:2])
    spaced = list(sample.index[sample["city"].str.startswith(" ")])
    assert len(units) == 2 and len(spaced) >= 1
    path = corrected(sample.loc[units + spaced], tmp_path / "corrected.csv",
                     lambda row: row.update(size=row["size"].removesuffix(" oz")))
    taught = learn(drop, workdir, "--labels", str(path))
    assert taught.returncode == 0, taught.stderr
    assert f"{len(units + spaced)} labelled rows from corrected.csv" in taught.stdout
    assert "version: 2, proposed" in taught.stdout, "the drop is learned again, held to its labels"

    module = (module_dir / "clean_products.py").read_text()
    assert "def strip_whitespace" not in module
    report = (module_dir / "report.md").read_text()
    row = int(sample.loc[spaced[0], ROW])
    assert "## Labelled rows" in report and f"row {row} 'city': the user confirmed" in report
    out = tmp_path / "out.csv"
    ran = subprocess.run([sys.executable, str(module_dir / "clean_products.py"), str(drop), str(out)],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert not cleaned["size"].str.endswith(" oz").any() and set(cleaned["size"]) == {"12", "16", "22"}
    assert cleaned["city"].iloc[row - 1].startswith(" ")

    # the shipped tests replay the labelled rows, and fail once the module breaks one
    tests = module_dir / "test_clean_products.py"
    assert "LABELS = " in tests.read_text()
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)]
    assert subprocess.run(run, cwd=module_dir, capture_output=True, text=True).returncode == 0
    broken = module.replace("    return df\n\n\nif __name__", "    df['city'] = df['city'].str.strip()\n    return df\n\n\n"
                            "if __name__", 1)
    assert broken != module
    (module_dir / "clean_products.py").write_text(broken)
    failed = subprocess.run(run, cwd=module_dir, capture_output=True, text=True)
    assert failed.returncode == 1 and "test_a_labelled_row_keeps_the_persons_values" in failed.stdout


UPPER = '''def upper_city(df):
    """Write `city` in capitals ("Boston" -> "BOSTON")."""
    df = df.copy()
    df["city"] = df["city"].str.upper()
    return df
'''

SWAPS = f'''def fix_city_swaps(df):
    """Put back the two letters swapped at the end of a city ("Bostno" -> "Boston")."""
    df = df.copy()
    df["city"] = df["city"].replace({SLIPS!r})
    return df
'''


def test_a_model_function_that_breaks_a_label_is_sent_back_with_the_cells_and_the_model_sees_the_labels(tmp_path):
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv")
    path = corrected(sample, tmp_path / "corrected.csv", lambda row: row.update(city=SLIPS.get(row["city"], row["city"])))
    labels = read_labels(path, drop)
    assert labels.corrections, "the sample holds a typo to correct"

    def respond(request):
        if "upper_city was rejected" in request.prompt and "fix_city_swaps" not in request.prompt:
            return reply(f"<issues>\n- city: swapped letters\n</issues>\n<code>\n```python\n{SWAPS}```\n</code>\n"
                         "<status>needs_more_work</status>")
        if "fix_city_swaps" in request.prompt or "upper_city was rejected" in request.prompt:
            return reply("<issues>\n</issues>\n<status>clean</status>")
        return reply(f"<issues>\n- city: case\n</issues>\n<code>\n```python\n{UPPER}```\n</code>\n"
                     "<status>needs_more_work</status>")

    with ScriptedLLM(responder=respond) as llm:
        env = {**os.environ, "SMOLCLEAN_MODEL": "openai/test-model", "SMOLCLEAN_API_BASE": llm.api_base,
               "SMOLCLEAN_API_KEY": "test-key"}
        done = learn(drop, tmp_path / "w", "--labels", str(path), "--analyst", "llm", "--chunk-budget", "1", env=env)
        assert done.returncode == 0, done.stderr
        prompts = [r.prompt for r in llm.requests]
    correction = labels.corrections[0]
    assert all("## Rows the user corrected: ground truth" in p for p in prompts)
    assert all(f"row {correction.row}: city `{correction.before}` -> `{correction.after}`" in p for p in prompts)
    sent_back = next(p for p in prompts if "upper_city was rejected" in p)
    assert "it breaks" in sent_back
    assert any(f"the user confirmed '{city}', it writes '{city.upper()}'" in sent_back for city, _ in CITIES)
    module = (tmp_path / "w" / "modules" / "products" / "clean_products.py").read_text()
    assert "def upper_city" not in module and "def fix_city_swaps" in module


def test_a_label_file_that_is_not_the_drops_gets_one_clear_error_and_nothing_is_stored(tmp_path, capsys):
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv", rows=5)
    first = pd.read_csv(drop, dtype=str, nrows=1).iloc[0].to_dict()
    bad = {
        "has no row 5000 (its rows are 1-600)": sample.assign(**{ROW: sample[ROW].where(sample.index > 0, "5000")}),
        "its header is not the header of": sample.rename(columns={"city": "town"}),
        "is labelled twice; keep one": pd.concat([sample.head(1), sample.head(1)]),
        "read from a CSV file": json.dumps({ROW: 1, **first}) + "\n",
    }
    capsys.readouterr()
    for i, (says, content) in enumerate(bad.items()):
        path = tmp_path / (f"bad{i}.jsonl" if isinstance(content, str) else f"bad{i}.csv")
        path.write_text(content) if isinstance(content, str) else content.to_csv(path, index=False)
        with pytest.raises(LabelError, match=path.name):
            read_labels(path, drop)
        code = main(["learn", str(drop), "--name", "products", "--workdir", str(tmp_path / "w"), "--labels", str(path)])
        err = capsys.readouterr().err
        assert code == 2 and says in err and path.name in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "w").exists(), "nothing is stored from a rejected label file"


def test_picked_rows_are_stable_and_spread_when_nothing_is_suspect():
    frame = pd.DataFrame({"a": [f"v{i % 7}" for i in range(700)], "b": ["x"] * 700})
    picked = pick_rows(frame, 10)
    assert picked == pick_rows(frame, 10) and len(picked) == 10
    assert max(picked) > 600 and min(picked) < 100


def test_a_row_is_worth_the_exact_sum_of_its_suspicions_so_the_same_drop_gives_the_same_rows_in_every_process():
    # Ten rare values of a column are worth a tenth of a kind each, four a quarter each: rows 0-9 and 20-23 are
    # each worth one kind, and the tie goes to the earliest. Summed as floats in a set's order (which Python varies
    # from process to process), a tenth ten times is less than one, and `smolclean label` picked row 20 here and,
    # on a real flights table, other rows in each run.
    common = ["Paris", "Osaka", "Delhi"]
    rare = ["Quito", "Lagos", "Perth", "Dakar", "Hanoi", "Tunis", "Minsk", "Accra", "Sofia", "Cairo"]
    columns = {f"c{j}": [rare[(i + j) % 10] if i < 10 else common[(i + j) % 3] for i in range(120)] for j in range(10)}
    columns |= {f"d{j}": [rare[(i + j) % 4] if 20 <= i < 24 else common[(i + j) % 3] for i in range(120)]
                for j in range(4)}
    assert pick_rows(pd.DataFrame(columns), 1) == [0]


def test_the_labels_setting_holds_learning_to_the_drops_corrected_sample_and_a_misnamed_one_is_refused(tmp_path):
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv", rows=6)
    (tmp_path / "handed_back").mkdir()
    named = corrected(sample, tmp_path / "handed_back" / "products.csv", lambda row: None)  # all confirmed
    taught = learn(drop, tmp_path / "w", "--set", f"labels={named}")
    assert taught.returncode == 0, taught.stderr
    assert "6 labelled rows from products.csv" in taught.stdout

    misnamed = corrected(sample, tmp_path / "corrected.csv", lambda row: None)
    refused = learn(drop, tmp_path / "w2", "--set", f"labels={misnamed}")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "named after drop 'corrected', not 'products'; name it products.csv" in refused.stderr
    assert not (tmp_path / "w2" / "storage").exists(), "nothing stored from a refused setting"


def test_a_rule_that_breaks_a_label_stays_with_that_value_as_written_and_makes_its_other_fixes(tmp_path):
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv")
    spaced = list(sample.index[sample["city"].str.startswith(" ")])
    assert len(spaced) >= 3
    # the person confirms one city's leading space (their source writes it so) and strips the others'
    confirmed = sample.loc[spaced[0], "city"]
    path = corrected(sample.loc[spaced], tmp_path / "corrected.csv",
                     lambda row: row.update(city=row["city"] if row["city"] == confirmed else row["city"].strip()))
    taught = learn(drop, tmp_path / "w", "--labels", str(path))
    assert taught.returncode == 0, taught.stderr
    module_dir = tmp_path / "w" / "modules" / "products"
    module = (module_dir / "clean_products.py").read_text()
    assert "def strip_whitespace" in module and f"KEPT = {{'city': [{confirmed!r}]}}" in module
    report = (module_dir / "report.md").read_text()
    assert f"kept, these values as written: {{'city': [{confirmed!r}]}}" in report
    out = tmp_path / "out.csv"
    ran = subprocess.run([sys.executable, str(module_dir / "clean_products.py"), str(drop), str(out)],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    raw = pd.read_csv(drop, dtype=str, keep_default_na=False)
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    was_spaced = raw["city"].str.startswith(" ")
    assert (cleaned.loc[was_spaced, "city"] == raw.loc[was_spaced, "city"].where(
        raw.loc[was_spaced, "city"] == confirmed, raw.loc[was_spaced, "city"].str.strip())).all()
    assert (cleaned["city"] == confirmed).sum() == (raw["city"] == confirmed).sum() >= 1


def test_a_rule_that_breaks_a_label_is_offered_to_the_model_with_that_value_as_written_and_adopted_so(tmp_path):
    # The same person: one city's leading space confirmed, the others' stripped. A model reads what each
    # ready-made function does to those rows; offered as it is, the space rule "breaks 1 labelled cell" and a
    # careful model declines it, though the rules would keep it with that value as written. It is offered so.
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv")
    spaced = list(sample.index[sample["city"].str.startswith(" ")])
    confirmed = sample.loc[spaced[0], "city"]
    path = corrected(sample.loc[spaced], tmp_path / "corrected.csv",
                     lambda row: row.update(city=row["city"] if row["city"] == confirmed else row["city"].strip()))
    offers: list[str] = []

    def respond(request):
        ready_made = request.prompt.partition("## Ready-made functions you may adopt")[2].split("\n## ")[0]
        lines = [line for line in ready_made.splitlines() if line.startswith("- `strip_whitespace")]
        offers.extend(lines)
        safe = [line for line in lines if "breaks no labelled cell" in line]
        if safe:
            name = safe[0].split("`")[1]
            return reply(f"<issues>\n- city: stray spaces\n</issues>\n<adopt>{name}</adopt>\n"
                         "<status>needs_more_work</status>")
        return reply("<issues>\n</issues>\n<status>clean</status>")

    with ScriptedLLM(responder=respond) as llm:
        env = {**os.environ, "SMOLCLEAN_MODEL": "openai/test-model", "SMOLCLEAN_API_BASE": llm.api_base,
               "SMOLCLEAN_API_KEY": "test-key"}
        done = learn(drop, tmp_path / "w", "--labels", str(path), "--analyst", "hybrid", env=env)
        assert done.returncode == 0, done.stderr
    assert offers and "breaks no labelled cell" in offers[0] and repr(confirmed) in offers[0], offers
    module = (tmp_path / "w" / "modules" / "products" / "clean_products.py").read_text()
    assert "def strip_whitespace" in module and f"KEPT = {{'city': [{confirmed!r}]}}" in module


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
    alone = learned(tmp_path / "alone")
    assert alone.equals(raw), "without labels the file's own forms stay"

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


def test_a_rule_the_labels_show_wrong_once_is_judged_for_harm_though_it_makes_others_right(tmp_path):
    # Two rows strip the unit ("12 oz" -> "12"), a third confirms "16 oz" as written: the labels do not show the
    # rule's kind of change to be right, so keeping "16 oz" as written does not wave it past the harm check,
    # and a rule rewriting hundreds of cells written like half the column is not learned.
    drop = products(tmp_path / "products.csv")
    sample = label_sample(drop, tmp_path / "to_label.csv")
    twelve = list(sample.index[sample["size"] == "12 oz"][:2])
    sixteen = list(sample.index[sample["size"] == "16 oz"][:1])
    assert len(twelve) == 2 and len(sixteen) == 1
    path = corrected(sample.loc[twelve + sixteen], tmp_path / "corrected.csv",
                     lambda row: row.update(size="12" if row["size"] == "12 oz" else row["size"]))
    taught = learn(drop, tmp_path / "w", "--labels", str(path))
    assert taught.returncode == 0, taught.stderr
    module_dir = tmp_path / "w" / "modules" / "products"
    assert "def normalize_numbers" not in (module_dir / "clean_products.py").read_text()
    traces = [json.loads(p.read_text()) for p in (tmp_path / "w" / "storage" / "products" / "chunk_functions").glob("*.json")]
    reasons = [s["reason"] for t in traces for s in t["steps"]
               if str(s.get("function_name", "")).startswith("normalize_numbers") and "accepted" in s]
    # kept with "16 oz" as written, it passed the labels and went on to the harm check, which sent it back
    assert reasons and all(r.startswith("it would do harm") for r in reasons), reasons
    assert all("16 oz" not in r for r in reasons), "the confirmed value is kept as written"


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
    alone = learned_and_cleaned(drop, later, "groceries", tmp_path / "alone")
    assert (alone["size"] != truth["size"]).sum() >= wrong.sum() * 0.9, "the file alone does not say which is right"

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
    alone = learned_and_cleaned(drop, later, "contacts", tmp_path / "alone")
    assert (alone["phone"] != truth["phone"]).sum() >= wrong.sum() * 0.9, "the file alone does not say which is right"

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
