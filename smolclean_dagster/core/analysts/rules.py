"""RulesAnalyst: the offline analyst. It turns detector findings into cleaning functions rendered from
parameterised templates (`rule_templates/*.py.j2`), one function per step, in detector priority order.

Whole-column knowledge (the canonical spelling of a value, the date convention, the unit) is learned from
the chunk plus the reference rows of the same drop, and embedded in the function as constants, so a
row's result depends only on that row. Beside the chunk's findings the analyst reads what the detectors
find over the reference rows (`drop_findings.py`): rare dirt the chunk does not hold, and values that
break a dependency between columns, which only many rows show; those are fixed last.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd

from ..detectors import (
    DETECTORS,
    KINDS,
    ColumnValues,
    boolean_spellings,
    broken_text,
    case_variants,
    date_format,
    dependencies,
    escaped_quotes,
    marker_suffixes,
    null_tokens,
    number_format,
    rare_variants,
    whitespace,
)
from ..detectors.cells import DIGITS_AND_SEPARATORS, NULL_TOKENS, NUMBER_WITH_UNIT, in_layout, unit_key
from ..date_layouts import Layout, convert
from ..detectors.date_format import ONE_WAY, candidate_formats
from ..findings import Finding
from ..functions import CleaningFunction, RuleSpec, kept_as_written
from ..profile import detect_issues
from .base import AnalysisRequest, Issue, ItemDecline, Proposal
from .asked import (
    DIGITS,
    LAYOUTS,
    PLACEHOLDERS,
    REWRITES,
    UNITS,
    asked_case,
    asked_digit_layout,
    asked_layouts,
    asked_placeholder,
    asked_rewrites,
    asked_units,
    asks_for_iso_dates,
    asks_for_plain_numbers,
    asks_for_real_nulls,
    asks_for_whole_numbers,
    asks_to_keep,
    asks_to_normalise_whitespace,
    asks_to_remove_debris,
    asks_without_leading_zeros,
    items_served,
)
from .drop_findings import drop_findings

log = logging.getLogger("smolclean.analysts.rules")

TEMPLATE_DIR = Path(__file__).parent / "rule_templates"
#: A function fixing more columns than this is named by their number, not their names.
MAX_NAMED_COLUMNS = 3
#: Constants longer than this are written one entry per line.
INLINE_LITERAL = 72
#: Tables (dict, list, tuple) of more entries than this are written compactly (`_compact`): one entry per line
#: would make a learned table of thousands of entries most of the module.
COMPACT_TABLE_ENTRIES = 200
#: How long the lines of a compact table get before the template indents them (by 8 spaces at most): ~110 in all.
COMPACT_WIDTH = 102

#: A rule's template context from (findings of the chunk, the same findings over chunk + reference rows,
#: the chunk's column values); None when the rule has nothing safe to do.
ContextBuilder = Callable[[list[Finding], list[Finding | None], list[ColumnValues]], dict | None]


@dataclass(frozen=True)
class Rule:
    """How findings of one kind become a function: a template, a name prefix and the template context.

    A rule that `spans_columns` fixes every column with its finding in one function (the fix is the same
    everywhere), and falls back to one function per column when that one is rejected. A rule whose fix of
    one column never looks at another (`columns_independent`) may also merge functions made on different
    columns into one over all of them.
    """

    kind: str
    template: str
    prefix: str
    context: ContextBuilder
    spans_columns: bool = False
    columns_independent: bool = False


def _whitespace(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    return {"columns": [f.column for f in found]}


def _null_tokens(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    # Every spelling of "no value" that is no valid value of the column, not only those seen, so the next
    # drop's "NULL" is fixed too; and the empty string, so that "N/A" and "" end up as the same null.
    tokens = {
        f.column: sorted({"", *(r or f).params.get("vocabulary", f.params["tokens"])}) for f, r in zip(found, refined)
    }
    seen = sorted({t for f, r in zip(found, refined) for t in {*f.params["tokens"], *(r.params["tokens"] if r else ())}})
    return {"tokens": tokens, "spellings": seen}


def _one_column(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), (r,) = found, refined
    return {"column": f.column, "examples": ", ".join(map(repr, f.examples[:2]))}


def _markers(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), (r,) = found, refined
    return {**_one_column(found, refined, columns), "suffixes": sorted(set(f.params["suffixes"]) | set((r or f).params["suffixes"]))}


def _case(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), (r,) = found, refined
    # The drop decides the convention, the table and what is kept: the chunk's rows are among the drop's, and a
    # table of 50 rows would list a value the drop writes two ways as if it had one spelling.
    params = (r or f).params
    convention, exceptions, letters, keep = params["convention"], params["exceptions"], params["letters"], params["keep"]
    asked = bool(params.get("asked"))
    pairs = [(v, case_variants.fix(v, convention, exceptions, letters, keep, asked)) for v in f.examples]
    (column,) = columns
    if all(case_variants.fix(v, convention, exceptions, letters, keep, asked) == v
           for v in (*column.meaningful, *f.examples)):
        return None  # the drop keeps what the chunk flags (a spelling many of its rows use): nothing to do
    examples = ", ".join(f"{v!r} -> {w!r}" for v, w in pairs[:2] if v != w) or "see the table"
    share = f"{round(100 * case_variants.CONVENTION_SHARE)}% or more"
    return {"column": f.column, "convention": convention, "exceptions": exceptions, "examples": examples, "share": share,
            "letters": letters, "keep": list(keep), "asked": asked,
            "title_start": case_variants.TITLE_START, "two_words": case_variants.TWO_WORDS}


def _misspellings(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict | None:
    (f,), (r,) = found, refined
    # The drop decides what is frequent: in a chunk of 50 rows a misspelling seen five times looks canonical.
    mapping = dict((r or f).params["mapping"])
    targets = set(mapping.values())
    mapping = {k: v for k, v in sorted(mapping.items()) if k not in targets}  # no chains: applying twice == once
    mapping = dict(list(mapping.items())[: rare_variants.MAX_CORRECTIONS])
    # The column's valid values go with the fix, so that it judges the next drop's values by the drop's evidence.
    valid = {v: n for v, n in (r or f).params["vocabulary"].items() if v not in mapping}
    if not mapping:
        return None  # every rare value near a frequent one is another entity (`_with_companion`): no slip seen
    companion = (r or f).params.get("companion")
    return {"column": f.column, "mapping": mapping, "valid": valid, "examples": _arrows(f.examples[:2], mapping),
            "companion": companion, "companions": (r or f).params.get("companions", {}),
            "share": rare_variants.COMPANION_SHARE, "share_percent": round(100 * rare_variants.COMPANION_SHARE),
            "frequent": rare_variants.UNSEEN_TARGET_CELLS, "chars_per_edit": rare_variants.CHARS_PER_EDIT,
            "min_length": rare_variants.MIN_LENGTH, "min_garbled": rare_variants.MIN_GARBLED_LENGTH,
            "min_swap": rare_variants.MIN_SWAP_LENGTH, "word": rare_variants.WORD}


def _numbers(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict | None:
    (f,), (r,), (column,) = found, refined, columns
    params = (r or f).params
    leading_zeros = bool(params.get("leading_zeros"))
    if number_format.fixable_cells(column, params["units"], whole=bool(params.get("whole")),
                                   leading_zeros=leading_zeros) == 0:
        return None  # e.g. the drop mixes units: stripping would lose which unit a number was in
    return {"column": f.column, "units": params["units"], "families": params["unit_families"],
            "leading_zeros": leading_zeros}


def _dates(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues], *,
           to_iso: bool = False) -> dict | None:
    (f,), (r,) = found, refined
    params = (r or f).params  # the drop decides the column's own format and the order of each numeric layout
    day_first, target = params["day_first"], params["dominant"]
    if to_iso:  # the user asked for ISO 8601: every format seen is rewritten, the column's own too
        seen = (set(f.params["formats"]) | set(params["formats"]) | {target}) - {date_format.ISO_LABEL}
        formats = [fmt for fmt in candidate_formats(day_first) if fmt in seen or fmt in ONE_WAY]
        if not [fmt for fmt in formats if fmt in seen]:
            return None
        first, last = int((params["first"] or "1900")[:4]), int((params["last"] or "2100")[:4])
        return {"column": f.column, "formats": formats, "day_first": day_first, "target": None,
                "years": [first - date_format.YEARS_BEFORE, last + date_format.YEARS_AFTER]}
    if not date_format.writable(target, day_first):
        return None  # its own dates read two ways ("03/04/2020"): any date written like them would too
    if params["round_trip"] < date_format.MIN_ROUND_TRIP:
        return None  # its own format cannot be written back exactly ("3/4/2020" unpadded): leave the column
    seen = (set(f.params["formats"]) | set(params["formats"])) - {target}
    # the formats seen, and those a date reads one way in, for a later drop's; the detector's order decides
    formats = [fmt for fmt in candidate_formats(day_first) if fmt in seen or (fmt in ONE_WAY and fmt != target)]
    if target != date_format.ISO_LABEL:
        formats = [fmt for fmt in formats if date_format.has_time(fmt) == date_format.has_time(target)]
    if not [fmt for fmt in formats if fmt in seen]:
        return None
    first, last = int(params["first"][:4]), int(params["last"][:4])
    return {"column": f.column, "formats": formats, "day_first": day_first,
            "target": None if target == date_format.ISO_LABEL else target,
            "years": [first - date_format.YEARS_BEFORE, last + date_format.YEARS_AFTER]}


def _booleans(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), (r,) = found, refined
    params = (r or f).params
    canonical = {True: params["true"], False: params["false"]}
    spellings = sorted(set(f.params["mapping"]) | set(params["mapping"]))
    mapping = {k: canonical[boolean_spellings.SPELLINGS[k][1]] for k in spellings}
    return {"column": f.column, "mapping": mapping, "true_spelling": params["true"], "false_spelling": params["false"]}


def _numbers_wanted(params: dict, request: AnalysisRequest, column: str) -> bool:
    """Whether a column's numbers may be rewritten: the user asked for plain numbers there, or most of the column's
    numbers are bare and the ones with a unit were not rounded (then stripping gives the number back)."""
    if asks_for_plain_numbers(request.instructions, column):
        return True
    return params["bare_share"] >= number_format.MIN_BARE_SHARE and not params["rounded"]


def _holds_json_booleans(request: AnalysisRequest, column: str) -> bool:
    """True when most yes/no cells of `column` (chunk and reference rows) are real booleans, as JSON drops hold
    them: then the text spellings become booleans too, not the most frequent text spelling."""
    frames = [request.chunk] + ([request.reference] if request.reference is not None else [])
    cells = [v for frame in frames if column in frame.columns for v in frame[column].tolist()]
    booleans = sum(1 for v in cells if isinstance(v, (bool, np.bool_)))
    return booleans > 0 and booleans >= sum(1 for v in cells if isinstance(v, str))


def _as_json_booleans(context: dict) -> dict:
    """A boolean rule's context writing True/False instead of the text spellings."""
    mapping = {k: v == context["true_spelling"] for k, v in context["mapping"].items()}
    return {**context, "mapping": mapping, "true_spelling": True, "false_spelling": False}


