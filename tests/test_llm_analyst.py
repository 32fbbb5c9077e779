"""The LLM analyst over real HTTP: litellm talking to a scripted OpenAI-compatible server (tests/llm_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from llm_server import ScriptedLLM, fail, garbage, reply
from smolclean_dagster.core.analysts import make_analyst
from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.drops import read_drop
from smolclean_dagster.core.errors import AnalystError
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.instructions import split_instructions
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, clean_with, run_chunk
from smolclean_dagster.core.profile import detect_issues
from smolclean_dagster.core.registry import DroppedFunction, Provenance, RegistryEntry, RegistryStore
from smolclean_dagster.core.steps import ChunkTrace, FinalStep, ProposalStep, VerdictStep

SPEND = '''import pandas as pd


def parse_spend(df: pd.DataFrame) -> pd.DataFrame:
    """Strip the dollar sign from `spend` ("$85.00" -> "85.00"); other values stay as they are."""
    df = df.copy()
    spend = df["spend"]
    is_money = spend.str.startswith("$") & (spend.str.len() > 1) & (spend.str.len() <= 16)
    df["spend"] = spend.str.slice(1).where(is_money, spend)
    return df
'''

CITY = '''def unify_city_case(df):
    """Strip and title-case `city` ("NEW YORK " -> "New York")."""
    df = df.copy()
    df["city"] = df["city"].str.strip().str.title()
    return df
'''

STRIP_NAME = '''def strip_name(df):
    """Remove the spaces around and inside `name` ("  Ann Lee " -> "Ann Lee")."""
    df = df.copy()
    df["name"] = df["name"].str.split().str.join(" ")
    return df
'''

CLEAN = "<issues>\n</issues>\n<status>clean</status>"
INSTRUCTIONS = "1. amounts as plain numbers\n2. cities in title case"


def two_functions(spend: str, *, status: str) -> str:
    """One reply sending `spend` for item 1 and `CITY` for item 2, each in its own <code> with its <serves>."""
    return ("<issues>\n- spend: dollar signs\n- city: case variants\n</issues>\n"
            f"<code>\n```python\n{spend}```\n</code>\n<serves>1</serves>\n"
            f"<code>\n```python\n{CITY}```\n</code>\n<serves>2</serves>\n<status>{status}</status>")


def fenced(code: str, *, issues: str = "- spend: dollar signs in amounts", status: str = "needs_more_work") -> str:
    return f"<issues>\n{issues}\n</issues>\n<code>\n```python\n{code}```\n</code>\n<status>{status}</status>"


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def people(messy_csv: Path) -> pd.DataFrame:
    return read_drop(messy_csv)


def analyst(server: ScriptedLLM, tmp_path: Path, kind: str = "llm", **options):
    """The analyst users get from settings, pointed at the scripted server, with tiny retry waits."""
    settings = dict(
        model="openai/test-model", api_base=server.api_base, api_key="test", cache_dir=tmp_path / "llm_cache",
        backoff_s=0.01, backoff_max_s=0.05, timeout_s=5.0,
    )
    return make_analyst(kind, **{**settings, **options})


def request(df: pd.DataFrame, step: int = 1, **values) -> AnalysisRequest:
    chunk = df.iloc[:20].reset_index(drop=True)
    return AnalysisRequest(dataset="people", chunk_id="c0", step=step, chunk=chunk,
                           findings=tuple(detect_issues(chunk)), **values)


def rows_section(prompt: str) -> str:
    """The rows of the chunk as the prompt shows them."""
    return prompt.split("## The rows")[1].split("## Columns")[0]


def chunk_work(df: pd.DataFrame) -> ChunkWork:
    holdout = df.iloc[50:].reset_index(drop=True)
    holdout["name"] = [f"Quentin Heldout{i}" for i in range(len(holdout))]  # must never reach a prompt
    return ChunkWork(dataset="people", drop="people.csv", chunk_id="c0", rows=df.iloc[:25].reset_index(drop=True),
                     holdout=holdout, reference=df.iloc[25:50].reset_index(drop=True))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(fenced(SPEND), id="fenced"),
        pytest.param(f"<think>The spend column has $ signs & I need <= 16 chars.</think>\n{fenced(SPEND)}", id="think"),
        pytest.param(f"<issues>\n- spend: dollar signs\n</issues>\n<code>\n{SPEND}</code>\n<status>needs_more_work</status>",
                     id="no-fences"),
        pytest.param(f"Sure! Looking at the rows, here is what I found.\n\n{fenced(SPEND)}\n\nLet me know if you need more.",
                     id="prose-around"),
        pytest.param(f"Here is the function:\n\n```python\n{SPEND}```\n", id="fence-only-no-tags"),
    ],
)
def test_code_with_angle_brackets_and_ampersands_survives_any_wrapping(llm, tmp_path, people, text):
    llm.add(reply(text))
    proposal = analyst(llm, tmp_path).propose(request(people))
    assert proposal.error is None
    assert proposal.function is not None and proposal.function.name == "parse_spend"
    assert proposal.function.code == SPEND  # byte for byte: `<=`, `>` and `&` untouched
    assert proposal.function.columns == ("spend",)
    assert proposal.status == "needs_more_work"
    assert proposal.model == "openai/test-model"
    assert proposal.usage.calls == 1 and proposal.usage.prompt_tokens == 100 and proposal.usage.completion_tokens == 20


def test_a_scripted_conversation_learns_a_module_and_a_rerun_is_served_from_the_cache(llm, tmp_path, people, sandbox):
    llm.add(
        reply(f"<think>Amounts carry $ & the city has case variants; start with spend.</think>\n{fenced(SPEND)}"),
        reply(f"Next, the city.\n<issues>\n- spend: dollar signs (solved)\n- city: case variants\n</issues>\n"
              f"<code>\n{CITY}</code>\n<status>needs_more_work</status>"),
        reply(CLEAN),
    )
    store = RegistryStore(tmp_path / "registry.json", "people")
    settings = LoopSettings(max_steps=5, instructions="amounts as plain numbers")
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, settings))

    verdicts = [s for s in steps if isinstance(s, VerdictStep)]
    assert [(v.function_name, v.accepted) for v in verdicts] == [("parse_spend", True), ("unify_city_case", True)]
    assert steps[-1] == FinalStep(step=3, reason="clean", accepted=("parse_spend", "unify_city_case"),
                                  residual_findings=steps[-1].residual_findings)
    module = render_module(store.load())
    assert "def parse_spend(" in module and "def unify_city_case(" in module and "<= 16" in module
    entry = store.load().entries[0]
    assert entry.provenance.model == "openai/test-model" and entry.provenance.prompt_hash
    trace = ChunkTrace(dataset="people", drop="people.csv", chunk_id="c0", rows=25, steps=tuple(steps))
    assert (trace.usage.calls, trace.usage.cached_calls, trace.usage.prompt_tokens) == (3, 0, 300)
    # the second step was shown the chunk as cleaned by the first function: no dollar sign is left
    assert "$" not in rows_section(llm.requests[1].prompt)
    assert "parse_spend" in llm.requests[1].prompt

    # the same inputs again, on a fresh registry: every reply comes from the cache, no HTTP call at all
    rerun_store = RegistryStore(tmp_path / "rerun.json", "people")
    rerun = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), rerun_store, sandbox, settings))
    assert len(llm.requests) == 3
    usage = ChunkTrace(dataset="people", drop="people.csv", chunk_id="c0", rows=25, steps=tuple(rerun)).usage
    assert (usage.calls, usage.cached_calls, usage.prompt_tokens) == (0, 3, 0)
    assert [f.code for f in rerun_store.load().functions] == [f.code for f in store.load().functions]


def test_one_reply_sends_every_function_the_chunk_needs_and_a_clean_status_ends_the_chunk(llm, tmp_path, people,
                                                                                             sandbox):
    # both functions and "clean" in one reply: judged in order as two steps, and no second call
    llm.add(reply(two_functions(SPEND, status="clean")))
    store = RegistryStore(tmp_path / "registry.json", "people")
    settings = LoopSettings(max_steps=5, instructions=INSTRUCTIONS, items=split_instructions(INSTRUCTIONS))
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, settings))

    assert len(llm.requests) == 1
    verdicts = [s for s in steps if isinstance(s, VerdictStep)]
    assert [(v.function_name, v.accepted, v.serves) for v in verdicts] == [("parse_spend", True, (1,)),
                                                                           ("unify_city_case", True, (2,))]
    assert isinstance(steps[-1], FinalStep) and steps[-1].reason == "clean"
    assert [i.state for i in steps[-1].items] == ["served", "served"]
    assert [e.function.name for e in store.load().entries] == ["parse_spend", "unify_city_case"]


def test_every_function_of_a_reply_is_judged_though_the_chunks_step_share_ends_first(llm, tmp_path, people, sandbox):
    # one step left, two functions in the reply: the call is made, so both are judged, and no further call follows
    llm.add(reply(two_functions(SPEND, status="needs_more_work")))
    store = RegistryStore(tmp_path / "registry.json", "people")
    settings = LoopSettings(max_steps=1, instructions=INSTRUCTIONS, items=split_instructions(INSTRUCTIONS))
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, settings))

    assert len(llm.requests) == 1
    assert [(s.function_name, s.accepted) for s in steps if isinstance(s, VerdictStep)] == [
        ("parse_spend", True), ("unify_city_case", True)]
    assert steps[-1].reason == "max_steps"


def test_a_function_of_a_reply_sent_back_leaves_the_others_and_the_next_prompt_gives_every_verdict(llm, tmp_path,
                                                                                                   people, sandbox):
    drops_rows = SPEND.replace("return df", "return df.iloc[1:]")  # drops a row: sent back on its own
    llm.add(reply(two_functions(drops_rows, status="clean")),
            reply(fenced(SPEND) + "\n<serves>1</serves>".replace("needs_more_work", "clean")), reply(CLEAN))
    store = RegistryStore(tmp_path / "registry.json", "people")
    settings = LoopSettings(max_steps=6, instructions=INSTRUCTIONS, items=split_instructions(INSTRUCTIONS))
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, settings))

    verdicts = [(s.function_name, s.accepted) for s in steps if isinstance(s, VerdictStep)]
    assert verdicts[:2] == [("parse_spend", False), ("unify_city_case", True)]
    assert ("parse_spend", True) in verdicts[2:]
    # a rejection keeps the chunk going though the reply said clean, and the model reads it in its next prompt
    assert "function parse_spend was rejected" in llm.requests[1].prompt
    assert "unify_city_case" in llm.requests[1].prompt


def test_a_truncated_reply_is_fed_back_in_the_next_request_and_uses_a_step(llm, tmp_path, people, sandbox):
    cut = fenced(CITY)[:120]
    llm.add(reply(cut, finish_reason="length"), reply(fenced(CITY, issues="- city: case variants")), reply(CLEAN))
    store = RegistryStore(tmp_path / "registry.json", "people")
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=5)))

    first = steps[0]
    assert isinstance(first, ProposalStep) and first.function_name is None
    second_prompt = llm.requests[1].prompt
    assert "your reply could not be used" in second_prompt
    assert "cut off" in second_prompt and "8192 tokens" in second_prompt
    assert [s.function_name for s in steps if isinstance(s, VerdictStep) and s.accepted] == ["unify_city_case"]
    assert steps[-1].reason == "clean" and steps[-1].step == 3


def test_a_model_that_never_answers_in_format_uses_up_max_steps(llm, tmp_path, people, sandbox):
    llm.add(*[reply("I think the data looks mostly fine, but the cities vary.")] * 3)
    store = RegistryStore(tmp_path / "registry.json", "people")
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=3)))
    assert steps[-1].reason == "max_steps" and len(llm.requests) == 3
    assert "no <code> section and no <status>" in llm.requests[2].prompt


def test_the_prompt_holds_instructions_cleaned_rows_and_registry_but_never_held_out_rows(llm, tmp_path, people, sandbox):
    store = RegistryStore(tmp_path / "registry.json", "people")
    earlier = RegistryEntry(
        function=CleaningFunction.from_code(STRIP_NAME, columns=["name"]),
        provenance=Provenance(drop="people.csv", chunk="c-earlier", step=1, analyst="rules"),
    )
    store.update(lambda reg: reg.with_entry(earlier))
    llm.add(reply(CLEAN))
    instructions = "Spend as plain numbers; city names in title case."
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox,
                           LoopSettings(instructions=instructions)))

    assert steps[-1].reason == "clean"
    (sent,) = llm.requests
    assert sent.path == "/v1/chat/completions" and sent.body["model"] == "test-model"
    assert sent.headers["Authorization"] == "Bearer test"
    prompt = sent.prompt
    assert instructions in prompt
    assert "`strip_name` [name]: Remove the spaces around and inside `name`" in prompt
    rows = rows_section(prompt)
    assert '"Ann Lee"' in rows and "  Ann Lee " not in rows  # the chunk as cleaned so far
    assert '"$1200.50"' in rows  # ...and as it is where nothing has cleaned it yet
    assert "Heldout" not in prompt
    assert "<status>clean</status>" in prompt  # the reply format is explained


def test_the_prompt_says_which_functions_validation_took_out_of_the_module_and_why(llm, tmp_path, people, sandbox):
    # A function the model sent joined, then validation over the whole drop took it out (two functions deciding
    # one value opposite ways). Without a word of it, a model saw its function vanish and spent a query on why.
    store = RegistryStore(tmp_path / "registry.json", "people")
    why = "it decides 'ca' opposite to `unify_case_city`, which came first: 'ca' -> 'CA' there, 'Ca' here"
    store.update(lambda reg: reg.model_copy(update={"dropped": (DroppedFunction(name="title_case_city", reason=why),)}))
    llm.add(reply(CLEAN))
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, LoopSettings()))

    assert steps[-1].reason == "clean"
    section = llm.requests[0].prompt.split("## Functions taken out of the module (1)\n")[1].split("\n## ")[0]
    assert f"- `title_case_city`: {why}" in section


def test_429_is_retried_after_the_servers_retry_after_and_attempts_are_counted(llm, tmp_path, people):
    llm.add(fail(429, retry_after="1"), reply(CLEAN))
    proposal = analyst(llm, tmp_path).propose(request(people))
    assert proposal.status == "clean"
    assert (proposal.usage.calls, proposal.usage.attempts) == (1, 2)
    assert llm.requests[1].at - llm.requests[0].at >= 0.95  # honoured Retry-After, not the 0.01 s backoff


def test_a_timeout_is_retried(llm, tmp_path, people):
    llm.add(reply(CLEAN, delay_s=2.0), reply(CLEAN))
    proposal = analyst(llm, tmp_path, timeout_s=0.5).propose(request(people))
    assert proposal.status == "clean" and proposal.usage.attempts == 2


def test_a_garbage_body_is_retried(llm, tmp_path, people):
    llm.add(garbage(), reply(CLEAN))
    proposal = analyst(llm, tmp_path).propose(request(people))
    assert proposal.status == "clean" and proposal.usage.attempts == 2


def test_500s_beyond_the_retry_budget_raise_a_clear_error(llm, tmp_path, people):
    llm.add(*[fail(500, message="model server crashed")] * 3)
    with pytest.raises(AnalystError, match=r"failed 3 time\(s\).*500.*model server crashed.*max_attempts"):
        analyst(llm, tmp_path, max_attempts=3).propose(request(people))
    assert len(llm.requests) == 3


def test_a_bad_key_stops_at_once_and_says_what_to_check(llm, tmp_path, people):
    llm.add(fail(401, message="invalid api key"), reply(CLEAN))
    with pytest.raises(AnalystError, match=r"refused the API key.*invalid api key.*SMOLCLEAN_API_KEY"):
        analyst(llm, tmp_path).propose(request(people))
    assert len(llm.requests) == 1


def test_an_unchanged_request_is_answered_from_the_cache_without_a_call(llm, tmp_path, people):
    llm.add(reply(fenced(SPEND)))
    first = analyst(llm, tmp_path, api_key="sk-secret-123").propose(request(people))
    again = analyst(llm, tmp_path).propose(request(people))  # a new analyst: as in a new Dagster run
    assert len(llm.requests) == 1
    assert (first.usage.calls, first.usage.cached_calls) == (1, 0)
    assert (again.usage.calls, again.usage.cached_calls, again.usage.prompt_tokens) == (0, 1, 0)
    assert again.function == first.function and again.prompt_hash == first.prompt_hash
    transcript = json.loads(Path(again.transcript).read_text(encoding="utf-8"))
    assert transcript["text"] == fenced(SPEND) and transcript["request"]["messages"][1]["role"] == "user"
    assert "sk-secret-123" not in Path(again.transcript).read_text(encoding="utf-8")  # the key is never stored
    # a different request (here: feedback) is a different prompt, so a real call
    llm.add(reply(CLEAN))
    analyst(llm, tmp_path).propose(request(people, feedback="function x was rejected: boom"))
    assert len(llm.requests) == 2


def test_requests_are_spaced_by_the_rpm_limit(llm, tmp_path, people):
    llm.add(*[reply(CLEAN)] * 3)
    limited = analyst(llm, tmp_path, rpm=300, cache_dir=None)  # one request per 0.2 s
    for step in (1, 2, 3):
        limited.propose(request(people, step=step))
    assert llm.requests[2].at - llm.requests[0].at >= 0.3  # two intervals (0.4 s) less connection jitter


def offered(prompt: str) -> list[str]:
    """The names of the ready-made candidates a prompt offers."""
    if "## Ready-made functions" not in prompt:
        return []
    section = prompt.split("## Ready-made functions")[1].split("\n## ")[0]
    return [line.split("`")[1] for line in section.splitlines() if line.startswith("- `")]


def test_hybrid_asks_the_model_every_step_and_a_rule_lands_only_when_the_model_adopts_it(llm, tmp_path, people, sandbox):
    upper = CITY.replace("unify_city_case", "city_upper_case").replace(".str.title()", ".str.upper()")
    adopted: list[str] = []
    ignored: list[str] = []

    def respond(recorded):
        prompt = recorded.prompt
        names = offered(prompt)
        if "city_upper_case" not in prompt:
            # The rules would unify the case of `city` their own way: the user asked for upper case instead.
            ignored.extend(n for n in names if "city" in n)
            return reply(fenced(upper, issues="- city: the user wants it in upper case") + "\n<serves>1</serves>")
        whitespace = [n for n in names if n.startswith("strip_whitespace") and n not in adopted]
        if whitespace:
            adopted.append(whitespace[0])
            return reply(f"<issues>\n- name: stray spaces\n</issues>\n<adopt>{whitespace[0]}</adopt>\n"
                         "<status>needs_more_work</status>")
        return reply(CLEAN)

    llm.responder = respond
    store = RegistryStore(tmp_path / "registry.json", "people")
    hybrid = analyst(llm, tmp_path, kind="hybrid")
    settings = LoopSettings(max_steps=15, instructions="- city in upper case",
                            items=split_instructions("- city in upper case"))
    steps = list(run_chunk(chunk_work(people), hybrid, store, sandbox, settings))

    assert steps[-1].reason == "clean"
    proposals = [s for s in steps if isinstance(s, ProposalStep)]
    assert len(llm.requests) == len(proposals)  # the model decided every step
    assert any("city" in n for n in offered(llm.requests[0].prompt))  # the rules' city fix was offered...
    entries = store.load().entries
    names = [e.function.name for e in entries]
    assert not any(n in names for n in ignored)  # ...and never landed, since the model did not take it
    assert adopted and adopted[0] in names  # an adopted rule lands, with the model that chose it
    taken = next(e for e in entries if e.function.name == adopted[0])
    assert taken.function.rule is not None and taken.provenance.model == "openai/test-model"
    assert next(e for e in entries if e.function.name == "city_upper_case").serves == ("city in upper case",)
    cleaned = clean_with(store.load(), chunk_work(people).rows, sandbox)
    assert cleaned["city"].str.strip().str.isupper().all()


def test_merging_functions_over_http(llm, tmp_path):
    merged = CITY.replace("unify_city_case", "unify_city")
    llm.add(reply(f"<code>\n```python\n{merged}```\n</code>"), reply("<status>keep</status>"))
    llm_analyst = analyst(llm, tmp_path)
    functions = [CleaningFunction.from_code(CITY, columns=["city"]), CleaningFunction.from_code(STRIP_NAME, columns=["name"])]
    result = llm_analyst.merge("people", functions)
    assert result.function is not None and result.function.name == "unify_city" and result.error is None
    assert "def unify_city_case(" in llm.requests[0].prompt and "def strip_name(" in llm.requests[0].prompt
    assert llm_analyst.merge("people", functions[::-1]).function is None


def test_the_cost_of_a_priced_model_is_reported(llm, tmp_path, people):
    llm.add(reply(CLEAN, prompt_tokens=1_000_000, completion_tokens=0))
    proposal = analyst(llm, tmp_path, model="openai/gpt-4o-mini").propose(request(people))
    assert 0.01 < proposal.usage.cost_usd < 10  # from litellm's local price map, no network


def test_a_querys_answer_comes_back_as_an_answer_and_a_rejection_as_a_rejection(llm, tmp_path, people, sandbox):
    boom = 'def city_boom(df):\n    """Boom."""\n    raise ValueError("no such column: town")\n'
    llm.add(reply('<issues>\n- city: spellings\n</issues>\n<query>df["city"].value_counts()</query>'),
            reply(fenced(boom, issues="- city: spellings")), reply(CLEAN))
    store = RegistryStore(tmp_path / "registry.json", "people")
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=5)))
    assert steps[-1].reason == "clean"
    after_query, after_rejection = (r.body["messages"][1]["content"] for r in llm.requests[1:3])  # the step's own part
    answer = after_query.split("## The answer to your query\n")[1].split("\n## ")[0]
    assert answer.startswith("Your query `df[\"city\"].value_counts()` over the drop's rows returned:\ncity\n")
    assert "'Chicago '" in answer  # the city with a space after it is told apart from "Chicago"
    # nothing was rejected: no "send a corrected function"
    assert "## What happened to your previous reply" not in after_query and "corrected" not in after_query
    assert "function city_boom was rejected: FunctionFailed" in after_rejection
    assert "Send `city_boom` corrected" in after_rejection and "## The answer to your query" not in after_rejection
    assert '`df["city"].value_counts()` returned:' in after_rejection.split("## Your earlier queries on this chunk")[1]
    assert "## Rows of one entity" in after_query  # the entity (or that there is none) is said in every step


def test_an_item_of_the_models_plan_is_declined_alone(llm, tmp_path, people, sandbox):
    plan = "<plan>\n- name: remove the spaces around and inside names\n- spend: check the amounts\n</plan>"
    llm.add(reply(fenced(STRIP_NAME, issues="- name: stray spaces") + f"\n{plan}\n<serves>1</serves>"),
            reply("<issues>\n- spend: amounts look right\n</issues>\n<declined>\n- 2: every amount is written one way; "
                  "nothing to fix\n</declined>"),
            reply(CLEAN))
    store = RegistryStore(tmp_path / "registry.json", "people")
    steps = list(run_chunk(chunk_work(people), analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=5)))
    registry = store.load()
    assert {s.number: s.state for s in registry.coverage(registry.items_for(""))} == {1: "served", 2: "declined"}
    after_decline = llm.requests[2].prompt
    assert "2. [declined: every amount is written one way; nothing to fix] spend: check the amounts" in after_decline
    assert "could not be used" not in after_decline and "proposed no function" not in after_decline
    assert steps[-1].reason == "clean" and len(llm.requests) == 3
