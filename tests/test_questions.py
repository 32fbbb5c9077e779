"""Questions where the file does not decide: learning with no instructions ends with the conventions a drop leaves
open (in the summary, report.md, the UI and the residual check), and answering them (the UI's job) gives a next
version that serves them. Real learning with the rules analyst, real Dagster runs on the workdir's instance, real
files, the sandbox."""

from __future__ import annotations

import contextlib
import csv
import io
import random
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.cli import main
from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.instructions import ItemState, split_instructions, with_items
from smolclean_dagster.core.questions import ask_questions
from smolclean_dagster.instance import workdir_instance

NAME = "customers"
FIRST = ["Anna", "Ben", "Carla", "David", "Eva", "Frank", "Grace", "Hugo", "Iris", "Jon", "Kara", "Liam"]
LAST = ["Smith", "Jones", "Brown", "Miller", "Davis", "Garcia", "Wilson", "Moore"]
CITIES = ["Boston", "Denver", "Austin", "Seattle", "Chicago", "Portland"]


def customer_export(path: Path, rows: int = 300) -> Path:
    """A customer export as a user's system writes it: names, cities, an order quantity written "12 oz" on three
    rows in five and "12" on the others, and "N/A" for a missing email or phone on many rows, beside empty cells."""
    rng = random.Random(3)
    records = []
    for i in range(rows):
        first, last = FIRST[i % len(FIRST)], LAST[(i * 3) % len(LAST)]
        size = rng.choice([6, 8, 12, 16, 24])
        email = "N/A" if i % 6 == 1 else "" if i % 11 == 2 else f"{first.lower()}.{last.lower()}{i}@example.com"
        phone = "N/A" if i % 7 == 3 else "" if i % 13 == 4 else f"555-{1000 + i:04d}"
        records.append({"customer_id": f"C{1000 + i}", "name": f"{first} {last}", "city": CITIES[i % len(CITIES)],
                        "quantity": f"{size} oz" if i % 5 < 3 else str(size), "email": email, "phone": phone})
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return path


def learn(drop: Path, workdir: Path) -> str:
    """`smolclean learn` with no instructions, as a user runs it; its summary."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["learn", str(drop), "--name", NAME, "--workdir", str(workdir), "--concurrency", "1",
                     "--chunk-budget", "1"])
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A workdir where the export was learned once, with no instructions, and what the user saw of it."""
    tmp = tmp_path_factory.mktemp("questions")
    drop, workdir = customer_export(tmp / "customers.csv"), tmp / "w"
    summary = learn(drop, workdir)
    report = (workdir / "modules" / NAME / "report.md").read_text(encoding="utf-8")
    with workdir_instance(workdir) as instance:
        [module] = instance.fetch_materializations(dg.AssetKey([NAME, "cleaning_module"]), limit=1).records
        check = dg.AssetCheckKey(dg.AssetKey([NAME, "cleaned_data"]), "residual_issues")
        [residual] = instance.event_log_storage.get_asset_check_execution_history(check, limit=1)
    # what `smolclean answer` needs, kept as learning left it (the tests below answer in the workdir itself)
    answering = tmp / "answering"
    for part in ("datasets", f"drops/{NAME}", f"storage/{NAME}/questions"):
        shutil.copytree(workdir / part, answering / part)
    return {"drop": drop, "workdir": workdir, "answering": answering, "summary": summary, "report": report,
            "ui": module.asset_materialization.metadata,
            "residual": residual.event.dagster_event.event_specific_data}


def test_learning_with_no_instructions_ends_with_the_two_questions_the_file_leaves_open(learned):
    summary, report = learned["summary"], learned["report"]
    assert "questions: 2 the drop leaves open" in summary, summary
    assert f"smolclean answer {NAME} --workdir {learned['workdir']}" in summary
    # "N/A" beside empty cells in two columns is one question; "12 oz" beside "12" the other; counts and examples
    assert "1. \"No value\" is written out in columns 'email' and 'phone'" in summary
    assert "'email': 'N/A' on 50 rows beside 23 empty cells" in summary
    assert "2. Column 'quantity' writes 'oz' on 180 numbers" in summary and "no unit on 120" in summary
    assert "\"Write 'N/A' as empty in columns 'email' and 'phone'.\"" in summary
    assert "\"Write the numbers of column 'quantity' without their unit ('oz').\"" in summary
    assert "'12 oz' -> '12'" in summary
    # report.md and the UI show the same questions, as a table
    assert "## Questions" in report
    section = report.split("## Questions", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith(("| 1 |", "| 2 |", "| 3 |"))]
    assert len(table) == 2 and "email, phone" in table[0] and "quantity" in table[1], report
    # options apart with a separator the UI's markdown keeps (it drops an HTML <br>)
    assert "<br>" not in table[0] and " · 2) keep them as written" in table[0], table[0]
    assert learned["ui"]["questions_open"].value == 2
    assert "Write 'N/A' as empty in columns 'email' and 'phone'." in learned["ui"]["questions"].value
    assert f"`{NAME}_answer`" in learned["ui"]["questions"].value
    # the cleaned drop's residual check fails on exactly what the questions ask about, and says so
    residual = learned["residual"]
    assert not residual.passed
    assert residual.description.startswith("Fails only on what the last learning asked about, question 1 (email, "
                                           "phone) and question 2 (quantity)")


