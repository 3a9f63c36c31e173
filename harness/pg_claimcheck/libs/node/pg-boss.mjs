// pg-boss under claimcheck's ledger: its own migrations (PgBoss.start), its own enqueue
// (PgBoss.insert), its own worker loop (PgBoss.work) with a task that records each execution.
// See pg_claimcheck/libs/pgboss.py for what pg-boss promises and how it is judged. One script for pg-boss
// 10 (CommonJS, `insert(jobs)`) and 12 (an ES module exporting `PgBoss`, `insert(name, jobs)`; Node 22).
import { args, emit, keys, library, Recorder, run, untilStopped } from "./protocol.mjs";

const QUEUE = "claimcheck";
const { command, config } = args();
const loaded = library(config, "pg-boss");  // Node 22 loads pg-boss 12's ES module through require()
const PgBoss = loaded.PgBoss ?? loaded;
const { version } = library(config, "pg-boss/package.json");
const major = Number(version.split(".")[0]);
const o = config.options;  // the adapter's settings (pg_claimcheck/libs/pgboss.py)

function boss(extra = {}) {
  const b = new PgBoss({ connectionString: config.dsn, max: o.pool_size, ...extra });
  b.on("error", (err) => process.stderr.write(`pg-boss error: ${err.message}\n`));
  return b;
}

async function install() {
  const b = boss({ supervise: false, schedule: false });
  await b.start();  // pg-boss's own migrations
  await b.createQueue(QUEUE, { retryLimit: o.retry_limit, expireInSeconds: o.expire_s });
  await b.stop({ graceful: false, wait: true });
}

async function enqueue() {
  const b = boss({ supervise: false, schedule: false });
  await b.start();
  for (let first = config.first; first <= config.last; first += o.enqueue_batch) {
    const jobs = [];
    for (let key = first; key <= Math.min(first + o.enqueue_batch - 1, config.last); key++) {
      jobs.push({ name: QUEUE, data: { key }, retryLimit: o.retry_limit, expireInSeconds: o.expire_s });
    }
    await (major >= 11 ? b.insert(QUEUE, jobs) : b.insert(jobs));
  }
  await b.stop({ graceful: false, wait: true });
  emit({ event: "enqueued", count: config.last - config.first + 1 });
}

async function feed() {  // one job per key read from stdin, each its own send (a transaction of its own)
  const b = boss({ supervise: false, schedule: false });
  await b.start();
  emit({ event: "ready" });
  for await (const key of keys()) {
    const job = await b.send(QUEUE, { key }, { retryLimit: o.retry_limit, expireInSeconds: o.expire_s });
    emit({ event: "enqueued", key, job: String(job) });
  }
  await b.stop({ graceful: false, wait: true });
}

async function work() {
  const recorder = new Recorder(config);
  // claimcheck lib pg-boss --idle: pg-boss's own defaults, or the settings of its `suspendable` (pgboss.py).
  // pg-boss 11+ expires jobs in its supervise pass, every superviseIntervalSeconds and at most once per
  // monitorIntervalSeconds per queue (60 s each by default); 10 in its maintenance: each every o.maintenance_s
  const idle = config.idle ?? "";
  const expiry = major >= 11 ? { superviseIntervalSeconds: o.maintenance_s, monitorIntervalSeconds: o.maintenance_s }
    : { maintenanceIntervalSeconds: o.maintenance_s };
  const b = boss(({ "": { supervise: true, schedule: false, ...expiry },
    defaults: {}, suspendable: { supervise: false, schedule: false } })[idle]);
  await b.start();
  recorder.hello("pg-boss", version);
  const knobs = ({ "": { batchSize: o.batch_size, pollingIntervalSeconds: o.polling_s }, defaults: {},
    suspendable: { pollingIntervalSeconds: 900 } })[idle];
  await b.work(QUEUE, { ...knobs, includeMetadata: true },
    async (jobs) => {
      // retryCount is pg-boss's count of earlier attempts; startedOn its own time of the claim
      await Promise.all(jobs.map((job) => recorder.execution(job.data.key, job.id, job.retryCount + 1, job.startedOn)));
    });
  await untilStopped(o);
  await b.stop({ graceful: true, wait: true, timeout: o.stop_grace_s * 1000 });  // pg-boss's graceful stop
  return 0;
}

async function sql() {
  // The statements PgBoss.work's loop sends, as the installed pg-boss builds them, for claimcheck's pgbench cycle
  // (claimcheck lib pg-boss --pgbench). 10 (src/plans.js; Manager: nextJobCommand = plans.fetchNextJob(schema),
  // completeJobsCommand = plans.completeJobs(schema)); 11+ (dist/plans.js; Manager.#fetch builds
  // plans.fetchNextJob(fetchOptions) per queue, and the worker's completion is Manager.complete with the fetched
  // jobs, fenced to their attempts: plans.completeJobs(schema, table, includeQueued, true)). A queue created
  // without `partition` lives in the common job table (plans.js create_queue: COMMON_JOB_TABLE).
  if (major >= 11) {
    const plans = library(config, "pg-boss/dist/plans.js");
    const schema = plans.DEFAULT_SCHEMA, table = plans.COMMON_JOB_TABLE;
    const fetch = plans.fetchNextJob({ schema, table, name: QUEUE, policy: "standard", limit: o.batch_size,
                                       includeMetadata: true });
    if (fetch.values.length) throw new Error(`pg-boss ${version}'s fetch takes parameters the cycle does not fill`);
    emit({ event: "sql", schema, table, fetch: fetch.text, complete: plans.completeJobs(schema, table, undefined, true) });
    return;
  }
  const plans = library(config, "pg-boss/src/plans.js");
  const schema = plans.DEFAULT_SCHEMA ?? "pgboss";
  emit({ event: "sql", schema, fetch: plans.fetchNextJob(schema)({ includeMetadata: true, priority: true }),
         complete: plans.completeJobs(schema) });
}

run({ install, enqueue, feed, work, sql }[command]);
