"""Residual issues: what the detectors still find in a cleaned drop, on rows sampled evenly across it.

A cleaned drop can be far larger than memory, so the detectors look at a bounded sample: every batch
gives evenly spaced rows, and whenever the sample outgrows its cap every other row is dropped and later
batches give half as many. The sample stays spread over the whole file, in file order, and the same file
always gives the same sample.
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, ConfigDict

from .profile import Finding, detect_issues


class ResidualReport(BaseModel):
    """What the detectors still find in a cleaned drop, on a sample of its rows.

    `share` is the part of all sampled cells that some finding flags; `worst_share` the part of the sampled
    rows flagged in the worst column, the number a threshold is set on: unfixed "NULL" tokens in one
    column of thirty are what a user sees, however clean the other columns are.

    Example:
        >>> report = residual_report(pd.DataFrame({"city": ["Paris", " Paris", "Paris"], "n": ["1", "2", "3"]}))
        >>> report.flagged_cells, report.share, report.worst_share, report.by_column()
        (1, 0.1667, 0.3333, {'city': 1})
    """

    model_config = ConfigDict(frozen=True)

    rows_sampled: int
    cells_sampled: int
    findings: tuple[Finding, ...] = ()

    @property
    def flagged_cells(self) -> int:
        return sum(f.count for f in self.findings)

    @property
    def share(self) -> float:
        return round(self.flagged_cells / self.cells_sampled, 4) if self.cells_sampled else 0.0

    def by_column(self) -> dict[str, int]:
        """Flagged cells per column, for the columns with any, in the order of the findings."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.column] = out.get(f.column, 0) + f.count
        return out

    @property
    def worst_share(self) -> float:
        """The part of the sampled rows flagged in the column with the most findings."""
        cells = self.by_column()
        return round(min(1.0, max(cells.values()) / self.rows_sampled), 4) if cells and self.rows_sampled else 0.0

    def passes(self, threshold: float) -> bool:
        """Whether no column has more than `threshold` of its sampled cells flagged (0.01 = 1%)."""
        return self.worst_share <= threshold


def residual_report(sample: pd.DataFrame) -> ResidualReport:
    """Run the detectors over cleaned rows; typed values (numbers, dates) are looked at as text."""
    # The detectors read text cells; a cleaned column may hold numbers or dates, and real nulls stay None.
    as_text = sample.astype(object).where(sample.notna(), None)
    as_text = as_text.map(lambda v: v if v is None or isinstance(v, str) else str(v))
    findings = detect_issues(as_text) if len(as_text) else []
    return ResidualReport(rows_sampled=len(sample), cells_sampled=sample.size, findings=tuple(findings))


class RowSampler:
    """Keeps every k-th row of a stream of batches, doubling k whenever the sample would outgrow its cap.

    The rows kept are those whose position in the whole stream is a multiple of k, so the sample is spread
    evenly over the file, in file order, and the same file always gives the same sample.

    Example:
        >>> sampler = RowSampler(max_rows=4)
        >>> for start in range(0, 100, 10):
        ...     sampler.add(pd.DataFrame({"n": range(start, start + 10)}))
        >>> sampler.sample()["n"].tolist()
        [0, 32, 64, 96]
    """

    def __init__(self, max_rows: int) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be at least 1")
        self.max_rows = max_rows
        self.stride = 1
        self._seen = 0
        self._parts: list[pd.DataFrame] = []
        self._rows = 0

    def add(self, batch: pd.DataFrame) -> None:
        """Keep this batch's rows that fall on the stride (a copy: the batch itself is not kept)."""
        n = len(batch)
        while self._rows + len(range((-self._seen) % self.stride, n, self.stride)) > self.max_rows:
            self.stride *= 2
            joined = pd.concat(self._parts) if self._parts else pd.DataFrame()
            self._parts = [joined[joined.index % self.stride == 0]] if len(joined) else []
            self._rows = sum(len(p) for p in self._parts)
        first = (-self._seen) % self.stride
        part = batch.iloc[first::self.stride].copy()
        part.index = pd.RangeIndex(self._seen + first, self._seen + n, self.stride)
        if len(part):
            self._parts.append(part)
            self._rows += len(part)
        self._seen += n

    def sample(self) -> pd.DataFrame:
        """The rows kept so far, in file order."""
        return pd.concat(self._parts).reset_index(drop=True) if self._parts else pd.DataFrame()
