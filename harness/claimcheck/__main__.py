"""`python -m claimcheck` is the same as the `claimcheck` command."""
from claimcheck.cli import main

raise SystemExit(main())
