"""The code location of a workdir: every dataset configured in it (what `smolclean ui` serves).

The workdir comes from SMOLCLEAN_WORKDIR (default ./smolclean-work).
"""

from __future__ import annotations

import os
from pathlib import Path

from .factory import build_defs
from .settings import load_workdir

WORKDIR = Path(os.environ.get("SMOLCLEAN_WORKDIR", "smolclean-work"))

defs = build_defs(*load_workdir(WORKDIR))
