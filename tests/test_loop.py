"""The per-chunk agent loop with the real sandbox and a real registry file."""

from __future__ import annotations

import pandas as pd

from smolclean_dagster.core.analysts.base import AnalysisRequest, Proposal
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.drops import read_drop
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.core.steps import FinalStep, ProposalStep, VerdictStep


class Recording:
    """Wraps an analyst and keeps every request it was shown."""

    def __init__(self, inner):
        self.inner, self.requests, self.name = inner, [], inner.name

    def propose(self, request: AnalysisRequest) -> Proposal:
        self.requests.append(request)
        return self.inner.propose(request)


class Scripted:
    """Answers with a fixed list of functions (then "clean"), like a model would."""

    name = "scripted"
    trusts_detectors = False

    def __init__(self, codes: list[str]):
        self.codes, self.requests = list(codes), []

    def propose(self, request: AnalysisRequest) -> Proposal:
        self.requests.append(request)
        if not self.codes:
            return Proposal(status="clean")
        return Proposal(function=CleaningFunction.from_code(self.codes.pop(0), columns=["city"]))


def work(df: pd.DataFrame, start: int, stop: int, holdout: pd.DataFrame) -> ChunkWork:
    return ChunkWork(dataset="people", drop="people.csv", chunk_id=f"c{start}", rows=df.iloc[start:stop].reset_index(drop=True),
                     holdout=holdout)


def test_a_later_chunk_sees_the_functions_accepted_for_an_earlier_one(messy_csv, tmp_path, sandbox):
    df = read_drop(messy_csv)
    store = RegistryStore(tmp_path / "registry.json", "people")
    analyst = Recording(RulesAnalyst())
    holdout = df.iloc[50:].reset_index(drop=True)
    first = list(run_chunk(work(df, 0, 25, holdout), analyst, store, sandbox))
    accepted = [s.function_name for s in first if isinstance(s, VerdictStep) and s.accepted]
    assert accepted
    seen_before = len(analyst.requests)
    list(run_chunk(work(df, 25, 50, holdout), analyst, store, sandbox))
    later = analyst.requests[seen_before:]
    if later:  # the second chunk needed the analyst: it was told about every earlier function
        assert set(accepted) <= {s.name for s in later[0].registry}
    # and it was shown its rows as cleaned by them: no surrounding whitespace is left to see
    for request in later:
        assert not request.chunk["name"].str.strip().ne(request.chunk["name"]).any()


def test_rejected_code_is_fed_back_and_a_good_function_is_accepted(messy_csv, tmp_path, sandbox):
    df = read_drop(messy_csv)
    store = RegistryStore(tmp_path / "registry.json", "people")
    bad = 'import os\n\ndef city_upper(df):\n    """Upper-case city."""\n    os.system("true")\n    return df\n'
    raising = 'def city_boom(df):\n    """Boom."""\n    raise ValueError("no such column: town")\n'
    good = 'def city_title(df):\n    """Title-case and strip `city`."""\n    df = df.copy()\n    df["city"] = df["city"].str.strip().str.title()\n    return df\n'
    analyst = Scripted([bad, raising, good])
    steps = list(run_chunk(work(df, 0, 30, df.iloc[50:]), analyst, store, sandbox, LoopSettings(max_steps=5)))
    verdicts = [s for s in steps if isinstance(s, VerdictStep)]
    assert [v.accepted for v in verdicts] == [False, False, True]
    assert "os" in verdicts[0].reason
    assert "no such column: town" in verdicts[1].reason
    assert "rejected" in analyst.requests[1].feedback and "os" in analyst.requests[1].feedback
    assert analyst.requests[2].rejected == ("city_upper", "city_boom")
    assert [f.name for f in store.load().functions] == ["city_title"]
    assert isinstance(steps[-1], FinalStep) and steps[-1].reason == "clean"


def test_a_model_that_never_says_clean_stops_at_max_steps(messy_csv, tmp_path, sandbox):
    df = read_drop(messy_csv)
    noop = 'def city_same(df):\n    """Does nothing."""\n    return df\n'
    analyst = Scripted([noop] * 10)
    steps = list(run_chunk(work(df, 0, 30, df.iloc[50:]), analyst, RegistryStore(tmp_path / "r.json", "people"),
                           sandbox, LoopSettings(max_steps=3)))
    assert sum(isinstance(s, ProposalStep) for s in steps) == 3
    assert steps[-1].reason == "max_steps"
    assert all("made no change" in s.reason for s in steps if isinstance(s, VerdictStep))


def test_the_held_out_rows_are_never_shown_to_the_analyst(messy_csv, tmp_path, sandbox):
    df = read_drop(messy_csv)
    df.loc[55, "name"] = "HELD OUT SENTINEL"
    analyst = Recording(RulesAnalyst())
    list(run_chunk(work(df, 0, 30, df.iloc[50:]), analyst, RegistryStore(tmp_path / "r.json", "people"), sandbox))
    for request in analyst.requests:
        assert "HELD OUT SENTINEL" not in request.chunk.to_csv()


