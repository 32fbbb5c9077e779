"""New words are served: a dataset learned with one instruction and learned again from the same file with one more
asks the model for the new item alone, proposes a version that serves it, and that version cleans drops only once
approved; rollback returns to the first. Learned by the embedded driver of `smolclean learn`, versions handled
with the commands as a user types them, and a scripted model over real HTTP that serves only the items its
prompts show open."""

from __future__ import annotations

import dagster as dg
import pandas as pd

from instructed_model import InstructedModel, items_in
from llm_server import ScriptedLLM
from smolclean_dagster.cli import main
from smolclean_dagster.core.instructions import ItemState, coverage_line, stop_reason
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.settings import DatasetSettings
from test_instructed_learning import function

CITIES = ("Austin", "Boston", "Denver", "Seattle", "Portland")
STATES = ("TX", "MA", "CO", "WA", "OR")
TRIM = "Trim spaces around city names."
UPPER = "Write state codes in upper case."
#: What the scripted model writes for an open item whose words hold the key.
MODEL_CODE = {
    "city names": function("strip_city", "Remove the spaces around `city`.",
                           '    df["city"] = df["city"].str.strip()\n'),
    "state codes": function("state_upper", "Write the `state` codes in upper case.",
                            '    df["state"] = df["state"].str.upper()\n'),
}


def customers(path):
    """150 customers: a third of the cities with spaces around them, half the state codes in lower or title case;
    and the truth, each city trimmed and each state code in upper case."""
    rows, truth = [], []
    for i in range(150):
        city, state = CITIES[i % 5], STATES[i % 5]
        rows.append({"id": str(i + 1), "name": f"Customer {i + 1}", "city": f"  {city} " if i % 3 == 0 else city,
                     "state": [state.lower(), state.title(), state, state][i % 4]})
        truth.append({"city": city, "state": state})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path, pd.DataFrame(truth)


def test_learning_again_with_one_more_instruction_proposes_a_version_that_serves_it(tmp_path, capsys):
    data, truth = customers(tmp_path / "customers.csv")
    workdir = tmp_path / "work"
    model = InstructedModel(code=MODEL_CODE)

    def smolclean(*args: str) -> str:
        code = main([*args, "--workdir", str(workdir)])
        out, err = capsys.readouterr()
        assert code == 0, err
        return out

    def cleaned(version: int) -> pd.DataFrame:
        out = smolclean("apply", str(data), "--name", "customers", "-o", str(tmp_path / "out.csv"), "--workers", "1")
        assert f"module: version {version} of 'customers'" in out
        return pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)

    instance = dg.DagsterInstance.ephemeral()
    with ScriptedLLM(responder=model) as llm:
        def learn_with(instructions: str):
            settings = DatasetSettings(name="customers", workdir=workdir, instructions=instructions, concurrency=1,
                                       model="openai/test-model", api_base=llm.api_base, api_key="k")
            return learn(settings, data, instance)

        first = learn_with(TRIM)
        assert coverage_line(first.instructions) == "1 instruction: 1 served"
        asked_before = len(model.prompts)
        second = learn_with(f"{TRIM} {UPPER}")
        asked_after = len(model.prompts)
        learn_with(f"{TRIM} {UPPER}")  # unchanged instructions: the drop is not learned from again
        assert len(model.prompts) == asked_after

    asked = [items_in(p) for p in model.prompts[asked_before:asked_after]]
    assert asked, "learning again with a new instruction asked the model nothing"
    assert all(items[1][0] == "served by strip_city" for items in asked)  # item 1 is not asked for again
    assert any(items[2] == ("OPEN", UPPER) for items in asked)
    assert coverage_line(second.instructions) == "2 instructions: 2 served"
    listed = smolclean("versions", "customers")
    assert "live: 1" in listed and "   2  proposed" in listed and "   3  " not in listed, listed

    before = cleaned(1)  # version 2 waits for approval: drops are still cleaned by version 1
    assert before["city"].tolist() == truth["city"].tolist()
    assert before["state"].tolist() != truth["state"].tolist()

    assert "version 2 of customers is live" in smolclean("approve", "customers", "2")
    after = cleaned(2)
    assert after[["city", "state"]].equals(truth)

    assert "version 1 of customers is live again" in smolclean("rollback", "customers")
    assert cleaned(1)["state"].tolist() == before["state"].tolist()


def test_without_a_model_the_summary_says_how_to_have_new_items_served():
    states = [ItemState(number=1, text=TRIM, state="served", functions=("strip_city",)),
              ItemState(number=2, text=UPPER)]
    said = stop_reason(states, selection="no new dirt", said_clean=False, reads=False)
    assert "item(s) #2 not carried out" in said and "learn again with a model (--model, or SMOLCLEAN_MODEL)" in said