def _rewrites(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), _ = found, refined
    mapping = dict(sorted(f.params["mapping"].items()))
    return {"column": f.column, "mapping": mapping, "examples": _arrows(list(mapping)[:2], mapping)}


def _units(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), _ = found, refined
    mapping = dict(sorted(f.params["units"].items()))
    return {"column": f.column, "mapping": mapping, "drop_rest": f.params["drop_rest"],
            "pattern": NUMBER_WITH_UNIT.pattern,
            "units": _either([repr(u) for u in sorted(set(mapping.values()))]),
            "examples": _arrows(list(f.params["examples"]), f.params["examples"])}


def _digits(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), _ = found, refined
    layout = f.params["layout"]
    return {"column": f.column, "layout": layout, "groups": [len(g) for g in re.findall(r"9+", layout)],
            "runs": f.params["runs"], "pattern": DIGITS_AND_SEPARATORS.pattern,
            "examples": _arrows(list(f.params["examples"]), f.params["examples"])}


def _placeholders(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), _ = found, refined
    return {"column": f.column, "placeholder": f.params["placeholder"]}


def _either(words: list[str]) -> str:
    """"a", "a or b", "a, b or c"."""
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def _layouts(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict:
    (f,), _ = found, refined
    source, target = (Layout.parse(f.params[k]) for k in ("source", "target"))
    return {"column": f.column, "source_text": str(source), "target_text": str(target),
            "source": [source.order, source.separator, list(source.widths)],
            "target": [target.order, target.separator, list(target.widths)],
            "both_ways": f.params["both_ways"], "examples": _arrows(list(f.params["examples"]), f.params["examples"])}


def _dependencies(found: list[Finding], refined: list[Finding | None], columns: list[ColumnValues]) -> dict | None:
    tables = [t for f in found for t in f.params["dependencies"]]
    conditions = [c for f in found for c in f.params["conditions"]]
    repaired = {(t[0], t[1]) for t in tables}
    witnesses = {(w[0], w[1]): w[2] for f in found for w in f.params.get("witnesses", ()) if (w[0], w[1]) not in repaired}
    if not tables and not conditions:
        return None
    fill_empty = any(f.params.get("fill_empty", False) for f in found)
    summary = ", ".join(
        f"{dep} by {', '.join(dict.fromkeys(t[0] for t in tables if t[1] == dep) or [c[0] for c in conditions if c[1] == dep])}"
        for dep in dict.fromkeys([t[1] for t in tables] + [c[1] for c in conditions])
    )
    return {
        "columns": [f.column for f in found],
        "summary": summary,
        "nulls": sorted(NULL_TOKENS | {""}),
        "dependencies": [
            {"determinant": a, "dependent": b, "mapping": m, "voted": v, "strong": s} for a, b, m, v, s in tables
        ],
        "conditions": [{"determinant": a, "dependent": b, "usual": u, "value": v} for a, b, u, v in conditions],
        "witnesses": [{"determinant": a, "dependent": b, "mapping": m} for (a, b), m in sorted(witnesses.items())],
        "voted": sorted({b for _, b, _, v, _ in tables if v}),
        "fill_empty": fill_empty,
        "numeric": sorted({c for f in found for c in f.params.get("numeric", ())}),
        "slip_chars_per_edit": dependencies.SLIP_CHARS_PER_EDIT,
        "min_slip_length": dependencies.MIN_SLIP_LENGTH,
        # the drop's own rows of a key count as learning counted them (detectors/dependencies.py)
        "drop_counts": list(dict.fromkeys([*((a, b) for a, b, _, _, _ in tables), *sorted(witnesses)])),
        "min_support": dependencies.MIN_SUPPORT, "key_rows": dependencies.KEY_ROWS,
        "key_share": dependencies.KEY_SHARE, "key_ratio": dependencies.KEY_RATIO,
        "drop_rows": dependencies.DROP_KEY_ROWS, "drop_ratio": dependencies.DROP_KEY_RATIO,
        "two_values_rows": dependencies.TWO_VALUES_ROWS, "strong_rows": dependencies.STRONG_SUPPORT,
        "examples": ", ".join(e for f in found for e in f.examples[:1]),
    }


#: Why an item asking to keep cells as written has no function: the rules change none of them.
KEPT = "kept as written, as asked: no rule changes these cells"

#: One rule per finding kind the rules analyst can fix, in detector priority order.
RULES = {
    rule.kind: rule
    for rule in (
        Rule(whitespace.KIND, "strip_whitespace.py.j2", "strip_whitespace", _whitespace, spans_columns=True,
             columns_independent=True),
        Rule(null_tokens.KIND, "replace_null_tokens.py.j2", "replace_null_tokens", _null_tokens, spans_columns=True,
             columns_independent=True),
        Rule(broken_text.KIND, "remove_decoding_debris.py.j2", "remove_decoding_debris", _one_column),
        Rule(escaped_quotes.KIND, "unescape_quotes.py.j2", "unescape_quotes", _one_column),
        Rule(marker_suffixes.KIND, "strip_markers.py.j2", "strip_markers", _markers),
        Rule(case_variants.KIND, "unify_case.py.j2", "unify_case", _case),
        Rule(rare_variants.KIND, "fix_misspellings.py.j2", "fix_misspellings", _misspellings),
        Rule(number_format.KIND, "normalize_numbers.py.j2", "normalize_numbers", _numbers),
        Rule(date_format.KIND, "dates_to_iso.py.j2", "dates_to_iso", _dates),
        Rule(boolean_spellings.KIND, "unify_booleans.py.j2", "unify_booleans", _booleans),
        Rule(REWRITES, "rewrite_values.py.j2", "rewrite_values", _rewrites),
        Rule(LAYOUTS, "rewrite_date_layout.py.j2", "rewrite_date_layout", _layouts),
        Rule(UNITS, "rewrite_units.py.j2", "rewrite_units", _units),
        Rule(DIGITS, "rewrite_digit_layout.py.j2", "rewrite_digit_layout", _digits),
        Rule(PLACEHOLDERS, "write_empty_as.py.j2", "write_empty_as", _placeholders),
        Rule(dependencies.KIND, "repair_dependencies.py.j2", "repair_dependencies", _dependencies, spans_columns=True),
    )
}
RULES_BY_TEMPLATE = {rule.template: rule for rule in RULES.values()}
#: Findings the analyst makes itself over the whole drop (the loop's detectors read one chunk), fixed last:
#: by then the values the dependencies are learned from are as clean as the other rules make them.
DROP_KINDS = (dependencies.KIND,)
#: Findings the user's words make (no detector sees them): values the instructions ask to be written otherwise.
ASKED_KINDS = (REWRITES, LAYOUTS, UNITS, DIGITS, PLACEHOLDERS)


class RulesAnalyst:
    """The offline, deterministic analyst: one templated function per step for the first finding left.

    It skips findings whose function was rejected for this chunk, names functions after what they fix
    and the column (`strip_whitespace_city`, `dates_to_iso_signup_date`), and says "clean" when no
    finding it can fix remains.

    Example:
        >>> chunk = pd.DataFrame({"city": [" Bend", "Gary", "Gary"]})
        >>> proposal = RulesAnalyst().propose(AnalysisRequest(dataset="demo", chunk_id="c0", step=1, chunk=chunk))
        >>> proposal.function.name, proposal.status
        ('strip_whitespace_city', 'needs_more_work')
    """

    name = "rules"
    #: Templates read only the few requests of `asked.py`: the items they carry out are recorded as served, the
    #: others stay open (and are reported so), and no step is spent on them.
    reads_instructions = False
    #: Asked even when the loop's detectors find nothing in the chunk: dependencies between columns only
    #: show over the whole drop, which the analyst sees as reference rows.
    trusts_detectors = False

    def __init__(self) -> None:
        self._templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self._templates.filters["py"] = _literal
        self._templates.filters["quoted"] = _quoted
        self._templates.filters["doc"] = _docstring_safe

    def propose(self, request: AnalysisRequest) -> Proposal:
        """Answer one step: every finding as an issue, and a function for the first one still fixable."""
        findings = self._findings(request)
        issues = tuple(Issue(description=f.message, column=f.column) for f in findings)
        if request.feedback:
            log.debug("rules: chunk %s: previous proposal rejected: %s", request.chunk_id, request.feedback)
        for function in self._functions(request, findings):
            log.info("rules: chunk %s step %d proposes %s", request.chunk_id, request.step, function.name)
            kind = RULES_BY_TEMPLATE[function.rule.template].kind if function.rule is not None else ""
            return Proposal(issues=issues, function=function, status="needs_more_work",
                            serves=items_served(kind, function.columns, request.items))
        # an item asking for cells to stay as written is carried out by changing nothing: said so, not left open
        kept = tuple(ItemDecline(number=i.number, reason=KEPT) for i in request.items
                     if i.state == "open" and asks_to_keep(i.text))
        return Proposal(issues=issues, function=None, status="clean", declines=kept)

    def candidates(self, request: AnalysisRequest) -> list[CleaningFunction]:
        """Every function the rules would write for this step, first to last: what a model may adopt."""
        return list(self._functions(request, self._findings(request)))

    def _findings(self, request: AnalysisRequest) -> list[Finding]:
        # a case asked of a column is its convention whatever it writes: judged over the drop's rows, as the chunk
        # may hold none of the values it rewrites
        findings = findings_as_asked(list(request.findings) or detect_issues(request.chunk), request.chunk,
                                     request.instructions, rows=lambda: _drop_rows(request))
        findings += drop_findings(request, findings, {kind: rule.prefix for kind, rule in RULES.items()})
        asked = _asked_rewrites(request) + _asked_layouts(request) + _asked_units(request) + _asked_digits(request)
        return findings + asked + _asked_placeholders(request)

    def _functions(self, request: AnalysisRequest, findings: list[Finding]) -> Iterator[CleaningFunction]:
        taken = {s.name for s in request.registry}
        rows = None  # the chunk's and reference's rows, each counted once: read only when a rule needs them
        for rule, found in _candidates(findings):
            base = _base_name(rule, found)
            name = _free_name(base, taken)
            if name in request.rejected or base in request.rejected:
                continue
            columns = [ColumnValues.of(f.column, request.chunk[f.column]) for f in found]
            if rows is None:
                rows = _drop_rows(request)
            refined = [self._refine(f, rows, request.instructions) for f in found]
            if rule.kind == rare_variants.KIND:  # a rare value another column shows to be another entity is no slip
                frame = request.chunk if rows is None else rows
                (f,), (r,) = found, refined
                entity = _companion(r or f, frame)  # judged once, by the finding the function is written from
                found, refined = [_with_companion(f, frame, entity)], [r and _with_companion(r, frame, entity)]
            if rule.kind not in (*DROP_KINDS, *ASKED_KINDS) and request.reference is not None and None in refined:
                # the whole drop does not show this dirt (e.g. a rare suffix is no unit there): trust the drop
                log.debug("rules: %s on %s not confirmed by the drop", rule.kind, [f.column for f in found])
                continue
            if rule.kind == date_format.KIND and asks_for_iso_dates(request.instructions, found[0].column):
                context = _dates(found, refined, columns, to_iso=True)
            else:
                context = rule.context(found, refined, columns)
            if context is None:
                log.debug("rules: nothing safe to do for %s on %s", rule.kind, [f.column for f in found])
                continue
            if rule.kind == broken_text.KIND and not asks_to_remove_debris(request.instructions, found[0].column):
                # the characters the debris stands for are lost: no value is evidently right, so the cell stays
                # (and is reported) unless the user asks for the debris to go
                continue
            if rule.kind == null_tokens.KIND and not all(asks_for_real_nulls(request.instructions, f.column) for f in found):
                # "N/A" is the file's own way to write no value (and "NaN" a rate, "-" a page range in some
                # files): a real null is what the user may ask for, of the columns they name, not what the default
                # imposes
                continue
            if rule.kind == number_format.KIND and not _numbers_wanted((refined[0] or found[0]).params, request,
                                                                       found[0].column):
                log.debug("rules: numbers of %s are written in the column's own form", found[0].column)
                continue
            if rule.kind == boolean_spellings.KIND and _holds_json_booleans(request, found[0].column):
                context = _as_json_booleans(context)
            context["why"] = [f.message for f in found]  # the evidence that made the rule act, for the report
            yield self._render(rule.template, context, name, [f.column for f in found])

    def _render(self, template: str, context: dict, name: str, columns: list[str]) -> CleaningFunction:
        code = self._templates.get_template(template).render(name=name, **context)
        if context.get("kept"):  # values a person's labelled rows keep as written (core/loop.py)
            code = kept_as_written(code, name, context["kept"])
        return CleaningFunction.from_code(code, columns=columns, rule=RuleSpec(template=template, context=context))

    @staticmethod
    def merge_key(function: CleaningFunction) -> tuple | None:
        """What functions must share to be merged: the rule, and the columns unless the rule fixes each
        column on its own (then stray whitespace in `name, city` and in `city, plan` is one job)."""
        spec = function.rule
        if spec is None:
            return None
        rule = RULES_BY_TEMPLATE.get(spec.template)
        if rule is not None and rule.columns_independent:
            return ("rule", spec.template)
        return ("rule", spec.template, function.columns)

    def merge(self, functions: list[CleaningFunction], column_order: Sequence[str] = ()) -> CleaningFunction | None:
        """One function doing the job of several with the same `merge_key` (their constants merged, e.g. two
        mapping tables into one, or two column lists), or None when they cannot be merged safely. Its columns
        (and so its name) follow `column_order`, the drop's, where it names them: a merge of the same
        functions gets the same name whichever chunk wrote which.

        Example:
            >>> RulesAnalyst().merge([unify_case_city, unify_case_city_2]).name   # doctest: +SKIP
            'unify_case_city'
            >>> RulesAnalyst().merge([strip_whitespace_name_city, strip_whitespace_city_plan]).name  # doctest: +SKIP
            'strip_whitespace_name_city_plan'
        """
        specs = [f.rule for f in functions]
        if len(functions) < 2 or any(s is None for s in specs):
            return None
        if len({self.merge_key(f) for f in functions}) != 1:
            return None
        try:
            context = specs[0].context
            for spec in specs[1:]:
                context = _merge_context(context, spec.context)
        except ValueError:
            return None
        columns = _in_order(dict.fromkeys(c for f in functions for c in f.columns), column_order)
        if isinstance(context.get("columns"), list) and set(context["columns"]) == set(columns):
            context = {**context, "columns": columns}
        name = functions[0].name
        if columns != list(functions[0].columns):  # named after what it now fixes
            name = _columns_name(RULES_BY_TEMPLATE[specs[0].template].prefix, columns)
        try:
            return self._render(specs[0].template, context, name, columns)
        except jinja2.TemplateError as exc:  # constants stored by an older version of the rule: keep them apart
            log.info("rules: %s not merged: %s", [f.name for f in functions], exc)
            return None

    def _refine(self, finding: Finding, rows: pd.DataFrame | None, instructions: str) -> Finding | None:
        """The same detector over the chunk plus the reference rows: whole-drop evidence, when there is some."""
        if rows is None or finding.column not in rows.columns or finding.kind not in KINDS:
            return None
        return _detect(finding.kind, ColumnValues.of(finding.column, rows[finding.column]), instructions)


def _companion(finding: Finding, rows: pd.DataFrame) -> tuple[str | None, dict[str, str]]:
    """The column of `rows` that says which entity each value of a misspelling finding's column is, and what the rows
    of each value a slip could become hold there (`rare_variants.companions`)."""
    targets = [v for v, n in finding.params["vocabulary"].items() if n >= rare_variants.UNSEEN_TARGET_CELLS]
    return rare_variants.companions(rows, finding.column, targets)


def _with_companion(finding: Finding, rows: pd.DataFrame, entity: tuple[str | None, dict[str, str]]) -> Finding:
    """A misspelling finding with its `entity` column and table (`_companion`); a rare value whose rows in `rows`
    mostly hold something else there is another entity, and leaves the mapping for the vocabulary.

    Example:
        >>> rows = pd.DataFrame({"city": ["Irving"] * 10 + ["Boston"] * 8 + ["Irvine", "Irvine", "Irvig"],
        ...                      "state": ["TX"] * 10 + ["MA"] * 8 + ["CA", "CA", "TX"]})
        >>> found = rare_variants.detect(ColumnValues.of("city", rows["city"]))
        >>> judged = _with_companion(found, rows, _companion(found, rows))
        >>> found.params["mapping"], judged.params["mapping"]
        ({'Irvig': 'Irving', 'Irvine': 'Irving'}, {'Irvig': 'Irving'})
        >>> judged.message
        "1 cells of 'city' hold 1 rare spelling(s) close to a frequent value (e.g. 'Irvig' -> 'Irving')"
    """
    companion, held = entity
    params = finding.params
    if companion is None:
        return finding
    others = rare_variants.contradicted(rows, finding.column, params["mapping"], companion, held)
    if not others:
        return finding.model_copy(update={"params": {**params, "companion": companion, "companions": held}})
    mapping = {k: v for k, v in params["mapping"].items() if k not in others}
    if not mapping:
        return finding.model_copy(update={"params": {**params, "mapping": {}}})
    # what the finding says (its cells, its example) is said of the slips left, as the function fixes them
    column = ColumnValues.of(finding.column, rows[finding.column])
    return rare_variants.finding(column, mapping, rare_variants.vocabulary(column.meaningful, mapping),
                                 companion=companion, companions=held)


def findings_as_asked(findings: list[Finding], chunk: pd.DataFrame, instructions: str,
                      rows: Callable[[], pd.DataFrame | None] = lambda: None) -> list[Finding]:
    """The detectors' `findings` on `chunk` as the user's words read them (the detectors read no instructions):
    asked, free text's own spacing is stray whitespace too, a column written "7.0" throughout is dirty, and a
    column's values in another case than the one asked are, judged over `rows()` (the drop's rows; the chunk when
    None).

    Example:
        >>> chunk = pd.DataFrame({"state": ["ca", "NY", "Tx"] * 10})
        >>> [f.message for f in findings_as_asked([], chunk, "Write the values of column 'state' in upper case.")]
        ["20 cells of 'state' are written in another case than the upper case asked"]
    """
    if asks_to_normalise_whitespace(instructions):
        findings = [f for f in findings if f.kind != whitespace.KIND] + [
            f for name in chunk.columns
            if (f := _detect(whitespace.KIND, ColumnValues.of(name, chunk[name]), instructions))
        ]
    if any(_number_forms_asked(instructions)):
        findings = [f for f in findings if f.kind != number_format.KIND] + [
            f for name in chunk.columns
            if (f := _detect(number_format.KIND, ColumnValues.of(name, chunk[name]), instructions))
        ]
    if cased := [c for c in chunk.columns if asked_case(instructions, str(c))]:
        drop = rows()
        drop = chunk if drop is None else drop
        findings = [f for f in findings if not (f.kind == case_variants.KIND and f.column in cased)] + [
            f for name in cased if (f := _detect(case_variants.KIND, ColumnValues.of(name, drop[name]), instructions))
        ]
    return findings


def _detect(kind: str, column: ColumnValues, instructions: str) -> Finding | None:
    """The detector of `kind` over one column, as the user's instructions ask: free text's own spacing is stray
    whitespace only when they ask for whitespace to be normalised."""
    if kind == whitespace.KIND:
        return whitespace.detect(column, normalise_free_text=asks_to_normalise_whitespace(instructions))
    if kind == number_format.KIND and any(asked := _number_forms_asked(instructions, column.name)):
        return number_format.detect_asked(column, whole=asked[0], leading_zeros=asked[1])
    if kind == case_variants.KIND and (case := asked_case(instructions, column.name)):
        return case_variants.detect(column, asked=case)
    return DETECTORS[KINDS.index(kind)].detect(column)


def _number_forms_asked(instructions: str, column: str | None = None) -> tuple[bool, bool]:
    """Whether the user asked for whole numbers without ".0", and for integers without leading zeros (of
    `column`, or of any column)."""
    return asks_for_whole_numbers(instructions, column), asks_without_leading_zeros(instructions, column)


def _asked_rewrites(request: AnalysisRequest) -> list[Finding]:
    """The values the user's instructions ask to be written otherwise, per column, where the chunk or the
    reference rows still hold them."""
    if not request.instructions:
        return []
    out = []
    for column in request.chunk.columns:
        mapping = asked_rewrites(request.instructions, str(column))
        if not mapping:
            continue
        held: dict[str, int] = {}
        for value, n in _text_held(request, column).items():
            if value.strip() in mapping:
                held[value.strip()] = held.get(value.strip(), 0) + n
        if held:
            out.append(Finding(kind=REWRITES, column=str(column), count=sum(held.values()),
                               message=f"{sum(held.values())} cells of {str(column)!r} hold values the instructions "
                               f"ask to write otherwise ({', '.join(map(repr, held))})",
                               examples=tuple(held)[:3], params={"mapping": mapping}))  # every value asked: the next drop too
    return out


def _asked_layouts(request: AnalysisRequest) -> list[Finding]:
    """The date layouts the user's instructions (or corrections, `Labels.conventions`) ask a column's dates to be
    rewritten between, where the chunk or the reference rows hold a date they rewrite."""
    if not request.instructions:
        return []
    out = []
    for column in request.chunk.columns:
        for source, target, both_ways in asked_layouts(request.instructions, str(column)):
            held: dict[str, str] = {}
            cells = 0
            for value, n in _text_held(request, column).items():
                if (written := convert(value, source, target, both_ways)) is not None:
                    held[value], cells = written, cells + n
            if held:
                examples = dict(list(held.items())[:2])
                out.append(Finding(kind=LAYOUTS, column=str(column), count=cells,
                                   message=f"{cells} cells of {str(column)!r} hold dates written {source} the "
                                   f"instructions ask in the layout {target} ({_arrows(list(examples), examples)})",
                                   examples=tuple(examples), params={"source": str(source), "target": str(target),
                                                                     "both_ways": both_ways, "examples": examples}))
                break  # one layout per column: the first asked
    return out


def _asked_units(request: AnalysisRequest) -> list[Finding]:
    """The units the user's instructions (or corrections, `Labels.conventions`) ask a column's numbers to be written
    with, where the chunk or the reference rows hold a number with another spelling of one."""
    return _asked_values(request, UNITS, _units_asked, "numbers whose unit the instructions ask to write otherwise")


def _units_asked(instructions: str, column: str):
    """The rewrite of one value the units asked of `column` make (None where it keeps it), with its params; or None."""
    if (found := asked_units(instructions, column)) is None:
        return None
    units, drop_rest = found

    def rewrite(value: str) -> str | None:
        m = NUMBER_WITH_UNIT.fullmatch(value)
        ok = m and unit_key(m[3]) in units and (drop_rest or not m[4])
        return m[1] + m[2] + units[unit_key(m[3])] if ok else None

    return rewrite, {"units": units, "drop_rest": drop_rest}


def _asked_digits(request: AnalysisRequest) -> list[Finding]:
    """The layout the user's instructions (or corrections, `Labels.conventions`) ask a column's digits to be written
    in, where the chunk or the reference rows hold digits that fit it written otherwise."""
    return _asked_values(request, DIGITS, _digits_asked, "digits the instructions ask in another layout")


def _digits_asked(instructions: str, column: str):
    """The rewrite of one value the digit layout asked of `column` makes (None where it keeps it), with its params;
    or None."""
    if (found := asked_digit_layout(instructions, column)) is None:
        return None
    layout, runs = found
    return (lambda value: in_layout(value, layout, runs)), {"layout": layout, "runs": runs}


def still_asked(item: str, frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per column of `frame` one instruction item asks the rules' kind of rewrite of (values written otherwise, a
    date layout, a unit, a digit layout, a placeholder for empty cells, a case: what `asked` reads), the values it
    still asks to be written otherwise there, on most cells first: what a function said to serve the item left
    undone. Columns with none are left out; so is every column of an item the rules do not read.

    Example:
        >>> frame = pd.DataFrame({"state": ["MO", "tx", "tx", "Ny"], "tier": ["gold", "", None, "silver"]})
        >>> still_asked("Write the values of column 'state' in upper case.", frame)
        {'state': ['tx', 'Ny']}
        >>> still_asked("Write the empty cells of column 'tier' as 'unknown'.", frame)
        {'tier': ['']}
    """
    out: dict[str, list[str]] = {}
    for column in frame.columns:
        name = str(column)
        values = frame[column]
        text = values[values.apply(isinstance, args=(str,))]
        held = text.value_counts()
        rewrites = []
        if mapping := asked_rewrites(item, name):
            rewrites.append(lambda v, m=mapping: m.get(v.strip()))
        for source, target, both_ways in asked_layouts(item, name)[:1]:
            rewrites.append(lambda v, s=source, t=target, b=both_ways: convert(v, s, t, b))
        for asked in (_units_asked, _digits_asked):
            if (found := asked(item, name)) is not None:
                rewrites.append(found[0])
        if case := asked_case(item, name):
            rewrites.append(lambda v, c=case: case_variants.convert(v, c, asked=True))
        left = [v for v in held.index if any((w := rewrite(v)) is not None and w != v for rewrite in rewrites)]
        if asked_placeholder(item, name) is not None:
            left = [""] * bool(_empty_cells(values)) + [v for v in left if v.strip()]
        if left:
            out[name] = left
    return out


def _asked_placeholders(request: AnalysisRequest) -> list[Finding]:
    """The text the user's instructions (or corrections, `Labels.conventions`) ask a column's empty cells to be
    written as, where the chunk or the reference rows hold an empty cell there."""
    if not request.instructions:
        return []
    out = []
    for column in request.chunk.columns:
        if (placeholder := asked_placeholder(request.instructions, str(column))) is None:
            continue
        cells = 0
        for frame in (request.chunk, request.reference):
            if frame is not None and column in frame.columns:
                cells += _empty_cells(frame[column])
        if cells:
            out.append(Finding(kind=PLACEHOLDERS, column=str(column), count=cells,
                               message=f"{cells} empty cells of {str(column)!r} the instructions ask written as "
                               f"{placeholder!r}", examples=("",), params={"placeholder": placeholder}))
    return out


def _empty_cells(values: pd.Series) -> int:
    """The cells of `values` a placeholder is asked for: nulls, and text that is empty or only whitespace."""
    return int((values.isna() | values.apply(lambda v: isinstance(v, str) and not v.strip())).sum())


def _asked_values(request: AnalysisRequest, kind: str, asked, what: str) -> list[Finding]:
    """A finding of `kind` per column the instructions ask a rewrite of (`asked(instructions, column)`: the rewrite
    of one value, None where it keeps it, and the finding's params; or None), where the chunk or the reference
    rows hold values it writes otherwise: "N cells of 'col' hold `what` (examples)"."""
    if not request.instructions:
        return []
    out = []
    for column in request.chunk.columns:
        if (found := asked(request.instructions, str(column))) is None:
            continue
        rewrite, params = found
        held: dict[str, str] = {}
        cells = 0
        for value, n in _text_held(request, column).items():
            if (written := rewrite(value)) is not None and written != value:
                held[value], cells = written, cells + n
        if held:
            examples = dict(list(held.items())[:2])
            out.append(Finding(kind=kind, column=str(column), count=cells,
                               message=f"{cells} cells of {str(column)!r} hold {what} "
                               f"({_arrows(list(examples), examples)})",
                               examples=tuple(examples), params={**params, "examples": examples}))
    return out


def _text_held(request: AnalysisRequest, column) -> dict[str, int]:
    """The text values `column` holds in the chunk and the reference rows, with their cells over both (as written)."""
    held: dict[str, int] = {}
    for frame in (request.chunk, request.reference):
        if frame is not None and column in frame.columns:
            text = frame[column][frame[column].apply(isinstance, args=(str,))]
            for value, n in text.value_counts().items():
                held[value] = held.get(value, 0) + int(n)
    return held


def _drop_rows(request: AnalysisRequest) -> pd.DataFrame | None:
    """The chunk's and the reference's rows, each row counted once, or None without reference rows.

    The reference is the drop's visible rows, so it usually holds the chunk's rows too: counted in both, a
    misspelling the chunk repeats would look twice as common as it is. A row of the chunk is added only where
    the chunk holds it more often than the reference does.
    """
    reference = request.reference
    if reference is None or reference.empty:
        return None
    chunk = request.chunk[[c for c in reference.columns if c in request.chunk.columns]]
    chunk_keys, reference_keys = _row_keys(chunk), _row_keys(reference)
    in_reference = chunk_keys.map(reference_keys.value_counts()).fillna(0).to_numpy()
    extra = chunk_keys.groupby(chunk_keys).cumcount().to_numpy() >= in_reference
    return pd.concat([reference, chunk[extra]], ignore_index=True)


def _row_keys(frame: pd.DataFrame) -> pd.Series:
    """A hash of each row's cells as text (JSON lists and objects are unhashable as they are)."""
    return pd.util.hash_pandas_object(frame.astype(str), index=False).reset_index(drop=True)


#: Context keys that only illustrate a docstring: merging keeps the first function's.
_DISPLAY_ONLY = {"examples", "why"}
#: Context keys holding a set of characters as a string: merging unites them.
_ALPHABETS = {"letters"}
#: A table read in the column another key names: merged only where both functions read the same column, else the
#: first function's column and table are kept (the column that says which entity a value is).
_FIRST_TABLE = {"companions": "companion"}


def _merge_context(a: dict, b: dict) -> dict:
    """Two template contexts as one: tables and lists united (the first wins a conflicting key), other
    values must agree. Raises ValueError when they do not, so the functions stay apart."""
    out = dict(a)
    for key, value in b.items():
        if key not in out or key in _DISPLAY_ONLY:
            out.setdefault(key, value)
        elif key in _ALPHABETS:  # the letters both columns' values use
            out[key] = "".join(sorted(set(out[key]) | set(value)))
        elif key in _FIRST_TABLE and out.get(_FIRST_TABLE[key]) != b.get(_FIRST_TABLE[key]):
            continue  # a table read in another column than the first function's: the first's column and table
        elif key in _FIRST_TABLE.values() and out[key] != value:
            continue
        else:
            out[key] = _merge_value(out[key], value)
    return out


def _merge_value(a: object, b: object) -> object:
    if isinstance(a, dict) and isinstance(b, dict):
        merged = dict(a)
        for k, v in b.items():
            merged[k] = _merge_value(a[k], v) if k in a and isinstance(a[k], (dict, list)) else a.get(k, v)
        # Keep constants in a stable order: the rendered module must not depend on which chunk came first.
        return dict(sorted(merged.items(), key=lambda kv: str(kv[0])))
    if isinstance(a, list) and isinstance(b, list):
        return a + [v for v in b if v not in a]
    if a == b:
        return a
    raise ValueError(f"conflicting values {a!r} and {b!r}")


def _in_order(columns: Iterable[str], order: Sequence[str]) -> list[str]:
    """`columns` in the place each has in `order`; those it does not name after them, as they came."""
    place = {c: i for i, c in enumerate(order)}
    columns = list(columns)
    return sorted(columns, key=lambda c: (place.get(c, len(place)), columns.index(c)))


def _candidates(findings: list[Finding]) -> Iterator[tuple[Rule, list[Finding]]]:
    """The functions worth proposing, first to last: per kind in priority order, a multi-column function
    for rules that span columns (then each column alone, in case it was rejected), else one per column."""
    for kind in (*KINDS, *ASKED_KINDS, *DROP_KINDS):
        rule = RULES.get(kind)
        found = [f for f in findings if f.kind == kind]
        if rule is None or not found:
            continue
        if rule.spans_columns and len(found) > 1:
            yield rule, found
        for f in found:
            yield rule, [f]


def _base_name(rule: Rule, found: list[Finding]) -> str:
    return _columns_name(rule.prefix, [f.column for f in found])


def _columns_name(prefix: str, columns: list[str]) -> str:
    """`<prefix>_<column>[_<column>...]` for up to three columns, else `<prefix>_in_<n>_columns`."""
    if len(columns) > MAX_NAMED_COLUMNS:
        return f"{prefix}_in_{len(columns)}_columns"
    return "_".join([prefix, *(_identifier(c) for c in columns)])


def _identifier(column: str) -> str:
    """A column name as a readable lower-case identifier part ("Signup Date" -> "signup_date")."""
    ascii_text = unicodedata.normalize("NFKD", column).encode("ascii", "ignore").decode()
    return re.sub(r"[^0-9a-z]+", "_", ascii_text.lower()).strip("_")[:40] or "column"


def _free_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_2`, `base_3`... when the registry already holds that name."""
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _literal(value: object) -> str:
    """A constant as Python source: inline when short, one entry per line (a reviewable table) when longer, and
    packed (`_compact`) beyond COMPACT_TABLE_ENTRIES entries."""
    inline = repr(value)
    if len(inline) <= INLINE_LITERAL or not isinstance(value, (dict, list, tuple)):
        return inline
    if len(value) > COMPACT_TABLE_ENTRIES:
        return _compact(value)
    if isinstance(value, dict):
        lines = [f"    {k!r}: {v!r}," for k, v in value.items()]
        return "{\n" + "\n".join(lines) + "\n}"
    opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
    return opening + "\n" + "\n".join(f"    {v!r}," for v in value) + "\n" + closing


def _compact(table: dict | list | tuple) -> str:
    """A big table as source that is still plain Python and still reads as a table: entries packed several to
    a line, and a dict whose keys share few values written the other way round, each value once with its keys
    (`{'BIRMINGHAM': ('35233', '35234'), ...}`), inside the comprehension that turns it back into key -> value.
    Every key and value is written by repr, so the table reads back equal, entry for entry; the order is the
    table's (a grouped dict's keys come in their values' order)."""
    if isinstance(table, dict):
        groups = _by_value(table)
        if groups is None:
            return "{\n" + "\n".join(_packed([f"{k!r}: {v!r}," for k, v in table.items()])) + "\n}"
        lines = [f"{{k: v for v, ks in {{  # {len(table)} entries, written value: (its keys)"]
        for value, keys in groups:
            last = repr(keys[-1]) + ("," if len(keys) == 1 else "") + "),"
            lines += _packed([f"{k!r}," for k in keys[:-1]] + [last], first=f"    {value!r}: (", then=" " * 8)
        return "\n".join(lines) + "\n}.items() for k in ks}"
    opening, closing = ("[", "]") if isinstance(table, list) else ("(", ")")
    return opening + "\n" + "\n".join(_packed([f"{v!r}," for v in table])) + "\n" + closing


def _by_value(table: dict) -> list[tuple[object, list]] | None:
    """The keys of `table` per value, values in the order they are first met; None when that is no shorter (more
    than half the values distinct) or not exact: a value that cannot be a dict key, or two values a dict holds as
    one key (1 and True, 0.0 and -0.0)."""
    try:
        distinct = len(set(table.values()))
    except TypeError:
        return None
    if distinct > len(table) / 2:
        return None
    groups: dict[tuple[type, str], tuple[object, list]] = {}
    for key, value in table.items():
        groups.setdefault((type(value), repr(value)), (value, []))[1].append(key)
    return list(groups.values()) if len(groups) == distinct else None


def _packed(items: list[str], *, first: str = "    ", then: str = "    ") -> list[str]:
    """Lines holding `items` in order, as many to a line as fit in COMPACT_WIDTH (an item longer than that alone),
    the first line starting with `first`, the others with `then`."""
    lines, line, count = [], first, 0
    for item in items:
        if count and len(line) + 1 + len(item) > COMPACT_WIDTH:
            lines.append(line)
            line, count = then, 0
        line += (" " if count else "") + item
        count += 1
    return lines + [line]


def _docstring_safe(text: object) -> str:
    """Text that cannot end or break the triple-quoted docstring it is rendered into."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def _quoted(value: object) -> str:
    """A value (or each value of a list) as a Python literal, safe inside a docstring."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return _docstring_safe(", ".join(repr(v) for v in items))


def _arrows(values: list[str] | tuple[str, ...], mapping: dict[str, str]) -> str:
    """A few "before -> after" pairs for a docstring."""
    pairs = [f"{v!r} -> {mapping[v]!r}" for v in values if v in mapping]
    return ", ".join(pairs) or "see the table"
