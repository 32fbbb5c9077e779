"""Learning a drop, in Dagster: the assets from a raw drop to the exported module, the runs that drive them
(`embedded.py` in the CLI's process, `sensor.py` in a deployment; `runs.py` says what comes next), the
`drop_learning` asset, a drop's label sample and the job that answers learning's questions."""
