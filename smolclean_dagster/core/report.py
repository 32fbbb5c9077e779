"""The markdown report shipped beside the module: what each function fixes, with evidence, and the checks."""

from __future__ import annotations

import ast
import io
from collections.abc import Iterator, Sequence
from pathlib import Path

from .analysts.rules import COMPACT_TABLE_ENTRIES
from .instructions import InstructionItem, coverage_line
from .labels import BROKEN_LABELS, KEPT_FOR_LABELS, Labels
from .files import write_atomic
from .plan import ChunkPlan
from .quality import ValidationReport
from .questions import Questions
from .registry import Registry
from .steps import ChunkTrace
from .trajectory import LearningMetrics


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _why(function) -> str:
    """Why the function was made: the findings a rule acted on, else the first line of its docstring."""
    if function.rule is not None and function.rule.context.get("why"):
        return "; ".join(function.rule.context["why"])
    return (function.docstring.strip().splitlines() or ["(not said)"])[0]


def render_report(
    registry: Registry,
    validation: ValidationReport | None,
    plans: list[ChunkPlan] = (),  # type: ignore[assignment]
    traces: list[ChunkTrace] = (),  # type: ignore[assignment]
    chart: Path | None = None,
    items: tuple[InstructionItem, ...] = (),
    reads_instructions: bool = True,
    metrics: LearningMetrics | None = None,
    labels: Sequence[Labels] = (),
    questions: Questions | None = None,
) -> str:
    """The report as markdown: the instructions and how each was carried out, the questions the drop leaves open,
    functions with provenance and examples, validation and quality (with the chart), LLM use, and which chunks were
    analysed and why."""
    out = [f"# Cleaning report: {registry.dataset}", "", f"Registry revision {registry.version}, "
           f"{len(registry.entries)} function(s).", ""]
    if items:
        out += _instructions(registry, items, reads_instructions)
    if questions is not None:
        out += questions_section(questions)
    out += ["## Functions", ""]
    for i, e in enumerate(registry.entries, 1):
        f, p, ev = e.function, e.provenance, e.evidence
        out += [
            f"### {i}. `{f.name}`",
            "",
            f.docstring.strip() or "(no docstring)",
            "",
            f"- columns: {', '.join(f.columns) or 'not declared'}",
            f"- learned from: drop `{p.drop}`, chunk `{p.chunk}`, step {p.step}, analyst {p.analyst}"
            + (f" ({p.model})" if p.model else ""),
            f"- evidence: {ev.cells_changed} cell(s) changed over {ev.rows_checked} rows "
            f"({ev.holdout_rows} held out) in {', '.join(ev.columns_changed) or '-'}",
            f"- why: {_md(_why(f))}",
        ]
        numbers = [f"#{i.number}" for i in items if i.text in e.serves]
        if numbers:
            out.append(f"- serves instruction(s): {', '.join(numbers)}")
        if ev.examples:
            out += ["", "| column | before | after |", "|---|---|---|"]
            out += [f"| {_md(x.column)} | `{_md(x.before)}` | `{_md(x.after)}` |" for x in ev.examples]
        out.append("")
    out += tables_section(registry)
    if validation is not None:
        out += ["## Validation on held-out rows", "", f"{validation.holdout_rows} rows the analyst never saw; "
                f"{validation.cells_changed} cell(s) changed. The blocking checks below decide whether the module "
                "is exported; they say nothing of dirt that is left (see the next sections).", "",
                "| blocking check | passed | detail |", "|---|---|---|"]
        out += [f"| {c.name} | {'yes' if c.passed else 'NO'} | {_md(c.detail)} |" for c in validation.checks]
        out += changes_section(validation, registry)
        out += ["", "## Quality before and after (detector findings per column)", "", "| column | before | after |",
                "|---|---|---|"]
        out += [f"| {_md(q.column)} | {q.before} | {q.after} |" for q in validation.quality]
        if chart is not None:
            out += ["", f"![Detector findings per column before and after]({chart.name})"]
        out += left_section(validation)
    if labels:
        out += labels_section(labels, traces)
    if traces:
        calls = sum(t.usage.calls for t in traces)
        cached = sum(t.usage.cached_calls for t in traces)
        tokens_in = sum(t.usage.prompt_tokens for t in traces)
        tokens_out = sum(t.usage.completion_tokens for t in traces)
        cost = sum(t.usage.cost_usd for t in traces)
        out += ["", "## Analyst use", "", f"{len(traces)} chunk(s) analysed; {calls} LLM call(s) ({cached} from the "
                f"cache), {tokens_in} prompt and {tokens_out} completion tokens, ${cost:.4f}.", ""]
        asked = [(t.chunk_id, s) for t in traces for s in t.steps if getattr(s, "query", None)]
        if asked:
            out += ["### Queries the model asked of the drop", "", "| chunk | step | query | answer (start) |",
                    "|---|---|---|---|"]
            out += [f"| `{c}` | {s.step} | `{_md(s.query)}` | {_md((s.query_result or '')[:160])} |" for c, s in asked]
            out.append("")
    if metrics is not None:
        out += learning_run_section(metrics)
    for plan in plans:
        chosen = [c for c in plan.chunks if c.reason]
        out += ["", f"## Chunks of `{plan.drop}`", "", f"{plan.rows} rows in {len(plan.chunks)} chunks; "
                f"{len(plan.holdout)} rows held out; {len(chosen)} chunk(s) analysed in {plan.waves} wave(s).", "",
                "| wave | rows | why |", "|---|---|---|"]
        out += [f"| {c.wave} | {c.start}-{c.stop} | {_md(c.reason)} |" for c in sorted(chosen, key=lambda c: (c.wave, c.start))]
    return "\n".join(out).rstrip() + "\n"


