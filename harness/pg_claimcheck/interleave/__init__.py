"""Deterministic interleavings of named sessions' steps, in the spirit of PostgreSQL's isolation
tester: a declarative spec, every permutation run step by step on real connections, a blocked
step detected by asking the server, and a readable trace."""
