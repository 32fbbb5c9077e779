"""Answers to the questions a learning ends with (core/questions.py): the option chosen becomes an instruction item of
the dataset, and the next learning of the drop serves it. `smolclean answer` and the job `<name>_answer` (the UI)
both record answers here.
"""

# No `from __future__ import annotations`: Dagster reads the op's config type hint as a class.

from dataclasses import dataclass

import dagster as dg

from ..core.errors import SmolcleanError
from ..core.label_store import forget_learning
from ..core.questions import Option, Question, load_questions, save_questions
from ..core.storage import DatasetStore
from ..metadata import questions_metadata
from ..settings import DatasetSettings, add_instructions


def answer_job_name(name: str) -> str:
    return f"{name}_answer"


@dataclass(frozen=True)
class Answer:
    """An answer recorded: the question, the option chosen, and the dataset's instructions now."""

    question: Question
    option: Option
    instructions: str
    #: The drop the question was asked on: its next learning serves the answer.
    drop: str


def answer_question(s: DatasetSettings, question: int, option: int) -> Answer:
    """Record option `option` of question `question` of the dataset: its instruction joins the dataset's
    instructions (`datasets/<name>.yaml`), the question is marked answered, and the drop it was asked on is learned
    again by its next learning (an option that changes no cell needs no learning: the question is settled).

    Example:
        >>> answer_question(DatasetSettings.for_workdir("work", "customers"), 1, 1).option.instruction  # doctest: +SKIP
        "Write 'N/A' as empty in columns 'email' and 'phone'."
    """
    store = DatasetStore(s.storage_dir, s.name)
    questions = load_questions(store)
    answered, chosen = questions.answered(question, option)
    instructions = add_instructions(s.workdir, s.name, [chosen.instruction])
    save_questions(store, answered)
    if chosen.cells and questions.drop:
        forget_learning(store, questions.drop)  # its chunks are analysed again, with the new item
    return Answer(answered.get(question), chosen, instructions, questions.drop)


class AnswerConfig(dg.Config):
    """Which question to answer, with which of its options (numbers as the `questions` metadata of
    `<name>/cleaning_module` and report.md list them)."""

    question: int
    option: int


def build_answer_job(s: DatasetSettings) -> dg.JobDefinition:
    """The job `<name>_answer`: launch it in the UI with a question's number and the option chosen. The option's
    instruction joins the dataset's instructions; the next learning of the drop (the job `<name>_learn_from_drop`, or
    `smolclean learn`) serves it and proposes a version."""
    name = s.name

    @dg.op(name=f"{name}_record_answer", out=dg.Out(dg.Nothing))
    def record_answer(context: dg.OpExecutionContext, config: AnswerConfig) -> None:
        try:
            answer = answer_question(s, config.question, config.option)
        except SmolcleanError as exc:  # no such question or option, or settings declared elsewhere: say what to do
            raise dg.Failure(description=str(exc)) from exc
        learn = (f"learn drop {answer.drop!r} again to serve it: launch `{name}_learn_from_drop` for it (or "
                 f"`smolclean learn`)") if answer.option.cells else "no cell changes: nothing to learn"
        context.log.info(f"question {config.question} answered: \"{answer.option.instruction}\" joins the "
                         f"instructions of {name!r}; {learn}")
        context.log_event(dg.AssetObservation(
            asset_key=dg.AssetKey([name, "cleaning_module"]),
            description=f"question {config.question} answered with option {config.option}",
            metadata={**questions_metadata(load_questions(DatasetStore(s.storage_dir, s.name)), name),
                      "instructions": dg.MetadataValue.md(answer.instructions)},
        ))

    @dg.job(name=answer_job_name(name),
            description=f"Answer a question the learning of {name!r} ended with (the `questions` of "
            f"{name}/cleaning_module): give its number and the option chosen in the run config (ops: "
            f"{name}_record_answer: config: question, option). The option joins the instructions; the next learning "
            "serves it.")
    def answer() -> None:
        record_answer()

    return answer


__all__ = ["Answer", "AnswerConfig", "answer_job_name", "answer_question", "build_answer_job"]
