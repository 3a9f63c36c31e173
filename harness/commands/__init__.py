"""One module per `claimcheck` verb. Each has `register(verbs)`, which adds its subparser and
sets `func(args, console, err) -> exit code`. The CLI lists them here, in help order."""
from harness.commands import bench, check, compare

VERBS = (bench, check, compare)
