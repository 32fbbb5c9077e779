"""Questions where the file does not decide: the conventions a drop leaves open, asked instead of guessed.

The drop as the module cleans it may still write one thing two ways, each on many rows, with nothing in the
file to say which is right:
- "no value" spelled out ("N/A", "-", "null") beside empty cells;
- numbers with a unit on many cells and without it on many others ("12 oz" beside "12");
- one value spelled two ways ("Boston" and "BOSTON", "St. Louis" and "St Louis");
- dates in two formats that the module leaves as written.
Each becomes a `Question`: the columns, what is open (with counts and examples) and the options, each with the
cells it changes and the instruction item it becomes when chosen, worded so that the rules analyst serves it
(`analysts/asked.py`) and a model reads it. A question is not asked when the instructions, or the conventions the
user's labelled rows show, already settle it. Answered, the item joins the dataset's instructions, and the next
learning serves it.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"qty": ["12 oz"] * 30 + ["12"] * 20, "note": ["N/A"] * 10 + [""] * 10 + ["ok"] * 30})
    >>> [q.kind for q in ask_questions(df, dataset="d", drop="d.csv", said="").questions]
    ['no_value', 'units']
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from .analysts.asked import (
    asked_case,
    asked_rewrites,
    asks_for_iso_dates,
    asks_for_plain_numbers,
    asks_for_real_nulls,
    in_scope,
)
from .detectors import case_variants, date_format, null_tokens, number_format, rare_variants
from .detectors.cells import ColumnValues, is_null_token
from .errors import SmolcleanError
from .findings import Finding
from .instructions import split_instructions, with_items
from .registry import Registry
from .residual import ResidualReport
from .storage import DatasetStore
from .validate import CodeRunner

#: Each way of writing an open convention is on at least this many rows, and this share of the rows read.
MIN_CELLS, MIN_SHARE = 5, 0.02
#: Rows of a drop read for its questions at most (evenly spread over a larger drop).
MAX_ROWS = 20_000
#: Spelling questions per learning at most (the columns where most cells are written two ways first), and the
#: values each one shows.
MAX_SPELLING_QUESTIONS, MAX_GROUPS = 3, 8
#: Example values shown per way of writing.
EXAMPLES = 3
#: Where a dataset's questions are kept in its store.
QUESTIONS = "questions"

Kind = Literal["no_value", "units", "spellings", "date_format"]
#: The detector findings each kind of question is about (a residual check failing only on those names it).
FINDING_KINDS: dict[str, frozenset[str]] = {
    "no_value": frozenset({null_tokens.KIND}),
    "units": frozenset({number_format.KIND}),
    "date_format": frozenset({date_format.KIND}),
    "spellings": frozenset({case_variants.KIND, rare_variants.KIND}),
}
#: Words of an item that keeps a kind of thing as written ("Keep 'N/A' as written in column 'email'.").
_KEEP = re.compile(r"\b(?:keep|leave)\b", re.IGNORECASE)
_KEPT_THING = {
    "no_value": re.compile(r"N/A|\bnull|\bno value|\bmissing|\bplaceholder|\bempty", re.IGNORECASE),
    "units": re.compile(r"\bunits?\b|\bnumbers?\b", re.IGNORECASE),
    "date_format": re.compile(r"\bdates?\b", re.IGNORECASE),
    "spellings": re.compile(r"\bspellings?\b|\bvalues?\b", re.IGNORECASE),
}
_PUNCTUATION = re.compile(r"[\s.,;:'\"`_\-/]+")


class Option(BaseModel):
    """One answer to a question: what it does, the cells of the drop it changes, and the instruction it becomes."""

    model_config = ConfigDict(frozen=True)

    number: int
    choice: str
    cells: int = 0
    examples: tuple[str, ...] = ()
    instruction: str


class Question(BaseModel):
    """A convention the drop leaves open: where, what is open (with counts and examples), and the options."""

    model_config = ConfigDict(frozen=True)

    number: int
    kind: Kind
    columns: tuple[str, ...]
    text: str
    options: tuple[Option, ...]
    #: The option chosen, once answered.
    answer: int | None = None

    def option(self, number: int) -> Option:
        """Option `number` (1-based), or an error listing the options there are."""
        for option in self.options:
            if option.number == number:
                return option
        raise SmolcleanError(f"question {self.number} has no option {number}; its options are "
                             + ", ".join(f"{o.number} ({o.choice})" for o in self.options))

    def lines(self) -> list[str]:
        """The question and its numbered options, as the terminal shows them."""
        out = [f"{self.number}. {self.text}"]
        for o in self.options:
            chosen = "  <- chosen" if self.answer == o.number else ""
            examples = f"; e.g. {', '.join(o.examples)}" if o.examples else ""
            out.append(f"   {o.number}) {o.choice} ({o.cells} cells change{examples}): \"{o.instruction}\"{chosen}")
        return out


class Questions(BaseModel):
    """The questions the latest learning of a dataset ended with, and the answers given since."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    drop: str = ""
    rows: int = 0
    questions: tuple[Question, ...] = ()

    @property
    def open(self) -> tuple[Question, ...]:
        """The questions not answered yet."""
        return tuple(q for q in self.questions if q.answer is None)

    def get(self, number: int) -> Question:
        """Question `number`, or an error naming the questions there are."""
        for q in self.questions:
            if q.number == number:
                return q
        there = ", ".join(str(q.number) for q in self.questions) or "none"
        raise SmolcleanError(f"dataset {self.dataset!r} has no question {number} (its questions: {there}); "
                             "see them with `smolclean answer` or in report.md")

    def answered(self, number: int, option: int) -> tuple[Questions, Option]:
        """These questions with question `number` answered by `option`, and the option chosen."""
        chosen = self.get(number).option(option)
        questions = tuple(q.model_copy(update={"answer": option}) if q.number == number else q for q in self.questions)
        return self.model_copy(update={"questions": questions}), chosen

    def markdown(self) -> str:
        """The questions as a markdown table: the UI's metadata and report.md's "Questions" section."""
        if not self.questions:
            return "No question: the drop leaves no convention open that the instructions do not settle."
        rows = ["| # | columns | what is open | options (cells changed): instruction | answer |", "|---|---|---|---|---|"]
        for q in self.questions:
            options = " · ".join(f"{o.number}) {_md(o.choice)} ({o.cells}): \"{_md(o.instruction)}\"" for o in q.options)
            rows.append(f"| {q.number} | {_md(', '.join(q.columns))} | {_md(q.text)} | {options} | "
                        f"{f'option {q.answer}' if q.answer else '**open**'} |")
        return "\n".join(rows)


