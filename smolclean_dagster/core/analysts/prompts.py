"""Prompts for the LLM analyst: load the Jinja2 templates of `prompts/*.yaml` and fill them.

The templates hold every word the model reads; this module only chooses and shapes the data that goes
into them, within character budgets: the rows (as cleaned so far), their profile, the detector findings,
value counts over the rest of the drop, and the registry's names and docstrings.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import numpy as np
import pandas as pd
import yaml

from .. import entities, harm
from ..detectors.case_variants import CONVENTION_SHARE, KEEP_CELLS, KEEP_SHARE
from ..detectors import whitespace
from ..detectors.cells import DOMINANT_SHAPE
from ..errors import AnalystError
from ..evidence import drop_evidence
from ..functions import CleaningFunction
from ..profile import profile_columns
from ..queries import EMPTY, MAX_QUERY_CHARS, RESULT_BUDGET, RESULT_ROWS
from ..sandbox.gate import ALLOWED_IMPORTS
from ..validate import COST_LIMIT, COST_ROWS
from ..labels import Labels
from .base import AnalysisRequest, RegisteredSummary
from .client import Messages
from .replies import MAX_FUNCTIONS

#: Budgets in characters (about 4 characters per token). A step's prompt stays near 3-4k tokens on a table of a
#: dozen columns: rows are shown as JSON arrays under one header line (keys are not repeated on every row).
REGISTRY_BUDGET = 4_000
ROWS_BUDGET = 5_000
VALUE_COUNTS_BUDGET = 1_500
CANDIDATE_TEXT = 240
#: Functions taken out of the module shown with their reasons at most (the latest; the rest are counted).
TAKEN_OUT = 10
#: Columns with at most this many distinct values over the reference rows get their value counts shown.
MAX_DISTINCT_SHOWN = 40


@dataclass(frozen=True)
class PromptEntry:
    """One registered function as the prompt shows it: its full docstring, its first line, or nothing more."""

    name: str
    columns: tuple[str, ...]
    text: str
    complete: bool = True
    evidence: str = ""
    constants: tuple[str, ...] = ()
    on_labels: str = ""


@dataclass(frozen=True)
class ColumnRow:
    """One line of the prompt's column table: typed values (numbers, booleans, arrays) count as filled."""

    column: str
    filled: int
    empty: int
    null_tokens: int
    distinct: int
    dominant_shape: str
    dominant_share: float


@dataclass(frozen=True)
class ColumnCounts:
    """The most frequent values of one column over the reference rows."""

    name: str
    distinct: int
    top: tuple[tuple[str, int], ...]


@cache
def load_template(name: str) -> dict[str, jinja2.Template]:
    """The `system` and `user` templates of `prompts/<name>.yaml`.

    The repository's top-level `prompts/` folder is installed as the package `smolclean_dagster.prompts`
    (pyproject's package-dir), so a wheel and an editable install find the same files.
    """
    try:
        source = resources.files("smolclean_dagster.prompts") / f"{name}.yaml"
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (ImportError, OSError, yaml.YAMLError) as exc:
        raise AnalystError(f"prompt template prompts/{name}.yaml cannot be read: {exc}; reinstall the package") from exc
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False,
        trim_blocks=True, lstrip_blocks=True,
    )
    # Jinja's own `tojson` escapes <, > and & for HTML; the model must see values exactly as written.
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
    return {part: env.from_string(data[part]) for part in ("system", "user")}


@cache
def template_version(name: str) -> str:
    """The `version` that `prompts/<name>.yaml` carries (see prompts/CHANGELOG.md)."""
    source = resources.files("smolclean_dagster.prompts") / f"{name}.yaml"
    try:
        version = yaml.safe_load(source.read_text(encoding="utf-8")).get("version")
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        raise AnalystError(f"prompt template prompts/{name}.yaml cannot be read: {exc}; reinstall the package") from exc
    if version is None:
        raise AnalystError(f"prompt template prompts/{name}.yaml has no `version`; give it one (prompts/CHANGELOG.md)")
    return str(version)


def template_versions() -> dict[str, str]:
    """The version of every prompt template, by name: what a learning run records it used.

    Example:
        >>> sorted(template_versions())
        ['analysis', 'consolidation']
    """
    folder = resources.files("smolclean_dagster.prompts")
    names = sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
    return {name: template_version(name) for name in names}