def test_answering_in_the_uis_job_gives_a_next_version_that_serves_the_answers(learned, sandbox):
    workdir, drop = learned["workdir"], learned["drop"]
    defs = build_defs(DatasetSettings.for_workdir(workdir, NAME))
    job = defs.resolve_job_def(f"{NAME}_answer")
    with workdir_instance(workdir) as instance:
        for question in (1, 2):
            run = job.execute_in_process(instance=instance, run_config={
                "ops": {f"{NAME}_record_answer": {"config": {"question": question, "option": 1}}}})
            assert run.success
    saved = DatasetSettings.for_workdir(workdir, NAME).instructions
    assert [i.text for i in split_instructions(saved)] == [
        "Write 'N/A' as empty in columns 'email' and 'phone'.",
        "Write the numbers of column 'quantity' without their unit ('oz').",
    ]

    summary = learn(drop, workdir)
    assert "instructions: 2 instructions: 2 served" in summary, summary
    assert "version: 2, proposed" in summary
    assert "questions: none" in summary
    # version 2's module writes the values as the answers say, and nothing else
    module = (workdir / "storage" / NAME / "versions" / "2" / f"clean_{NAME}.py").read_text(encoding="utf-8")
    before = pd.read_csv(drop, dtype=str, keep_default_na=False)
    after = sandbox.run(module, before, entry="clean", module=True)
    for column in ("email", "phone"):
        assert (before[column] == "N/A").sum() > 40
        # "N/A" and the empty cells become the same null (written empty in a CSV); every other value stays
        assert after[column].fillna("").tolist() == before[column].replace("N/A", "").tolist()
    assert after["quantity"].tolist() == before["quantity"].str.removesuffix(" oz").tolist()
    assert after[["customer_id", "name", "city"]].equals(before[["customer_id", "name", "city"]])


def test_smolclean_answer_asks_each_open_question_and_records_the_option_chosen(learned, monkeypatch, capsys):
    workdir = learned["answering"]
    monkeypatch.setattr("sys.stdin", io.StringIO("3\n1\n\n"))  # no option 3: asked again; then 1; skip the other
    assert main(["answer", NAME, "--workdir", str(workdir)]) == 0
    out = capsys.readouterr().out
    assert "'3' is no option of question 1" in out
    assert "question 1: \"Write 'N/A' as empty in columns 'email' and 'phone'.\" joins the instructions" in out
    assert f"smolclean learn {workdir / 'drops' / NAME / 'customers.csv'} --name {NAME}" in out
    assert DatasetSettings.for_workdir(workdir, NAME).instructions == "- Write 'N/A' as empty in columns 'email' and 'phone'."

    # for scripts: an option that keeps the cells as they are settles the question, with nothing to learn
    assert main(["answer", NAME, "--workdir", str(workdir), "--question", "2", "--option", "2"]) == 0
    out = capsys.readouterr().out
    assert "smolclean learn" not in out
    assert [i.text for i in split_instructions(DatasetSettings.for_workdir(workdir, NAME).instructions)][1] == \
        "Keep the numbers of column 'quantity' as written, with and without 'oz'."
    assert main(["answer", NAME, "--workdir", str(workdir)]) == 0
    assert "no open question" in capsys.readouterr().out
    assert main(["answer", NAME, "--workdir", str(workdir), "--question", "5", "--option", "1"]) == 2
    assert "has no question 5 (its questions: 1, 2)" in capsys.readouterr().err


def frame() -> pd.DataFrame:
    """A drop of 200 rows leaving each kind of convention open: "N/A" beside empty cells, "12 oz" beside "12",
    dates in two formats and two spellings of values, each on many rows."""
    return pd.DataFrame({
        "city": ["Boston"] * 50 + ["BOSTON"] * 40 + ["Denver"] * 60 + ["St. Louis"] * 30 + ["St Louis"] * 20,
        "signup": [f"0{1 + i % 9}/1{i % 9}/{2000 + i % 20}" for i in range(110)]
        + [f"{2000 + i % 20}-0{1 + i % 9}-1{i % 9}" for i in range(90)],
        "qty": ["12 oz"] * 120 + ["12"] * 80,
        "note": ["N/A"] * 30 + [""] * 20 + ["ok"] * 150,
    })