def ask_questions(cleaned: pd.DataFrame, *, dataset: str, drop: str, said: str) -> Questions:
    """The conventions `cleaned` (a drop as the module cleans it) leaves open and `said` (the instructions, with the
    conventions the user's labelled rows show) does not settle, as numbered questions.

    Example:
        >>> df = pd.DataFrame({"qty": ["12 oz"] * 30 + ["12"] * 20})
        >>> ask_questions(df, dataset="d", drop="d.csv", said="Write numbers without units.").questions
        ()
    """
    many = max(MIN_CELLS, int(np.ceil(MIN_SHARE * len(cleaned))))
    columns = {str(c): ColumnValues.of(c, cleaned[c]) for c in cleaned.columns}
    found: list[tuple[Kind, tuple[str, ...], str, list[tuple[str, int, tuple[str, ...], str]]]] = []
    no_value = _no_value(columns, many, said)
    if no_value:
        found.append(no_value)
    for name, column in columns.items():
        for ask in (_units, _dates):
            if (q := ask(name, column, many, said)) is not None:
                found.append(q)
    spellings = [q for name, column in columns.items() if (q := _spellings(name, column, many, said)) is not None]
    spellings.sort(key=lambda q: -q[3][0][1])  # the columns where most cells are written two ways first
    found += spellings[:MAX_SPELLING_QUESTIONS]
    questions = tuple(
        Question(number=n, kind=kind, columns=cols, text=text,
                 options=tuple(Option(number=i, choice=c, cells=cells, examples=ex, instruction=ins)
                               for i, (c, cells, ex, ins) in enumerate(options, 1)))
        for n, (kind, cols, text, options) in enumerate(found, 1)
    )
    return Questions(dataset=dataset, drop=drop, rows=len(cleaned), questions=questions)