def test_the_gates_judge_each_drop_by_its_own_rows_even_when_a_freed_frame_s_id_comes_back():
    # the drop as cleaned is kept per reference frame; a frame freed by one learning and a new one given the same
    # id by the allocator must not share value counts (one drop's "ENG" on 23 rows judged by another's counts)
    from smolclean_dagster.core.loop import _drop_as_cleaned
    from smolclean_dagster.core.registry import Registry

    registry = Registry(dataset="d")
    for i in range(300):
        frame = pd.DataFrame({"language": [f"lang{i}"] * 5}, dtype=object)
        got = _drop_as_cleaned(registry, frame, frame.copy()).counts.values["language"]
        assert dict(got) == {f"lang{i}": 5}
        del frame, got


class Planner:
    """A model working to its own plan: each chunk's replies in turn, from a script per chunk, then "clean"."""

    name = "planner"
    trusts_detectors = False
    reads_instructions = True

    def __init__(self, scripts: dict[str, list[Proposal]]):
        self.scripts = {chunk: list(replies) for chunk, replies in scripts.items()}

    def propose(self, request: AnalysisRequest) -> Proposal:
        replies = self.scripts[request.chunk_id]
        return replies.pop(0) if replies else Proposal(status="clean")


def test_two_chunks_of_a_wave_adding_the_same_plan_item_add_it_once(messy_csv, tmp_path, sandbox):
    from smolclean_dagster.core.analysts.base import ItemDecline

    df = read_drop(messy_csv)
    holdout = df.iloc[40:].reset_index(drop=True)
    store = RegistryStore(tmp_path / "registry.json", "people")
    needless = ItemDecline(number=2, reason="every code already has five digits")
    analyst = Planner({
        "c0": [Proposal(plan=("city: unify the spellings",),
                        declines=(ItemDecline(number=1, reason="the spellings agree"),)), Proposal(status="clean")],
        # the second wave: two chunks side by side, each adding the line in its own words
        "c10": [Proposal(plan=("zip: pad to 5 digits",), declines=(needless,)), Proposal(status="clean")],
        "c20": [Proposal(plan=("Zip: pad to 5 digits.",), declines=(needless,)), Proposal(status="clean")],
    })
    first = list(run_chunk(work(df, 0, 10, holdout), analyst, store, sandbox))
    assert first[-1].reason == "clean" and store.load().plan == ("city: unify the spellings",)
    beside = [run_chunk(ChunkWork(dataset="people", drop="people.csv", chunk_id=f"c{start}", holdout=holdout,
                                  rows=df.iloc[start:start + 10].reset_index(drop=True),
                                  hidden=frozenset({f"c{other}"})), analyst, store, sandbox)
              for start, other in ((10, 20), (20, 10))]
    for chunk in beside:  # both read the plan of one item and propose before either adds its line
        assert isinstance(next(chunk), ProposalStep)
    finals = [list(chunk)[-1] for chunk in beside]
    assert store.load().plan == ("city: unify the spellings", "zip: pad to 5 digits")
    assert [f.reason for f in finals] == ["clean", "clean"]


def test_a_registry_grown_by_one_function_runs_only_that_one_on_the_rows_it_cleaned_before(sandbox):
    from smolclean_dagster.core import loop
    from smolclean_dagster.core.export import render_module
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry

    def entry(name: str, body: str) -> RegistryEntry:
        code = f'def {name}(df):\n    """A step."""\n    df = df.copy()\n    {body}\n    return df\n'
        return RegistryEntry(function=CleaningFunction.from_code(code, columns=["city"]),
                             provenance=Provenance(drop="d.csv", chunk="c0", step=1, analyst="rules"))

    rows = pd.DataFrame({"city": [" boston", "Chicago ", None, "denver"]}, dtype=object)
    first = Registry(dataset="d").with_entry(entry("strip_city", "df['city'] = df['city'].str.strip()"))
    both = first.with_entry(entry("title_city", "df['city'] = df['city'].str.title()"))
    calls = []

    class Counting:
        def run(self, code, df, **kwargs):
            calls.append(code.count("\ndef ") - 1)  # the functions besides `clean`
            return sandbox.run(code, df, **kwargs)

    loop._CLEANED.clear()
    loop.clean_with(first, rows, Counting())
    grown = loop.clean_with(both, rows, Counting())
    assert calls == [1, 1], "the grown registry ran its new function alone"
    whole = sandbox.run(render_module(both), rows, entry="clean", module=True)
    pd.testing.assert_frame_equal(grown, whole)
    assert grown["city"].tolist()[:2] == ["Boston", "Chicago"]
