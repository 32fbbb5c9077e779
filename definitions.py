"""The demo code location: every dataset of the workdir in SMOLCLEAN_WORKDIR (default ./smolclean-work).

Run `smolclean demo` first to learn modules for the bundled sample data, then `smolclean ui` (the Dagster UI
on this location) to browse the asset graph and the per-chunk traces.
"""

from smolclean_dagster.location import defs

__all__ = ["defs"]