def questions_for_drop(registry: Registry, raw: pd.DataFrame, runner: CodeRunner, *, drop: str, said: str,
                       timeout_s: float = 60.0) -> Questions:
    """The questions a drop (`raw`, as read) leaves open once the registry's module cleans it: at most `MAX_ROWS`
    rows are read, evenly spread.

    Example:
        >>> questions_for_drop(registry, store.load_frame("raw_data", "customers.csv"), sandbox,
        ...                    drop="customers.csv", said="")                                      # doctest: +SKIP
    """
    from .loop import clean_with

    rows = raw if len(raw) <= MAX_ROWS else raw.iloc[np.linspace(0, len(raw) - 1, MAX_ROWS).round().astype(int)]
    cleaned = clean_with(registry, rows.reset_index(drop=True), runner, timeout_s=timeout_s)
    return ask_questions(cleaned, dataset=registry.dataset, drop=drop, said=said)


def ask_after_learning(store: DatasetStore, registry: Registry, instructions: str, runner: CodeRunner, *,
                       drop: str | None = None) -> Questions:
    """The questions a learning ends with, on its drop (`drop`, else the last drop learned), kept in the store: what
    the module leaves open that neither the instructions nor the conventions of the user's labelled rows settle.

    Example:
        >>> ask_after_learning(store, registry, settings.instructions, sandbox, drop="customers.csv")  # doctest: +SKIP
    """
    from .label_store import every_label
    from .plan import ChunkPlan

    if drop is None:
        plans = store.models("chunks", ChunkPlan)
        if not plans:
            return Questions(dataset=store.dataset)
        drop = plans[-1].drop
    conventions = [i.text for labels in every_label(store) for i in split_instructions(labels.conventions())]
    questions = questions_for_drop(registry, store.load_frame("raw_data", drop), runner, drop=drop,
                                   said=with_items(instructions, conventions))
    save_questions(store, questions)
    return questions


def save_questions(store: DatasetStore, questions: Questions) -> None:
    """Keep a dataset's questions in its store (written atomically), for `smolclean answer` and the UI's job."""
    store.save_model(QUESTIONS, questions)


def load_questions(store: DatasetStore) -> Questions:
    """The questions kept for a dataset (none when it was never learned)."""
    if not store.path(QUESTIONS, None, "json").exists():
        return Questions(dataset=store.dataset)
    return store.load_model(QUESTIONS, Questions)


def questions_behind(report: ResidualReport, threshold: float, questions: Questions) -> tuple[Question, ...]:
    """The open questions behind a residual check that fails only on what they ask about: every finding in the
    columns over `threshold` is of a kind and column an open question asks about. Empty when the check passes or
    fails on something else too.

    Example:
        >>> questions_behind(report, 0.01, load_questions(store))   # doctest: +SKIP
        (Question(number=1, kind='no_value', columns=('email', 'phone'), ...),)
    """
    rows = max(1, report.rows_sampled)
    failing = {c for c, n in report.by_column().items() if n / rows > threshold}
    if not failing:
        return ()
    behind: dict[int, Question] = {}
    for finding in report.findings:
        if finding.column not in failing:
            continue
        question = _asking(finding, questions.open)
        if question is None:
            return ()
        behind[question.number] = question
    return tuple(behind[n] for n in sorted(behind))


def _asking(finding: Finding, questions: Iterable[Question]) -> Question | None:
    for q in questions:
        if finding.kind in FINDING_KINDS[q.kind] and finding.column in q.columns:
            return q
    return None


def _settled(kind: Kind, column: str, said: str, asked: bool) -> bool:
    """Whether the user's words settle a kind of question on `column`: they ask for one of its fixes (`asked`), or
    keep that kind of thing as written there."""
    if asked:
        return True
    return any(_KEEP.search(i.text) and _KEPT_THING[kind].search(i.text) and in_scope(i.text, column)
               for i in split_instructions(said))


def _no_value(columns: dict[str, ColumnValues], many: int, said: str):
    """One question for every column that spells "no value" out on many rows and writes it another way too."""
    spelled: dict[str, tuple[dict[str, int], int]] = {}
    for name, column in columns.items():
        finding = null_tokens.detect(column)
        if finding is None:
            continue
        tokens = {v: n for v, n in column.tokens.items() if v.strip().casefold() in finding.params["tokens"]}
        empty = column.n_rows - sum(column.counts.values()) - sum(column.typed.values()) + sum(
            n for v, n in column.counts.items() if not v.strip())
        if sum(tokens.values()) < many or (not empty and len(tokens) < 2):
            continue
        if _settled("no_value", name, said, asks_for_real_nulls(said, name)):
            continue
        spelled[name] = (tokens, empty)
    if not spelled:
        return None
    names = tuple(spelled)
    spellings = list(dict.fromkeys(v.strip() for tokens, _ in spelled.values() for v in sorted(tokens, key=tokens.get,
                                                                                              reverse=True)))
    where = "; ".join(f"{_q(n)}: " + ", ".join(f"{_q(v)} on {c} rows" for v, c in tokens.items())
                      + (f" beside {empty} empty cells" if empty else "") for n, (tokens, empty) in spelled.items())
    text = (f"\"No value\" is written out in {_columns(names)} and left as written: {where}. Which way should the "
            "module write a missing value?")
    cells = sum(sum(t.values()) for t, _ in spelled.values())
    values = _values(spellings)
    return ("no_value", names, text, [
        ("write them as empty cells (a real null)", cells, tuple(f"{_q(v)} -> empty" for v in spellings[:EXAMPLES]),
         f"Write {values} as empty in {_columns(names)}."),
        ("keep them as written", 0, (), f"Keep {values} as written in {_columns(names)}."),
    ])


