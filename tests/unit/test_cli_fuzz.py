"""A fuzz of the CLI's options up to the point a run would start (issue 25): see tests/cli_fuzz.py.
Thousands more out of band: .venv/bin/python tests/benchmarks/fuzz_cli.py [EXAMPLES]."""
from hypothesis import HealthCheck, given, settings

from cli_fuzz import check_example, examples
from fuzz_counts import count_example


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(example=examples())
def test_options_the_contract_allows_reach_the_server_and_the_others_are_refused_before(example, request):
    count_example(request, "cli options fuzz: examples by outcome", check_example(*example))
