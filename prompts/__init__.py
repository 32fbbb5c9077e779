"""The prompt templates (`*.yaml`), installed as `smolclean_dagster.prompts` so the package finds them."""
