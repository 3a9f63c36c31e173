"""Running a claim: the driver, the worker processes, faults, the reaper, the sampler and the records they send."""