def _instructions(registry: Registry, items: tuple[InstructionItem, ...], reads: bool) -> list[str]:
    """The user's instruction items, each with the functions serving it, its decline reason, or "open"."""
    states = registry.coverage(items)
    planned = bool(registry.plan) and tuple(i.text for i in items) == registry.plan
    out = ["## The model's own plan" if planned else "## Instructions", ""]
    if planned:
        out += ["No instructions were given; with its first step the model wrote these items, served or declined "
                "like a user's.", ""]
    out += [coverage_line(states, reasons=False) + ".", ""]
    if not reads and any(s.state == "open" for s in states):
        out += ["The offline rules analyst reads only the few requests its rules know (docs/analysts.md): set a model "
                "to have the open items carried out.", ""]
    out += ["| # | instruction | outcome |", "|---|---|---|"]
    for s in states:
        outcome = (f"served by {', '.join(f'`{f}`' for f in s.functions)}" if s.state == "served"
                   else f"declined: {s.reason}" if s.state == "declined" else "**open**")
        out.append(f"| {s.number} | {_md(s.text)} | {_md(outcome)} |")
    return out + [""]


def questions_section(questions: Questions) -> list[str]:
    """The report's "Questions" section: the conventions the drop leaves open that the instructions do not settle,
    each with its options and the instruction item each becomes when chosen."""
    out = ["## Questions", ""]
    if questions.open:
        out += [f"The drop ({questions.drop}, {questions.rows} rows read as the module cleans them) leaves these "
                "conventions open: nothing in the file says which way is right, so the module leaves them as written. "
                f"Answer with `smolclean answer {questions.dataset}` (or the job `{questions.dataset}_answer`): the "
                "option chosen joins the instructions, and the next learning serves it.", ""]
    return out + [questions.markdown(), ""]


def changes_section(validation: ValidationReport, registry: Registry) -> list[str]:
    """Every change the module makes on the held-out rows, per function, for a person to review; and the
    functions validation took out of the module, with the reason."""
    out = ["", "## Changes per function on held-out rows", "",
           "Each function's changes as the module runs them, in order. \"Looked valid\" counts cells whose old value "
           "was common in its column or in the column's usual form; \"undone\" counts cells a later function set back.",
           "", "| function | cells changed | columns | looked valid | undone | before -> after (up to 10) |",
           "|---|---|---|---|---|---|"]
    for f in validation.functions:
        pairs = "; ".join(f"{c}: `{_md(b)}` -> `{_md(a)}`" for c, b, a in f.pairs) or "-"
        out.append(f"| `{f.name}` | {f.cells} | {_md(', '.join(f.columns)) or '-'} | {f.valid_hits} | {f.undone} | {pairs} |")
    if registry.dropped:
        out += ["", "Taken out of the module by validation (the module is exported with what holds):", ""]
        out += [f"- `{d.name}`: {_md(d.reason)}" for d in registry.dropped]
    return out
