"""dbos 3.4.0 with its default executor id (`local`) in two processes: the second process's launch
re-enqueues the workflow the first is still running (its startup recovery takes every PENDING workflow
of `local`), and the workflow runs twice at once. DBOS's docs ask for a distinct executor id per process
"in a distributed setting"; its single-server guide runs the default.
Run: python tests/findings/dbos_default_executor_reruns_a_live_workflow.py postgresql://USER@HOST/SCRATCH_DB
"""
import multiprocessing
import os
import sys
import tempfile
import time

from dbos import DBOS, DBOSClient

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["FINDING_DSN"]  # a scratch database to throw away
LOG = os.environ.setdefault("FINDING_LOG", tempfile.mktemp(suffix=".log"))


@DBOS.workflow(name="slow")
def slow(n: int) -> int:
    with open(LOG, "a") as f:
        f.write(f"start pid={os.getpid()} at={time.time():.2f}\n")
    time.sleep(8)  # the job's work: longer than a second process takes to launch
    with open(LOG, "a") as f:
        f.write(f"end   pid={os.getpid()} at={time.time():.2f}\n")
    return n


def process(dsn: str) -> None:
    DBOS(config={"name": "finding", "system_database_url": dsn})  # executor id: DBOS's default, "local"
    DBOS.launch()
    DBOS.register_queue("finding")
    time.sleep(16)
    DBOS.destroy(workflow_completion_timeout_sec=0)


if __name__ == "__main__":
    DBOS.migrate(DSN)
    spawn = multiprocessing.get_context("spawn")
    first = spawn.Process(target=process, args=(DSN,))
    first.start()
    client = DBOSClient(system_database_url=DSN)
    client.enqueue({"queue_name": "finding", "workflow_name": "slow", "workflow_id": "job-1"}, 1)
    while not (os.path.exists(LOG) and "start" in open(LOG).read()):
        time.sleep(0.1)  # the first process is running it
    second = spawn.Process(target=process, args=(DSN,))  # a second worker process, or a restarted one
    second.start()
    first.join(), second.join()
    client.destroy()
    lines = open(LOG).read().splitlines()
    print("\n".join(lines))
    starts = [line for line in lines if line.startswith("start")]
    print(f"job-1 started {len(starts)} times by {len({s.split()[1] for s in starts})} process(es)"
          + (": run twice at once while its first process was alive" if len(starts) > 1 else ""))
