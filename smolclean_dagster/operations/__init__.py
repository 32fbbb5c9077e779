"""What starts the runs of both flows: the sensors (drop folder, residual dirt, labels folder) and the schedules."""
