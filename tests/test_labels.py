"""Taught by a few corrected rows: `smolclean label` picks them, `smolclean learn --labels` holds every function to
them (a rule that breaks one is dropped, a model's is sent back with the cells), the conventions they show are
served, and the shipped tests replay them. Real Dagster runs in a temporary workdir, the sandbox, real files."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from llm_server import ScriptedLLM, reply
from smolclean_dagster.cli import main
from smolclean_dagster.core.labels import ROW, pick_rows, read_labels
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