def test_each_answer_is_an_instruction_the_rules_serve_and_settles_its_question(sandbox):
    df = frame()
    questions = ask_questions(df, dataset="d", drop="d.csv", said="").questions
    assert {q.kind: q.columns for q in questions} == {
        "no_value": ("note",), "date_format": ("signup",), "units": ("qty",), "spellings": ("city",)}
    for question in questions:
        answer = question.options[0].instruction
        items = tuple(ItemState(number=i.number, text=i.text) for i in split_instructions(answer))
        cleaned = df
        for _ in range(3):  # the rules propose one function per step, as in the agent loop
            proposal = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=cleaned,
                                                              reference=cleaned, instructions=answer, items=items))
            if proposal.function is None or not set(proposal.function.columns) & set(question.columns):
                break
            assert proposal.serves == (1,), (question.kind, proposal.function.name)
            cleaned = sandbox.run(proposal.function.code, cleaned, entry=proposal.function.name)
        left = ask_questions(cleaned, dataset="d", drop="d.csv", said="").questions
        assert question.kind not in {q.kind for q in left}, (question.kind, answer)
        untouched = [c for c in df.columns if c not in question.columns]
        assert cleaned[untouched].equals(df[untouched]), question.kind


def test_a_question_is_not_asked_once_the_instructions_or_the_labels_settle_it():
    df = frame()
    kinds = {q.kind for q in ask_questions(df, dataset="d", drop="d.csv", said="").questions}
    assert kinds == {"no_value", "date_format", "units", "spellings"}
    said = with_items("", ["Write N/A as null.", "Keep the numbers of column 'qty' as written.",
                           "Write the dates as ISO 8601.", "Write 'BOSTON' as 'Boston' in column 'city'."])
    left = ask_questions(df, dataset="d", drop="d.csv", said=said).questions
    assert [q.kind for q in left] == ["spellings"] and "BOSTON" not in left[0].text  # "St Louis" is still open
    # what the user's corrections show settles a question too (the words `Labels.conventions` writes)
    labelled = ask_questions(df, dataset="d", drop="d.csv", said="Write placeholders as empty. Write numbers without units.")
    assert {q.kind for q in labelled.questions} == {"date_format", "spellings"}


def test_an_answer_for_some_columns_is_served_on_those_only(sandbox):
    df = frame().assign(other=["N/A"] * 40 + [""] * 10 + ["x"] * 150)
    answer = "Write 'N/A' as empty in column 'note'."
    items = (ItemState(number=1, text=answer),)
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=df, reference=df,
                                                      instructions=answer, items=items))
    assert proposal.function.columns == ("note",) and proposal.serves == (1,)
    cleaned = sandbox.run(proposal.function.code, df, entry=proposal.function.name)
    assert not (cleaned["note"] == "N/A").any() and (cleaned["other"] == "N/A").sum() == 40
    [still] = [q for q in ask_questions(cleaned, dataset="d", drop="d.csv", said=answer).questions if q.kind == "no_value"]
    assert still.columns == ("other",)


def test_an_answer_that_keeps_cells_as_written_is_carried_out_by_changing_nothing():
    df = frame()[["note"]]
    keep = "Keep 'N/A' as written in column 'note'."
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=df, reference=df,
                                                      instructions=keep, items=(ItemState(number=1, text=keep),)))
    assert proposal.function is None and proposal.status == "clean"
    assert [(d.number, d.reason) for d in proposal.declines] == [(1, "kept as written, as asked: no rule changes these cells")]


def test_values_written_in_two_cases_are_asked_as_the_columns_case_which_reaches_every_value(sandbox):
    df = pd.DataFrame({"city": ["ROCHESTER"] * 30 + ["Rochester"] * 40 + ["EL PASO"] * 25 + ["El Paso"] * 20
                       + ["GREEN BAY"] * 3 + ["McAllen"] * 6})
    [question] = ask_questions(df, dataset="d", drop="d.csv", said="").questions
    title = next(o for o in question.options if o.choice == "every value in title case")
    assert title.instruction == "Write the values of column 'city' in title case." and title.cells == 58
    items = (ItemState(number=1, text=title.instruction),)
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=df, reference=df,
                                                      instructions=title.instruction, items=items))
    assert proposal.serves == (1,)
    cleaned = sandbox.run(proposal.function.code, df, entry=proposal.function.name)
    # "GREEN BAY", never written two ways, is written so too; "McAllen" keeps its capital
    assert set(cleaned["city"]) == {"Rochester", "El Paso", "Green Bay", "McAllen"}
    assert not ask_questions(df, dataset="d", drop="d.csv", said=title.instruction).questions