def labels_section(labels: Sequence[Labels], traces: Sequence[ChunkTrace]) -> list[str]:
    """The report's "Labelled rows" section: the user's corrections, and the functions sent back (a model's) or
    dropped (a rule's) because they broke one."""
    out = ["", "## Labelled rows", "", "Rows a person corrected: a cell changed there is a correction, a cell left "
           "as it was is confirmed right. Every function was held to them; the shipped tests replay them.", ""]
    for label in labels:
        out.append(f"- {label.summary()}")
        out += [f"  - row {c.row} {_md(repr(c.column))}: `{_md(c.before)}` -> `{_md(c.after)}`"
                for c in label.corrections[:20]]
    broke = [(t.chunk_id, s) for t in traces for s in t.steps
             if getattr(s, "kind", "") == "verdict" and s.reason.startswith(BROKEN_LABELS)]
    if broke:
        out += ["", "Functions that broke a label: sent back (a model's), or dropped (a rule's), or, for a rule that "
                "keeps every label once the values it broke stay as written, kept so:", "",
                "| chunk | function | labels broken | outcome |", "|---|---|---|---|"]
        for c, s in broke:
            what, _, kept = s.reason.split("; the user")[0].partition(f" {KEPT_FOR_LABELS} ")
            outcome = (f"kept, these values as written: {_md(kept.split(');')[0].lstrip('('))}" if kept
                       else "sent back or dropped")
            out.append(f"| `{c}` | `{s.function_name}` | {_md(what)} | {outcome} |")
    return out


def learning_run_section(metrics: LearningMetrics) -> list[str]:
    """The report's "Learning run" section: what the run that exported this module cost and did."""
    rejected = ", ".join(f"{k}: {v}" for k, v in sorted(metrics.rejections.items())) or "none"
    prompts = ", ".join(f"{k} v{v}" for k, v in sorted(metrics.prompts.items())) or "-"
    return ["", "## Learning run", "", "| figure | value |", "|---|---|",
            f"| analyst calls (cached) | {metrics.calls} ({metrics.cached_calls}) |",
            f"| prompt / completion tokens | {metrics.prompt_tokens} / {metrics.completion_tokens} |",
            f"| cost | ${metrics.cost_usd:.4f} |",
            f"| steps / accepted functions | {metrics.steps} / {metrics.accepted} ({metrics.steps_per_accepted} per function) |",
            f"| rejections by reason | {_md(rejected)} |",
            f"| unusable replies | {metrics.unusable_replies} |",
            f"| instruction items served / declined / open | {metrics.items_served} / {metrics.items_declined} / "
            f"{metrics.items_open} |",
            f"| cells changed on held-out rows | {metrics.cells_changed} |",
            f"| prompt templates | {prompts} |"]


#: Entries of a big table the report shows, spread over the table.
TABLE_SAMPLES = 3


def tables_section(registry: Registry) -> list[str]:
    """The report's "Learned tables" section: every table of more than COMPACT_TABLE_ENTRIES entries a function
    holds, with its entry count and a few of its entries. The module writes such tables compactly (packed, grouped
    by value), so the reviewer reads their size here; nothing when no function holds one."""
    rows = [(e.function.name, *table) for e in registry.entries for table in big_tables(e.function.code)]
    if not rows:
        return []
    out = ["## Learned tables", "", f"Tables of more than {COMPACT_TABLE_ENTRIES} entries, written compactly in the "
           "module (several entries to a line; a table whose keys share few values as value: (its keys)).", "",
           "| function | table | entries | sample entries |", "|---|---|---|---|"]
    out += [f"| `{name}` | `{_md(table)}` | {count} | {'; '.join(f'`{_md(e)}`' for e in samples)} |"
            for name, table, count, samples in rows]
    return out + [""]


