"""`smolclean`: the command line. Every learning command goes through the Dagster assets on the workdir's instance."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from importlib import resources
from pathlib import Path

from .core.errors import SmolcleanError
from .core.server_process import run_until_stopped

DEFAULT_WORKDIR = Path("smolclean-work")
DEMO_FILES = {"customers": "customers.csv", "orders": "orders.jsonl"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="smolclean", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true", help="log every step")
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="learn modules for the bundled sample data, offline, and clean it")
    demo.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)

    learn = sub.add_parser("learn", help="learn a cleaning module for a file")
    learn.add_argument("file", type=Path)
    learn.add_argument("--name", required=True, help="dataset name (letters, digits, '_')")
    learn.add_argument("--instructions", default=None, help="what you want, as TEXT or @FILE")
    learn.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    learn.add_argument("--chunk-size", type=int, default=None)
    learn.add_argument("--chunk-budget", type=int, default=None)
    learn.add_argument("--max-steps", type=int, default=None, help="most analyst steps one chunk may take")
    learn.add_argument("--step-budget", type=int, default=None,
                       help="most analyst steps (model calls) for the whole drop, shared by its chunks")
    learn.add_argument("--concurrency", type=int, default=None, help="chunks analysed at once")
    learn.add_argument("--analyst", choices=["rules", "llm", "hybrid"], default=None,
                       help="default: rules without a model, hybrid with one")
    learn.add_argument("--model", default=None, help="litellm model string (or SMOLCLEAN_MODEL)")
    learn.add_argument("--api-base", default=None, help="API base URL (or SMOLCLEAN_API_BASE)")
    learn.add_argument("--api-key", default=None, help="API key (or SMOLCLEAN_API_KEY)")
    learn.add_argument("--labels", type=Path, default=None, metavar="FILE",
                       help="rows of FILE you corrected (from `smolclean label`, or rows of a cleaned output with "
                            "their _row): ground truth every function is held to")
    learn.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="any dataset setting, repeatable: --set llm_timeout_s=1800 --set apply_workers=2 "
                            "(KEY= unsets one); over the workdir's datasets/NAME.yaml when there is one")

    label = sub.add_parser("label", help="pick the rows of a file whose correction teaches the most, to correct by hand")
    label.add_argument("file", type=Path)
    label.add_argument("--name", required=True, help="dataset name (letters, digits, '_')")
    label.add_argument("--rows", type=int, default=20, help="rows to pick (20)")
    label.add_argument("-o", "--output", type=Path, required=True,
                       help="the file to write: .csv for CSV drops (.tsv for TSV), .jsonl for JSON drops")

    apply = sub.add_parser("apply", help="clean a file with an exported module (in the sandbox)",
                           usage="smolclean apply (MODULE FILE | FILE --name NAME [--version N]) -o OUT")
    apply.add_argument("paths", type=Path, nargs="+", metavar="[MODULE] FILE",
                       help="the module and the file; only the file with --name")
    apply.add_argument("--name", default=None, help="clean with this dataset's live module version (see --version)")
    apply.add_argument("--version", type=int, default=None, help="with --name: this module version instead of the live one")
    apply.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    apply.add_argument("-o", "--output", type=Path, required=True, help="OUT.parquet (default), OUT.csv or OUT.jsonl")
    apply.add_argument("--batch-size", type=int, default=10_000, help="rows per batch (memory grows with it)")
    apply.add_argument("--workers", type=int, default=None,
                       help="sandbox workers cleaning batches side by side (default: one per core; memory grows with "
                            "batch size x workers)")

    versions = sub.add_parser("versions", help="a dataset's module versions: state, origin, changes, shadow figures")
    versions.add_argument("name")
    versions.add_argument("--diff", type=int, default=None, metavar="VERSION",
                          help="the cells VERSION cleans differently than the live version (its shadow check)")
    versions.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)

    approve = sub.add_parser("approve", help="make a proposed module version live")
    approve.add_argument("name")
    approve.add_argument("version", type=int)
    approve.add_argument("--reason", default="approved", help="why, for the audit trail")
    approve.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)

    rollback = sub.add_parser("rollback", help="make the previous (or the named) module version live again")
    rollback.add_argument("name")
    rollback.add_argument("--to", type=int, default=None, metavar="VERSION")
    rollback.add_argument("--reason", default="rolled back", help="why, for the audit trail")
    rollback.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)

    answer = sub.add_parser("answer", help="answer the questions learning ended with (what the file leaves open)")
    answer.add_argument("name")
    answer.add_argument("--question", type=int, default=None, metavar="N",
                        help="the question to answer (without it, each open question is asked in turn)")
    answer.add_argument("--option", type=int, default=None, metavar="K", help="with --question: the option chosen")
    answer.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)

    ui = sub.add_parser("ui", help="the Dagster UI (and daemon) on a workdir")
    ui.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        commands = {"demo": _demo, "learn": _learn, "apply": _apply, "ui": _ui, "versions": _versions,
                    "approve": _approve, "rollback": _rollback, "label": _label, "answer": _answer}
        return commands[args.command](args)
    except SmolcleanError as exc:
        # A user's error (a file, a setting): one paragraph saying what to do; the traceback only with -v.
        if args.verbose:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _settings(**values: object):
    from .settings import DatasetSettings

    return DatasetSettings.load(**{k: v for k, v in values.items() if v is not None})


def _log_level(args: argparse.Namespace) -> str:
    """Dagster's console log level for our runs: a failed step's traceback is shown with -v only (the
    failure's reason is told anyway, and every run's log stays in the instance for `smolclean ui`)."""
    return "INFO" if args.verbose else "CRITICAL"


def _print_outcome(outcome, drops: Path) -> None:
    v = outcome.validation
    print(f"[{outcome.dataset}] {outcome.functions} function(s) learned from {outcome.chunks} chunk(s) of {outcome.drop}")
    if outcome.labels:
        print(f"  labels:  {outcome.labels}")
    print(f"  module:  {outcome.module}")
    print(f"  report:  {outcome.report}")
    print(f"  cleaned: {outcome.cleaned}")
    print(f"  drops:   {drops}/  (new files there are cleaned by `smolclean ui`)")
    checks = ", ".join(c.name.replace("_", " ") for c in v.checks)
    print(f"  blocking checks on {v.holdout_rows} held-out rows: {'passed' if v.passed else 'FAILED'} ({checks}); "
          f"{v.cells_changed} cells changed")
    if v.functions:
        per = ", ".join(f"{f.name} {f.cells}" for f in v.functions)
        print(f"  cells changed per function (held-out rows; before -> after pairs in the report): {per}")
    _print_left(v)
    if outcome.instructions:
        from .core.instructions import coverage_line

        print(f"  instructions: {coverage_line(outcome.instructions)}")
    if outcome.stopped:
        print(f"  stopped: {outcome.stopped}")


def _print_questions(questions, workdir: Path) -> None:
    """The questions learning ends with: what the drop leaves open that the instructions do not settle."""
    if questions is None or not questions.open:
        print("  questions: none (the drop leaves no convention open that the instructions do not settle)")
        return
    print(f"  questions: {len(questions.open)} the drop leaves open, left as written until you answer "
          f"(smolclean answer {questions.dataset} --workdir {workdir}):")
    for q in questions.open:
        print("\n".join(f"    {line}" for line in q.lines()))


def _print_left(v) -> None:
    """Per column, what the detectors still find on the cleaned held-out rows."""
    if not v.left:
        print("  left on held-out rows: nothing the detectors look for")
        return
    # what the detectors see: dirt they do not look for is not counted, and the words say so
    print(f"  left on held-out rows: the detectors still find {sum(q.after for q in v.left)} cell(s) in "
          f"{len(v.left)} column(s)")
    for q in v.left:
        print(f"    {q.column}: {'; '.join(q.left)}")


def _demo(args: argparse.Namespace) -> int:
    from .learning.embedded import learn, workdir_instance

    instance = workdir_instance(args.workdir)
    sample = resources.files("smolclean_dagster") / "sample_data"
    for name, filename in DEMO_FILES.items():
        # One chunk at a time: chunks running side by side accept functions in whatever order they finish,
        # and the demo must give the same module on every run.
        settings = _settings(name=name, workdir=args.workdir, model=None, analyst="rules", concurrency=1)
        with resources.as_file(sample / filename) as path:
            _print_outcome(learn(settings, path, instance, log_level=_log_level(args)), settings.drops_dir)
    print(f"drop folders: {args.workdir / 'drops'}/<dataset>/  (watched by `smolclean ui --workdir {args.workdir}`)")
    return 0


def _learn(args: argparse.Namespace) -> int:
    from .learning.embedded import learn

    settings = _learn_settings(args)
    outcome = learn(settings, args.file, log_level=_log_level(args), labels=args.labels)
    _print_outcome(outcome, settings.drops_dir)
    _print_questions(outcome.questions, settings.workdir)
    _print_version(settings)
    return 0


def _label(args: argparse.Namespace) -> int:
    from .core.labels import write_label_sample

    out, rows = write_label_sample(args.file, args.output, rows=args.rows)
    print(f"[{args.name}] {len(rows)} rows of {args.file} to correct written to {out} (row numbers {', '.join(map(str, rows))})")
    print(f"  correct the cells that are wrong, leave the right ones as they are, keep the {'_row'!r} column, then:")
    print(f"  smolclean learn {args.file} --name {args.name} --labels {out}")
    return 0


def _print_version(settings) -> None:
    """Which module version the learning run made, and whether drops are cleaned by it."""
    from .cleaning.live_module import versions

    history = versions(settings).load()
    latest, live = history.latest, history.live
    if latest is None:
        return
    if latest.state == "live":
        print(f"  version: {latest.number}, live (drops are cleaned by it)")
    else:
        print(f"  version: {latest.number}, {latest.state}; drops are cleaned by live version "
              f"{live.number if live else 'none'} until you approve it: smolclean approve {settings.name} "
              f"{latest.number} --workdir {settings.workdir}  (see its diff: smolclean versions {settings.name} "
              f"--diff {latest.number} --workdir {settings.workdir})")


def _learn_settings(args: argparse.Namespace):
    """The dataset's settings for `smolclean learn`: those saved in the workdir, then the flags, then `--set`."""
    from .settings import DatasetSettings, parse_overrides

    flags = {
        "instructions": args.instructions, "chunk_size": args.chunk_size, "chunk_budget": args.chunk_budget,
        "max_steps": args.max_steps, "step_budget": args.step_budget, "concurrency": args.concurrency, "analyst": args.analyst, "model": args.model,
        "api_base": args.api_base, "api_key": args.api_key,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    return DatasetSettings.for_workdir(args.workdir, args.name, **{**given, **parse_overrides(args.overrides)})


def _apply(args: argparse.Namespace) -> int:
    from .core.apply import apply_module, read_registry_revision
    from .sandbox import Sandbox

    if args.name is not None:
        from .cleaning.live_module import cleaning_module_for

        if len(args.paths) != 1:
            raise SmolcleanError("with --name, give only the file to clean: the dataset's module version cleans it")
        args.file = args.paths[0]
        args.module, number = cleaning_module_for(_dataset(args.workdir, args.name), args.version)
        which = f"version {number} of {args.name!r}" if number else f"the module of {args.name!r}"
    else:
        if len(args.paths) != 2 or args.version is not None:
            raise SmolcleanError("give the module and the file (smolclean apply MODULE FILE -o OUT), or the file and "
                                 "the dataset (smolclean apply FILE --name NAME [--version N] -o OUT)")
        args.module, args.file = args.paths
        which = str(args.module)
    if not args.module.is_file():
        raise SmolcleanError(f"{args.module}: no such module file")
    revision = read_registry_revision(args.module.read_text(encoding="utf-8"))
    print(f"module: {which} ({args.module}, registry revision {revision if revision is not None else 'unknown'})")
    # Not `with Sandbox()`: that starts a pool worker, and apply only uses its own batch workers.
    sandbox = Sandbox()
    try:
        with _ApplyProgress(args.file) as progress:
            result = apply_module(
                args.module.read_text(encoding="utf-8"), args.file, args.output, sandbox=sandbox,
                batch_size=args.batch_size, workers=args.workers, on_batch=progress.update,
            )
        from .core.agreement import check_drop, describe  # loads pandas: once the cleaning is done and its workers gone

        agreement = check_drop(args.module.read_text(encoding="utf-8"), args.file, sandbox)
    finally:
        sandbox.close()
    r = result.residual
    print(f"cleaned {result.rows_in} rows in {result.batches} batch(es) -> {result.output} "
          f"({result.seconds:.1f}s, {result.rows_per_s:,.0f} rows/s, {result.workers} worker(s))")
    print(f"residual issues: {len(r.findings)} finding(s), {r.share:.2%} of {r.cells_sampled} sampled cells flagged, "
          f"{r.worst_share:.2%} in the worst column"
          + "".join(f"\n  {f.column}: {f.message}" for f in r.findings[:10]))
    if agreement.passed:
        print(f"entity check: passed: {agreement.describe()}")
    else:
        print(f"entity check: FAILED: the other rows of the same entity contradict what the module wrote (in the first "
              f"{agreement.rows_checked} rows); learn from this file to take out the function that did it, then review "
              "the new version"
              + "".join(f"\n  {describe(c)}" for c in agreement.columns))
    return 0


class _ApplyProgress:
    """A rich progress bar on a terminal (rows, estimated from the file size), one line per batch otherwise."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._bar = None
        self._task = None

    def __enter__(self) -> _ApplyProgress:
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            from .core.apply import estimate_rows

            total = estimate_rows(self.path) if self.path.is_file() else None
            self._bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"),
                TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(f"cleaning {self.path.name}", total=total)
        return self

    def update(self, batches: int, rows: int) -> None:
        if self._bar is None:
            print(f"batch {batches}: {rows} rows cleaned", file=sys.stderr, flush=True)
            return
        total = self._bar.tasks[0].total
        # The total is an estimate: never let the bar run past it.
        self._bar.update(self._task, completed=rows, total=max(total, rows) if total is not None else None)

    def __exit__(self, exc_type, *exc_info: object) -> None:
        if self._bar is not None:
            if exc_type is None:
                self._bar.update(self._task, total=self._bar.tasks[0].completed)
            self._bar.stop()


def _dataset(workdir: Path, name: str):
    """The settings of dataset `name` saved in `workdir` (or, for one declared in code or a dg Component, its
    store there), or an error naming the datasets there are."""
    from .settings import DatasetSettings, load_workdir, settings_file

    if not settings_file(workdir, name).is_file():
        if (workdir / "storage" / name).is_dir():
            return DatasetSettings.load(name=name, workdir=workdir)
        known = ", ".join(s.name for s in load_workdir(workdir)) if (workdir / "datasets").is_dir() else ""
        raise SmolcleanError(f"dataset {name!r} is not in workdir {workdir} (datasets there: {known or 'none'}); "
                             "check the name and --workdir")
    return DatasetSettings.for_workdir(workdir, name)


def _versions(args: argparse.Namespace) -> int:
    from .cleaning.live_module import versions
    from .cleaning.module_versions import version_changes, waits_because

    history = versions(_dataset(args.workdir, args.name)).load()
    if not history.versions:
        raise SmolcleanError(f"dataset {args.name!r} has no module version yet; learn one with "
                             f"`smolclean learn FILE --name {args.name} --workdir {args.workdir}`")
    if args.diff is not None:
        version = history.get(args.diff)
        print(f"version {version.number} of {args.name} ({version.state}): {version_changes(version)}")
        print(version.shadow.text() if version.shadow else
              "no shadow check: no version was live when it was made, so there was nothing to compare it with")
        return 0
    live = history.live
    print(f"{args.name}: {len(history.versions)} version(s), live: {live.number if live else 'none'}")
    for v in reversed(history.versions):
        origin = ", ".join(p for p in (f"learning run {v.learning_run}" if v.learning_run else "",
                                       f"drop {v.drop}" if v.drop else "") if p) or "-"
        print(f"{v.number:>4}  {v.state:<8}  {v.created_at}  {origin}")
        print(f"      functions: {version_changes(v)} (+{len(v.added)} ~{len(v.changed)} -{len(v.removed)})")
        if v.shadow is not None:
            print(f"      shadow: {v.shadow.summary()}")
        if v.metrics is not None:
            print(f"      learning: {v.metrics.line()}")
        if v.approved_by:
            print(f"      approved by: {v.approved_by}")
        if v.state == "proposed":
            print(f"      waits for approval: {waits_because(v)}")
    print("changes of state (newest first):")
    for c in reversed(history.changes):
        print(f"  {c.at}  version {c.version}: {c.previous or '-'} -> {c.state}, by {c.by}: {c.why}")
    proposed = [v.number for v in history.versions if v.state == "proposed"]
    if proposed:
        print(f"to make a proposed version live: smolclean approve {args.name} {proposed[-1]} --workdir {args.workdir}")
    return 0


def _approve(args: argparse.Namespace) -> int:
    from .cleaning.live_module import versions
    from .cleaning.module_versions import command_line_user

    settings = _dataset(args.workdir, args.name)
    version = versions(settings).approve(args.version, by=command_line_user(), why=args.reason)
    _record(settings, version)
    print(f"version {version.number} of {args.name} is live: new drops are cleaned by it, and the drops cleaned by "
          "another version are cleaned again by the schedule while `smolclean ui` runs")
    return 0


def _rollback(args: argparse.Namespace) -> int:
    from .cleaning.live_module import versions
    from .cleaning.module_versions import command_line_user

    settings = _dataset(args.workdir, args.name)
    version = versions(settings).rollback(args.to, by=command_line_user(), why=args.reason)
    _record(settings, version)
    print(f"version {version.number} of {args.name} is live again")
    return 0


def _record(settings, version) -> None:
    """The change of state on the asset `<name>/module_version`, in the instance the UI uses, so the UI shows it."""
    from .instance import workdir_instance
    from .cleaning.module_versions import report_state_change

    with workdir_instance(settings.workdir) as instance:
        report_state_change(instance, settings, version)


def _answer(args: argparse.Namespace) -> int:
    from .learning.answers import answer_question
    from .core.questions import load_questions
    from .core.storage import DatasetStore

    settings = _dataset(args.workdir, args.name)
    questions = load_questions(DatasetStore(settings.storage_dir, settings.name))
    if (args.question is None) != (args.option is None):
        raise SmolcleanError("give both --question N and --option K, or neither to be asked each open question")
    if args.question is not None:
        chosen = [(args.question, args.option)]
    elif not questions.open:
        print(f"{args.name}: no open question (the last learning left no convention open that the instructions "
              "do not settle)")
        return 0
    else:
        chosen = []
        for q in questions.open:
            print("\n".join(q.lines()))
            reply = _ask_option(q)
            if reply is not None:
                chosen.append((q.number, reply))
    learn_again = False
    for number, option in chosen:
        answer = answer_question(settings, number, option)
        learn_again |= answer.option.cells > 0
        print(f"question {number}: \"{answer.option.instruction}\" joins the instructions of {args.name}")
    if learn_again:
        from .drop_folder import find_drop_file

        print(f"learn again to serve them (a new version is proposed): smolclean learn "
              f"{find_drop_file(settings, questions.drop)} --name {args.name} --workdir {args.workdir}")
    return 0


def _ask_option(question) -> int | None:
    """The option a person types for a question, asked again until it is one of them; None to skip it."""
    numbers = [o.number for o in question.options]
    while True:
        try:
            reply = input(f"option for question {question.number} (1-{len(numbers)}, Enter to skip): ").strip()
        except EOFError:
            return None
        if not reply:
            return None
        if reply.isdigit() and int(reply) in numbers:
            return int(reply)
        print(f"  {reply!r} is no option of question {question.number}")


def _ui(args: argparse.Namespace) -> int:
    from .instance import HOME_VARIABLE, dagster_home, workdir_instance
    from .settings import load_workdir

    workdir = args.workdir.resolve()
    workdir_instance(workdir).dispose()
    # The instance every smolclean command of this workdir uses (`dg dev` would read a `.env` here the same way).
    home = dagster_home(workdir)
    env = {**os.environ, HOME_VARIABLE: str(home), "SMOLCLEAN_WORKDIR": str(workdir)}
    print(f"serving the datasets of {workdir} at http://{args.host}:{args.port} (Dagster instance: {home})")
    for settings in load_workdir(workdir):
        print(f"  {settings.name}: new files in {settings.drops_dir}/ ({settings.glob}) are cleaned automatically; "
              f"corrected label samples saved in {settings.labels_dir}/ are learned from")
    # `dg dev`, which `dagster dev` is superseded by, serving this package's code location of the workdir.
    dg = [sys.executable, "-c", "from dagster_dg_cli.cli import main; main()"]
    cmd = [*dg, "dev", "-m", "smolclean_dagster.location", "-h", args.host, "-p", str(args.port)]
    # Stops on Ctrl-C, SIGTERM (service managers, containers) and SIGHUP, and takes every process it started along.
    return run_until_stopped(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
