"""`python -m harness` is the same as the `claimcheck` command."""
from harness.cli import main

raise SystemExit(main())