def big_tables(code: str) -> list[tuple[str, int, list[str]]]:
    """The tables of more than COMPACT_TABLE_ENTRIES entries in a function's code, as (name, entries, a few entries
    as written, spread over it). A table is named by where it sits in the constant holding it, with the text beside
    it in its tuple (`DEPENDENCIES[0][2] ('zip', 'city')`); one grouped by value counts and shows key: value entries.

    Example:
        >>> code = "def f(df):\\n    T = " + repr({i: "x" for i in range(300)}) + "\\n    return df\\n"
        >>> big_tables(code)
        [('T', 300, ["0: 'x'", "100: 'x'", "200: 'x'"])]
    """
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            for name, entries in _tables_in(node.value, node.targets[0].id):
                step = max(1, len(entries) // TABLE_SAMPLES)
                samples = [_entry_text(e) for e in entries[::step][:TABLE_SAMPLES]]
                found.append((name, len(entries), samples))
    return found


def _tables_in(node: ast.expr, path: str, beside: str = "") -> Iterator[tuple[str, list]]:
    """The big tables in a constant's value, each named by its path (`DEPENDENCIES[0][2]`) and the text beside it in
    its tuple (`('zip', 'city')`): the value itself, or tables inside its tuples, lists and dicts."""
    entries = _entries(node)
    if entries is not None and len(entries) > COMPACT_TABLE_ENTRIES:
        yield f"{path} {beside}".rstrip(), entries
    elif isinstance(node, (ast.Tuple, ast.List)):
        texts = [ast.unparse(e) for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        for i, element in enumerate(node.elts):
            yield from _tables_in(element, f"{path}[{i}]", f"({', '.join(texts)})" if texts else beside)
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if key is not None:
                yield from _tables_in(value, f"{path}[{ast.unparse(key)}]", beside)


def _entries(node: ast.expr) -> list | None:
    """A table's entries (an item, or a key and value), or None for what is no table: a dict, list, tuple or set
    display, or a dict written grouped by value (`{k: v for v, ks in {value: (keys...)}.items() for k in ks}`)."""
    if isinstance(node, ast.Dict):
        return list(zip(node.keys, node.values))
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return list(node.elts)
    grouped = node.generators[0].iter if isinstance(node, ast.DictComp) and len(node.generators) == 2 else None
    if (isinstance(grouped, ast.Call) and isinstance(grouped.func, ast.Attribute) and grouped.func.attr == "items"
            and isinstance(grouped.func.value, ast.Dict)
            and all(isinstance(keys, ast.Tuple) for keys in grouped.func.value.values)):
        table = grouped.func.value
        return [(key, value) for value, keys in zip(table.keys, table.values) for key in keys.elts]
    return None


def _entry_text(entry: ast.expr | tuple[ast.expr, ast.expr]) -> str:
    """An entry as the function's code writes it: `item`, or `key: value`."""
    if isinstance(entry, tuple):
        return f"{ast.unparse(entry[0])}: {ast.unparse(entry[1])}"
    return ast.unparse(entry)


def left_section(validation: ValidationReport) -> list[str]:
    """The report's "What is left" section: per column, what the detectors still find after cleaning."""
    out = ["", "## What is left (detector findings on the cleaned held-out rows)", ""]
    if not validation.left:
        return out + ["Nothing the detectors look for is left on the held-out rows."]
    out += ["| column | cells | what |", "|---|---|---|"]
    out += [f"| {_md(q.column)} | {q.after} | {_md('; '.join(q.left))} |" for q in validation.left]
    return out


def write_report(
    registry: Registry,
    validation: ValidationReport | None,
    out_dir: Path,
    plans: list[ChunkPlan] = (),  # type: ignore[assignment]
    traces: list[ChunkTrace] = (),  # type: ignore[assignment]
    items: tuple[InstructionItem, ...] = (),
    reads_instructions: bool = True,
    metrics: LearningMetrics | None = None,
    labels: Sequence[Labels] = (),
    questions: Questions | None = None,
) -> Path:
    """Write `report.md` (and `quality.png` when there is a validation) beside the module, atomically."""
    out_dir = Path(out_dir)
    chart = write_chart(validation, out_dir / "quality.png") if validation and validation.quality else None
    path = out_dir / "report.md"
    write_atomic(path, render_report(registry, validation, plans, traces, chart, items, reads_instructions,
                                     metrics, labels, questions))
    return path


def write_chart(validation: ValidationReport, path: Path) -> Path:
    """A bar chart of detector findings per column, before and after cleaning, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [q.column for q in validation.quality]
    x = range(len(columns))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(columns) + 2), 3.6), dpi=100)
    ax.bar([i - 0.2 for i in x], [q.before for q in validation.quality], width=0.4, label="before", color="#c0504d")
    ax.bar([i + 0.2 for i in x], [q.after for q in validation.quality], width=0.4, label="after", color="#4f81bd")
    ax.set_xticks(list(x), columns, rotation=30, ha="right")
    ax.set_ylabel("cells flagged")
    ax.set_title(f"{validation.dataset}: detector findings on {validation.holdout_rows} held-out rows")
    ax.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", metadata={"Software": None})
    plt.close(fig)
    write_atomic(path, png.getvalue())
    return path
