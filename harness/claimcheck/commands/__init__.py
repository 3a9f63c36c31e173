"""One module per `claimcheck` verb. Each has `register(verbs)`, which adds its subparser and
sets `func(args, console, err) -> exit code`. The CLI lists them here, in help order."""
from claimcheck.commands import bench, check, compare, explain, faults, idle, interleave, lib, locustfile, notify, vacuum

VERBS = (bench, check, compare, interleave, faults, lib, vacuum, notify, idle, explain, locustfile)
