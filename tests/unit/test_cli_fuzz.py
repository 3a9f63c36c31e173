"""A fuzz of the CLI's options up to the point a run would start (issue 25): see tests/cli_fuzz.py.
Thousands more out of band: .venv/bin/python tests/benchmarks/fuzz_cli.py [EXAMPLES]."""
from hypothesis import HealthCheck, given, settings

from cli_fuzz import check_example, examples

SEEN: dict[str, int] = {}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(examples())
def test_options_the_contract_allows_reach_the_server_and_the_others_are_refused_before(example):
    ended = check_example(*example)
    SEEN[ended] = SEEN.get(ended, 0) + 1


def test_zz_report_the_spread(record_property):
    record_property("cli options fuzz: examples by outcome", dict(sorted(SEEN.items())))