def render(name: str, **context: Any) -> Messages:
    """The chat messages of template `name` filled with `context` (a missing variable is an error)."""
    try:
        return [
            {"role": role, "content": template.render(**context).strip() + "\n"}
            for role, template in load_template(name).items()
        ]
    except jinja2.UndefinedError as exc:
        raise AnalystError(f"prompt template prompts/{name}.yaml uses a value it was not given: {exc}") from exc


def prompt_hash(messages: Messages) -> str:
    """A short, stable hash of the messages: which prompt produced a function (registry provenance)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:12]


def analysis_messages(
    request: AnalysisRequest,
    *,
    allow_row_drops: bool = False,
    registry_budget: int = REGISTRY_BUDGET,
    rows_budget: int = ROWS_BUDGET,
    value_counts_budget: int = VALUE_COUNTS_BUDGET,
) -> Messages:
    """The messages for one analysis step: the chunk as cleaned so far, never the held-out rows.

    Example:
        >>> req = AnalysisRequest(dataset="demo", chunk_id="c0", step=1, chunk=pd.DataFrame({"a": [" x"]}))
        >>> '[" x"]' in analysis_messages(req)[1]["content"]
        True
    """
    rows, shown = rows_as_arrays(request.chunk, rows_budget)
    focus = {f.column for f in request.findings}
    entries = registry_for_prompt(request.registry, registry_budget, focus_columns=focus)
    return render(
        "analysis",
        dataset=request.dataset,
        chunk_id=request.chunk_id,
        step=request.step,
        instructions=request.instructions,
        registry=entries,
        registry_shortened=sum(1 for e in entries if not e.complete),
        rejected=list(request.rejected),
        taken_out=[(name, _clip(" ".join(why.split()), CANDIDATE_TEXT)) for name, why in request.taken_out][-TAKEN_OUT:],
        taken_out_total=len(request.taken_out),
        feedback=request.feedback,
        rows=rows,
        rows_shown=shown,
        rows_total=len(request.chunk),
        profiles=column_rows(request.chunk),
        findings=list(request.findings),
        value_counts=value_counts(request.reference, value_counts_budget),
        allowed_imports=sorted(ALLOWED_IMPORTS),
        cost_limit=COST_LIMIT,
        cost_rows=f"{COST_ROWS:,}",
        allow_row_drops=allow_row_drops,
        items=list(request.items),
        planned=request.planned,
        why=request.why,
        earlier_queries=[{"query": q, "answer": a} for q, a in request.earlier_queries],
        answer={"query": request.answer[0], "answer": request.answer[1]} if request.answer else None,
        sent_back=request.sent_back,
        query_empty=EMPTY,
        judged=JUDGED,
        entity=_entity(request),
        labels=_labels(request.labels),
        query_chars=MAX_QUERY_CHARS,
        max_functions=MAX_FUNCTIONS,
        query_rows=RESULT_ROWS,
        query_budget=f"{RESULT_BUDGET:,}",
        open_items=[f"#{i.number}" for i in request.items if i.state == "open"],
        evidence=_evidence(request.reference),
        evidence_rows=0 if request.reference is None else len(request.reference),
        candidates=[
            PromptEntry(name=c.name, columns=c.columns, text=_clip(_one_line(c.docstring), CANDIDATE_TEXT),
                        evidence=_clip(_one_line(c.evidence), CANDIDATE_TEXT),
                        on_labels=_clip(_one_line(c.on_labels), CANDIDATE_TEXT))
            for c in request.candidates
        ],
    )


def _one_line(text: str) -> str:
    """`text` on one line: its line breaks and the indentation around them become one space, and every other run
    of spaces stays, as the values quoted in it are written ("confirmed 'Yeti  Imperial Stout', it writes 'Yeti
    Imperial Stout'" says what the function changes only with the double space kept).

    Example:
        >>> _one_line("Strip spaces ('a  b' -> 'a b').\\n\\n    Every other value is kept.")
        "Strip spaces ('a  b' -> 'a b'). Every other value is kept."
    """
    return re.sub(r"[^\S\n]*\n\s*", " ", text.strip())


#: The numbers the checks judge a function by (core/harm.py, core/entities.py), as the prompt states them: written
#: once, in the code that applies them.
JUDGED = {
    "keep_cells": KEEP_CELLS,
    "keep_share": f"{KEEP_SHARE:.0%}",
    "convention_share": f"{CONVENTION_SHARE:.0%}",
    "common_cells": harm.COMMON_CELLS,
    "rarer": harm.RARER,
    "harm_share": f"{harm.HARM_SHARE:.0%}",
    "min_cells": harm.MIN_HARM_CELLS,
    "contradicted_share": f"{harm.CONTRADICTED_SHARE:.0%}",
    "dominant_share": f"{DOMINANT_SHAPE:.0%}",
    "min_group": entities.MIN_GROUP,
    "grouped_share": f"{entities.MIN_GROUPED_SHARE:.0%}",
    "filled_share": f"{entities.MIN_FILLED_SHARE:.0%}",
    "free_text_chars": whitespace.FREE_TEXT_MEDIAN_CHARS,
}


def _entity(request: AnalysisRequest) -> dict | None:
    """The drop's entity column and the columns it names the entity of, as the harm gate finds them over the
    reference rows (`entities.entity_keys`); None when no column names one (or there are no reference rows)."""
    keys = request.entities
    if keys is None:
        reference = request.reference
        keys = {} if reference is None or reference.empty else entities.entity_keys(reference)
    if not keys:
        return None
    return {"key": next(iter(keys.values())), "columns": list(keys)}


#: Labelled rows shown in a prompt, at most (corrected rows first), and characters per value shown.
LABEL_ROWS, LABEL_VALUE = 20, 60


def _labels(labels: Labels | None) -> list[dict]:
    """The user's labelled rows for the prompt: per row its corrections and the cells it confirms."""
    if labels is None:
        return []
    rows = []
    for number, before, after in labels.as_records():
        corrected = [{"column": c, "before": _clip(str(before[c]), LABEL_VALUE), "after": _clip(str(after[c]), LABEL_VALUE)}
                     for c in after if before[c] != after[c]]
        confirmed = [{"column": c, "value": _clip(str(after[c]), LABEL_VALUE)} for c in after if before[c] == after[c]]
        rows.append({"row": number, "corrected": corrected, "confirmed": confirmed})
    rows.sort(key=lambda r: not r["corrected"])  # stable: corrected rows first, each in drop order
    return rows[:LABEL_ROWS]


#: Characters of whole-drop evidence in a prompt (about a thousand tokens).
EVIDENCE_BUDGET = 4000


def _evidence(reference: pd.DataFrame | None) -> str:
    """The whole-drop evidence (see `core/evidence.py`) over the reference rows as cleaned so far: what is left."""
    if reference is None or reference.empty:
        return ""
    return drop_evidence(reference).render(EVIDENCE_BUDGET)


def column_rows(df: pd.DataFrame) -> list[ColumnRow]:
    """The column table: the text profile (shapes, null tokens) with every value counted, typed ones too.

    A column whose values are not text (numbers after a function converted them, JSON arrays) shows their
    JSON types as its shape ("number", "array"), since text shapes say nothing about them.
    """
    rows = []
    for profile, name in zip(profile_columns(df), df.columns):
        # Python lists, not Series.map: pandas would infer a string dtype and turn None back into NaN.
        values = [_plain(v) for v in df[name].tolist()]
        present = [v for v in values if v is not None and v != ""]
        typed = [v for v in present if not isinstance(v, str)]
        distinct = len({json.dumps(v, ensure_ascii=False, sort_keys=True, default=str) for v in present})
        shape, share = profile.dominant_shape, profile.dominant_share
        if len(typed) > len(present) - len(typed):
            kinds = pd.Series([_json_kind(v) for v in typed]).value_counts()
            shape, share = str(kinds.index[0]), round(float(kinds.iloc[0]) / len(present), 4)
        rows.append(ColumnRow(column=profile.column, filled=len(present), empty=len(values) - len(present),
                              null_tokens=profile.null_tokens, distinct=distinct, dominant_shape=shape,
                              dominant_share=share))
    return rows


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def merge_messages(dataset: str, functions: Sequence[CleaningFunction], instructions: str = "") -> Messages:
    """The messages asking the model to merge `functions` (in module order) into one."""
    return render(
        "consolidation", dataset=dataset, functions=list(functions), instructions=instructions,
        allowed_imports=sorted(ALLOWED_IMPORTS), cost_limit=COST_LIMIT, cost_rows=f"{COST_ROWS:,}",
    )


def registry_for_prompt(
    registry: Sequence[RegisteredSummary], budget: int, *, focus_columns: set[str] = frozenset()
) -> list[PromptEntry]:
    """Every registered function, in module order, described as fully as `budget` characters allow.

    Nothing is ever left out: a function the model cannot see is a function it writes again (the
    competitor evicted old docstrings and got four re-creations in fifteen calls). When the full
    docstrings do not fit, every entry first gets its docstring's first line; then full docstrings are
    given back in this order until the budget is spent:
      1. functions touching a column the detectors still find issues in (the model is about to work
         there and must know exactly what is done already),
      2. then the most recently accepted first (the newest knowledge is the least likely to be
         restated by older entries).
    If even the first lines overflow, the newest-last entries keep just their names and columns.
    """
    full = [_entry(s, s.docstring.strip()) for s in registry]
    if _size(full) <= budget:
        return full
    first = [_entry(s, _first_line(s), complete=False) for s in registry]
    if _size(first) > budget:
        return _fit_names(registry, first, budget)
    order = sorted(
        range(len(registry)),
        key=lambda i: (not (set(registry[i].columns) & focus_columns), -i),
    )
    chosen = list(first)
    for i in order:
        candidate = chosen[:i] + [full[i]] + chosen[i + 1 :]
        if _size(candidate) <= budget:
            chosen = candidate
    return chosen


def _fit_names(registry: Sequence[RegisteredSummary], first: list[PromptEntry], budget: int) -> list[PromptEntry]:
    """First lines for the oldest entries while they fit, bare names (never nothing) for the rest."""
    bare = [_entry(s, "", complete=False) for s in registry]
    chosen = list(bare)
    for i in range(len(registry)):
        candidate = chosen[:i] + [first[i]] + chosen[i + 1 :]
        if _size(candidate) > budget:
            break
        chosen = candidate
    return chosen


def _entry(summary: RegisteredSummary, text: str, *, complete: bool = True) -> PromptEntry:
    return PromptEntry(name=summary.name, columns=tuple(summary.columns), text=" ".join(text.split()), complete=complete,
                       constants=tuple(summary.constants))


def _first_line(summary: RegisteredSummary) -> str:
    return (summary.docstring.strip().splitlines() or [""])[0]


def _size(entries: list[PromptEntry]) -> int:
    return sum(len(e.name) + len(e.text) + sum(len(c) + 2 for c in (*e.columns, *e.constants)) + 8 for e in entries)


def rows_as_arrays(df: pd.DataFrame, budget: int) -> tuple[str, int]:
    """A header line with the column names, then each row as a JSON array, as many rows as fit in `budget`
    characters, and how many rows that is.

    JSON shows what matters for cleaning: surrounding spaces inside the quotes, a real null apart from the
    text "N/A", a number apart from the text "12", an array apart from the text "[1, 2]".
    """
    lines = [json.dumps([str(c) for c in df.columns], ensure_ascii=False)]
    used = len(lines[0]) + 1
    for row in df.itertuples(index=False, name=None):
        line = json.dumps([_plain(v) for v in row], ensure_ascii=False, default=str)
        if len(lines) > 1 and used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines), len(lines) - 1


def value_counts(reference: pd.DataFrame | None, budget: int) -> list[ColumnCounts]:
    """The most frequent values of each low-cardinality column over the reference rows, within `budget`.

    The budget is shared evenly between the columns, so a wide table still shows every column a little.
    """
    if reference is None or reference.empty:
        return []
    candidates = []
    for name in reference.columns:
        values = reference[name].map(_plain).dropna()
        # Counted by their JSON text, so the number 12 and the text "12" stay two values, as they are.
        counts = values.map(lambda v: json.dumps(v, ensure_ascii=False, default=str)).value_counts(sort=True)
        if 1 < len(counts) <= MAX_DISTINCT_SHOWN:
            candidates.append((str(name), counts))
    if not candidates:
        return []
    share = budget // len(candidates)
    out = []
    for name, counts in candidates:
        top, used = [], len(name) + 20
        for value, count in counts.items():
            cost = len(value) + len(str(count)) + 4
            if top and used + cost > share:
                break
            top.append((value, int(count)))
            used += cost
        out.append(ColumnCounts(name=name, distinct=len(counts), top=tuple(top)))
    return out


def _plain(value: object) -> object:
    """A cell as JSON can show it: None for missing, Python values for numpy ones (arrays as lists)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            return value
    return value
