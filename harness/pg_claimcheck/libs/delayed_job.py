"""delayed_job (its ActiveRecord backend) under the ledger: the first Ruby library, through the
external adapter protocol (pg_claimcheck.libs.external): its own worker loop in
pg_claimcheck/libs/ruby/delayed_job.rb, on the machine's Ruby with Debian's packages
(`ruby-delayed-job`, `ruby-delayed-job-active-record`, `ruby-activerecord`, `ruby-pg`), as users
of a distribution install them; `.ci/run` installs them when missing.

What it promises, in its own words (README.md of delayed_job 4.1.9, "Gory Details"): "The default
`Worker.max_run_time` is 4.hours. If your job takes longer than that, another computer could pick it
up. It's up to you to make sure your job doesn't exceed this time"; a job is locked to its worker
(`locked_by`, `locked_at`) by `reserve`, which on PostgreSQL is `UPDATE delayed_jobs SET locked_at,
locked_by WHERE id IN (SELECT id ... LIMIT 1 FOR UPDATE) RETURNING *`
(delayed_job_active_record 4.1.6, `reserve_with_scope_using_optimized_postgres`), and a job is ready
again once `locked_at < now - max_run_time` (`ready_to_run`). The worker also runs each job under
`Timeout.timeout(max_run_time)`, so a job outliving it fails and is retried ("If a job fails, it
will be retried", up to `max_attempts`, 25, after `attempts ** 4 + 5` seconds).

So the ledger judges delayed_job at-least-once with redelivery after `max_run_time`: a job of a
worker that died, or stopped past `max_run_time`, may run again (a redelivery); any other second
execution is a double execution, and a job neither finished nor failed is lost.

Deployed as its README deploys it (`script/delayed_job -n N`, or `rake jobs:work` per process): N
processes, each one `Delayed::Worker#start`, with its defaults except `sleep_delay` (SLEEP_DELAY_S,
its default 5 s would make a short run mostly waiting) and `destroy_failed_jobs` off (so a job that
failed for good is counted failed, not taken for done). Under `--faults` `max_run_time` is
FAULTS_MAX_RUN_TIME_S, so a short run sees a lock run out. `--pgbench` is not written yet.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pg_claimcheck.errors import UsageError
from pg_claimcheck.libs.external import DeletesFinished

PACKAGES = "ruby-delayed-job ruby-delayed-job-active-record ruby-activerecord ruby-pg"
MAX_RUN_TIME_S = 4 * 3600
"""delayed_job's default `max_run_time`."""
FAULTS_MAX_RUN_TIME_S = 2
SLEEP_DELAY_S = 0.2


class DelayedJobAdapter(DeletesFinished):
    name = "delayed_job"
    runtime = "ruby"
    package_manager = "apt-get"
    package = "delayed_job_active_record"
    registry = "Debian"
    pinned = "4.1.6"
    script = "delayed_job.rb"
    scripts = Path(__file__).parent / "ruby"
    promise = ("a job is locked to its worker (reserve: UPDATE ... WHERE id IN (SELECT ... FOR UPDATE)); \"If your "
               "job takes longer than [max_run_time], another computer could pick it up\"; failed jobs are retried")
    docs = "https://github.com/collectiveidea/delayed_job/blob/v4.1.9/README.md (Gory Details)"
    lease_s = float(FAULTS_MAX_RUN_TIME_S)
    stall_release_s = float(FAULTS_MAX_RUN_TIME_S)
    claim_lease_s = float(FAULTS_MAX_RUN_TIME_S)  # ready again once locked_at < now - max_run_time

    def options(self) -> dict:
        return {**super().options(), "sleep_delay_s": SLEEP_DELAY_S, "max_attempts": 25,
                "max_run_time_s": MAX_RUN_TIME_S, "faults_max_run_time_s": FAULTS_MAX_RUN_TIME_S}

    def _find_runtime(self) -> str:
        ruby = shutil.which("ruby")
        if ruby is None:
            raise UsageError(f"claimcheck lib {self.name} runs delayed_job's own Ruby worker, and there is no ruby on "
                             f"PATH. Install Ruby and the library as Debian packages: apt-get install {PACKAGES}")
        said = subprocess.run([ruby, "-e", 'require "active_record"; require "delayed_job_active_record"; require "pg"'],
                              capture_output=True, text=True, timeout=60)
        if said.returncode != 0:
            raise UsageError(f"claimcheck lib {self.name}: Ruby cannot load delayed_job with ActiveRecord and pg "
                             f"({(said.stderr.strip().splitlines() or ['no output'])[0][:200]}). Install them: "
                             f"apt-get install {PACKAGES}")
        return ruby

    def _find_modules(self) -> Path:
        self.runtime_path()
        return self.scripts  # Ruby finds the Debian packages itself


ADAPTER = DelayedJobAdapter()
