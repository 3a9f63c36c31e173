// BullMQ on its PostgreSQL backend under claimcheck's ledger: its own migrations (runMigrations), its own
// enqueue (Queue.addBulk, Queue.add), its own worker loop (Worker) with a processor that records each
// execution. See pg_claimcheck/libs/bullmq.py for what BullMQ promises and how it is judged.
import { args, emit, keys, library, Recorder, run, untilStopped } from "./protocol.mjs";

const QUEUE = "claimcheck";
const { command, config } = args();
const bullmq = library(config, "bullmq");
const o = config.options;  // the adapter's settings (pg_claimcheck/libs/bullmq.py)
// node-postgres reads the password from PGPASSWORD, as every claimcheck script gets it
const connection = { connectionString: config.dsn, max: o.pool_size };

function queue() {
  return new bullmq.Queue(QUEUE, { connection, defaultJobOptions: { attempts: o.attempts } },
    bullmq.createPostgresBackend);
}

async function install() {  // "Connections do not apply migrations automatically" (guide/postgresql.md)
  const { Pool } = library(config, "pg");
  const pool = new Pool({ connectionString: config.dsn, max: 1 });
  const client = await pool.connect();
  try {
    await bullmq.runMigrations(client);
  } finally {
    client.release();
    await pool.end();
  }
}

async function enqueue() {
  const q = queue();
  for (let first = config.first; first <= config.last; first += o.enqueue_batch) {
    const jobs = [];
    for (let key = first; key <= Math.min(first + o.enqueue_batch - 1, config.last); key++) {
      jobs.push({ name: "job", data: { key } });
    }
    await q.addBulk(jobs);
  }
  await q.close();
  emit({ event: "enqueued", count: config.last - config.first + 1 });
}

async function feed() {  // one job per key read from stdin, each its own add
  const q = queue();
  await q.waitUntilReady();
  emit({ event: "ready" });
  for await (const key of keys()) {
    const job = await q.add("job", { key });
    emit({ event: "enqueued", key, job: String(job.id) });
  }
  await q.close();
}

async function work() {
  const recorder = new Recorder(config);
  const { version } = library(config, "bullmq/package.json");
  const lease = config.faults ? o.faults_lock_ms : o.lock_ms;
  const worker = new bullmq.Worker(QUEUE, async (job) => {
    // attemptsStarted counts this start too; processedOn is the claim's time (move_to_active's `now`)
    await recorder.execution(job.data.key, job.id, job.attemptsStarted, job.processedOn / 1000);
  }, { connection, concurrency: o.concurrency, lockDuration: lease, stalledInterval: config.faults ? o.faults_stalled_ms : lease,
       maxStalledCount: o.max_stalled, drainDelay: o.drain_delay_s, autorun: true }, bullmq.createPostgresBackend);
  worker.on("error", (err) => process.stderr.write(`bullmq worker error: ${err.message}\n`));
  await worker.waitUntilReady();
  recorder.hello("bullmq", version, { backend: "postgres", worker_name: worker.id ?? null });
  await untilStopped(o);
  await worker.close();  // BullMQ's graceful stop: waits for the job in hand
  return 0;
}

run({ install, enqueue, feed, work }[command]);
