"""The markdown report shipped beside the module: what each function fixes, with evidence, and the checks."""

from __future__ import annotations

from pathlib import Path

from .quality import ValidationReport
from .registry import Registry, write_atomic


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_report(registry: Registry, validation: ValidationReport | None) -> str:
    """The report as markdown: functions with provenance and examples, then validation and quality."""
    out = [f"# Cleaning report: {registry.dataset}", "", f"Registry version {registry.version}, "
           f"{len(registry.entries)} function(s), updated {registry.updated_at or 'never'}.", ""]
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
        ]
        if ev.examples:
            out += ["", "| column | before | after |", "|---|---|---|"]
            out += [f"| {_md(x.column)} | `{_md(x.before)}` | `{_md(x.after)}` |" for x in ev.examples]
        out.append("")
    if validation is not None:
        out += ["## Validation on held-out rows", "", f"{validation.holdout_rows} rows the analyst never saw; "
                f"{validation.cells_changed} cell(s) changed.", "", "| check | passed | detail |", "|---|---|---|"]
        out += [f"| {c.name} | {'yes' if c.passed else 'NO'} | {_md(c.detail)} |" for c in validation.checks]
        out += ["", "## Quality before and after (detector findings per column)", "", "| column | before | after |",
                "|---|---|---|"]
        out += [f"| {_md(q.column)} | {q.before} | {q.after} |" for q in validation.quality]
    return "\n".join(out).rstrip() + "\n"


def write_report(registry: Registry, validation: ValidationReport | None, out_dir: Path) -> Path:
    """Write `report.md` beside the module (atomically)."""
    path = Path(out_dir) / "report.md"
    write_atomic(path, render_report(registry, validation))
    return path