def _units(name: str, column: ColumnValues, many: int, said: str):
    """A question for a column whose numbers carry a unit on many cells and none on many others."""
    finding = number_format.detect(column)
    if finding is None or not finding.params["units"]:
        return None
    units = finding.params["units"]
    numbers = number_format.parse_numbers(column.meaningful)
    dressed = {x.value: x.cells for x in numbers if (x.prefix or x.suffix) and {x.prefix, x.suffix} <= {"", *units}}
    bare = {x.value: x.cells for x in numbers if not x.prefix and not x.suffix}
    if sum(dressed.values()) < many or sum(bare.values()) < many:
        return None
    if _settled("units", name, said, asks_for_plain_numbers(said, name)):
        return None
    unit = _values(units)
    text = (f"Column {_q(name)} writes {unit} on {sum(dressed.values())} numbers ({_examples(dressed)}) and no unit "
            f"on {sum(bare.values())} ({_examples(bare)}). Should the module write the numbers without it?")
    stripped = {x.value: x.plain for x in numbers if x.value in dressed}
    return ("units", (name,), text, [
        ("write the numbers without their unit", sum(dressed.values()),
         tuple(f"{_q(v)} -> {_q(stripped[v])}" for v in _top(dressed)), f"Write the numbers of column {_q(name)} "
         f"without their unit ({unit})."),
        ("keep them as written", 0, (), f"Keep the numbers of column {_q(name)} as written, with and without {unit}."),
    ])


def _dates(name: str, column: ColumnValues, many: int, said: str):
    """A question for a date column the module leaves in two or more formats, each on many cells."""
    finding = date_format.detect(column)
    if finding is None:
        return None
    cells = finding.params["format_cells"]
    if sum(1 for n in cells.values() if n >= many) < 2:
        return None
    if _settled("date_format", name, said, asks_for_iso_dates(said, name)):
        return None
    formats = ", ".join(f"{_readable(f)} on {n} rows" for f, n in sorted(cells.items(), key=lambda kv: -kv[1]))
    text = (f"Column {_q(name)} writes dates in {len(cells)} formats, left as written: {formats} (e.g. "
            f"{', '.join(map(_q, finding.examples[:EXAMPLES]))}). Should the module write them all as ISO 8601?")
    changed = sum(n for f, n in cells.items() if f != date_format.ISO_LABEL)
    return ("date_format", (name,), text, [
        ("write every date as ISO 8601 (YYYY-MM-DD)", changed, tuple(map(_q, finding.examples[:EXAMPLES])),
         f"Write the dates of column {_q(name)} as YYYY-MM-DD (ISO 8601)."),
        ("keep them as written", 0, (), f"Keep the dates of column {_q(name)} as written."),
    ])


