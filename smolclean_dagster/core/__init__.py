"""The framework-free core of smolclean: no dagster import anywhere below this package."""
