// graphile-worker under claimcheck's ledger: its own migrations (runMigrations), its own enqueue
// (WorkerUtils.addJobs), its own worker loop (run) with a task that records each execution.
// See pg_claimcheck/libs/graphile.py for what graphile-worker promises and how it is judged.
import { args, emit, keys, library, Recorder, run, untilStopped } from "./protocol.mjs";

const TASK = "claimcheck_record";
const { command, config } = args();
const gw = library(config, "graphile-worker");
const o = config.options;  // the adapter's settings (pg_claimcheck/libs/graphile.py)
const silent = new gw.Logger(() => () => {});

async function install() {
  await gw.runMigrations({ connectionString: config.dsn, logger: silent });
}

async function enqueue() {
  const utils = await gw.makeWorkerUtils({ connectionString: config.dsn, logger: silent });
  try {
    for (let first = config.first; first <= config.last; first += o.enqueue_batch) {
      const specs = [];
      for (let key = first; key <= Math.min(first + o.enqueue_batch - 1, config.last); key++) {
        specs.push({ identifier: TASK, payload: { key }, maxAttempts: o.max_attempts });
      }
      await utils.addJobs(specs);
    }
  } finally {
    await utils.release();
  }
  emit({ event: "enqueued", count: config.last - config.first + 1 });
}

async function feed() {  // one job per key read from stdin, each its own addJob (a transaction of its own)
  const utils = await gw.makeWorkerUtils({ connectionString: config.dsn, logger: silent });
  emit({ event: "ready" });
  try {
    for await (const key of keys()) {
      const job = await utils.addJob(TASK, { key }, { maxAttempts: o.max_attempts });
      emit({ event: "enqueued", key, job: String(job.id) });
    }
  } finally {
    await utils.release();
  }
}

async function work() {
  const recorder = new Recorder(config);
  const { version } = library(config, "graphile-worker/package.json");
  // Jobs are locked by the worker pool's id (random: pool-<hex>); the hello says which, for
  // forceUnlockWorkers once this process died (pg_claimcheck/libs/graphile.py).
  const events = new (await import("node:events")).EventEmitter();
  let pool = null;
  events.on("pool:create", ({ workerPool }) => { pool = workerPool.id; });
  const runner = await gw.run({
    events,
    connectionString: config.dsn, concurrency: 1,
    // claimcheck lib graphile-worker --idle: its defaults, or the poll of its `suspendable` (graphile.py)
    ...({ "": { pollInterval: o.poll_ms }, defaults: {}, suspendable: { pollInterval: 900000 } })[config.idle ?? ""],
    maxPoolSize: o.pool_size, noHandleSignals: true, logger: silent,
    taskList: {
      // job.attempts counts this attempt (get_job increments it); locked_at is its own claim time
      [TASK]: async (payload, helpers) =>
        recorder.execution(payload.key, helpers.job.id, helpers.job.attempts, helpers.job.locked_at),
    },
  });
  recorder.hello("graphile-worker", version, { library_worker: pool });
  await untilStopped(o, runner.promise, "graphile-worker's runner");
  await runner.stop();  // graphile-worker's graceful shutdown: finishes the job, releases its lock
  return 0;
}

async function sql() {
  // The statements one worker (concurrency 1, no local queue: the defaults) sends per job, as the
  // installed graphile-worker builds them: dist/sql/getJobs.js batchGetJobs (batch 1) and
  // dist/sql/completeJobs.js batchCompleteJobs, called with a client that records each query
  // instead of sending it (the task lookup answers task id 1; the pgbench script looks it up).
  const { batchGetJobs } = library(config, "graphile-worker/dist/sql/getJobs.js");
  const { batchCompleteJobs } = library(config, "graphile-worker/dist/sql/completeJobs.js");
  const sent = [];
  const client = {
    query: async (q) => {
      if (q.text.startsWith("insert into") && q.text.includes("_private_tasks")) return { rows: [] };
      if (q.text.startsWith("select id, identifier")) return { rows: [{ id: 1, identifier: TASK }] };
      sent.push(q.text);
      return { rows: [] };
    },
  };
  const withPgClient = async (cb) => cb(client);
  withPgClient.withRetries = withPgClient;
  const options = {
    escapedWorkerSchema: '"graphile_worker"', workerSchema: "graphile_worker", logger: silent,
    resolvedPreset: { worker: { preparedStatements: true, useNodeTime: false } },
  };
  await batchGetJobs(options, withPgClient, { [TASK]: () => {} }, "pool", null, 1);
  await batchCompleteJobs(options, withPgClient, "pool", [{ id: "1", job_queue_id: null }]);
  emit({ event: "sql", get_job: sent[0], complete_job: sent[1], task: TASK });
}

run({ install, enqueue, feed, work, sql }[command]);