def _spellings(name: str, column: ColumnValues, many: int, said: str):
    """A question for a text column where values are written two ways (case, punctuation, spacing), each on many
    cells: which spelling the module should write."""
    if asked_case(said, name):
        return None  # the user said which case the column's values are written in
    groups: dict[str, dict[str, int]] = {}
    for value, n in column.counts.items():
        text = value.strip()
        if not text or is_null_token(text) or any(c.isdigit() for c in text):
            continue  # numbers and dates are the other questions'
        key = _PUNCTUATION.sub(" ", text.casefold()).strip()
        groups.setdefault(key, {})
        groups[key][text] = groups[key].get(text, 0) + n
    asked = asked_rewrites(said, name)
    split = []
    for spellings in groups.values():
        common = {v: n for v, n in spellings.items() if n >= many}
        if len(common) >= 2 and not set(common) & set(asked):
            split.append(dict(sorted(common.items(), key=lambda kv: (-kv[1], kv[0]))))
    if not split or _settled("spellings", name, said, False):
        return None
    split.sort(key=lambda g: -sum(g.values()))
    split = split[:MAX_GROUPS]
    shown = "; ".join(" / ".join(f"{_q(v)} [{n}]" for v, n in g.items()) for g in split)
    text = (f"Column {_q(name)} writes {len(split)} value(s) two ways, each on many rows: {shown}. Which spelling "
            "should the module write?")
    options = _case_options(name, column, split)
    options.append(_rewrite_option("the most common spelling of each", name, [(list(g)[1:], list(g)[0], g) for g in split]))
    if all(len(g) == 2 for g in split):
        options.append(_rewrite_option("the other spelling of each", name, [(list(g)[:1], list(g)[1], g) for g in split]))
    options.append(("keep them as written", 0, (), f"Keep the spellings of column {_q(name)} as written."))
    return ("spellings", (name,), text, options)


def _case_options(name: str, column: ColumnValues, split: list[dict[str, int]]) -> list[tuple]:
    """Where every value written two ways differs only in case ("ROCHESTER" / "Rochester"), an option per case that
    one spelling of each is written in: every value of the column in that case, the ones never written two ways and
    the next drop's too (`asked.asked_case`), not only a table of the values seen. The case of the most common
    spellings first."""
    if not all(len({v.casefold() for v in g}) == 1 for g in split):
        return []
    styles = [s for s in case_variants.STYLES if all(any(case_variants.style(v) == s for v in g) for g in split)]
    usual = [case_variants.style(next(iter(g))) for g in split]
    styles.sort(key=lambda s: -usual.count(s))
    options = []
    for style in styles:
        changed = {v: n for v, n in column.counts.items() if case_variants.convert(v, style, asked=True) != v}
        examples = tuple(f"{_q(v)} -> {_q(case_variants.convert(v, style, asked=True))}" for v in _top(changed))
        options.append((f"every value in {style} case", sum(changed.values()), examples,
                        f"Write the values of column {_q(name)} in {style} case."))
    return options


def _rewrite_option(choice: str, column: str, rewrites: list[tuple[list[str], str, dict[str, int]]]):
    pairs = [(v, target) for sources, target, _ in rewrites for v in sources]
    cells = sum(g[v] for sources, _, g in rewrites for v in sources)
    said = ", ".join(f"{_q(v)} as {_q(t)}" for v, t in pairs)
    return (choice, cells, tuple(f"{_q(v)} -> {_q(t)}" for v, t in pairs[:EXAMPLES]),
            f"Write {said} in column {_q(column)}.")


def _readable(fmt: str) -> str:
    """A date format as people write it ("%m/%d/%Y" -> "MM/DD/YYYY")."""
    if fmt == date_format.ISO_LABEL:
        return "ISO 8601 (YYYY-MM-DD)"
    out = fmt
    for code, text in (("%Y", "YYYY"), ("%y", "YY"), ("%m", "MM"), ("%d", "DD"), ("%B", "Month"), ("%b", "Mon"),
                       ("%A", "Weekday"), ("%a", "Wkd"), ("%H", "hh"), ("%I", "hh"), ("%M", "mm"), ("%S", "ss"),
                       ("%p", "AM/PM")):
        out = out.replace(code, text)
    return out


def _top(counts: dict[str, int]) -> list[str]:
    return sorted(counts, key=lambda v: (-counts[v], v))[:EXAMPLES]


def _examples(counts: dict[str, int]) -> str:
    return "e.g. " + ", ".join(map(_q, _top(counts)))


def _values(values: Iterable[str]) -> str:
    """Quoted values joined for a sentence: 'a', 'b' and 'c'."""
    quoted = [_q(v) for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _columns(names: Iterable[str]) -> str:
    names = list(names)
    return f"column {_q(names[0])}" if len(names) == 1 else f"columns {_values(names)}"


def _q(value: str) -> str:
    """A value in the quotes an instruction item is read with (double quotes when it holds a single one)."""
    return f"\"{value}\"" if "'" in value else f"'{value}'"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


__all__ = ["FINDING_KINDS", "Option", "Question", "Questions", "ask_after_learning", "ask_questions", "load_questions",
           "questions_behind", "questions_for_drop", "save_questions"]
