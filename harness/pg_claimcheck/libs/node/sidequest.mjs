// sidequest on its PostgreSQL backend under claimcheck's ledger: its own migrations (Sidequest.configure), its
// own enqueue (Sidequest.build(...).enqueue), its own engine (Sidequest.start: a forked engine process running each
// job in a worker thread) with a job class that records each execution (sidequest-job.mjs). See
// pg_claimcheck/libs/sidequest.py for what sidequest promises and how it is judged.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { args, emit, keys, Recorder, run, untilStopped } from "./protocol.mjs";

const QUEUE = "claimcheck";
const { command, config } = args();
const o = config.options;  // the adapter's settings (pg_claimcheck/libs/sidequest.py)
// The job class reads the cache directory (and, in a worker, the recorder's settings) from here: sidequest imports
// it in the engine process it forks, whose environment is this one's.
process.env.CLAIMCHECK_SIDEQUEST = JSON.stringify({ modules: config.modules, config: command === "work" ? config : null });
const entry = (name) => pathToFileURL(path.join(config.modules, "node_modules", name, "dist", "index.js")).href;
const { Sidequest } = await import(entry("sidequest"));  // its ES module build, which its engine loads too
const { ClaimcheckJob } = await import("./sidequest-job.mjs");
// node-postgres reads the password from PGPASSWORD, as every claimcheck script gets it
const backend = { driver: "@sidequest/postgres-backend", config: config.dsn };
const quiet = { logger: { level: "error" } };

async function install() {  // configure runs the backend's migrations (skipMigration defaults to false)
  await Sidequest.configure({ backend, ...quiet });
  await Sidequest.stop();
}

async function enqueue() {
  await Sidequest.configure({ backend, skipMigration: true, ...quiet });
  // One insert per job (sidequest has no bulk enqueue), o.enqueue_concurrency at a time: each enqueue first
  // finds the job class's file from its stack (buildPath), which took up to half a second a job on a loaded machine
  for (let first = config.first; first <= config.last; first += o.enqueue_concurrency) {
    const keys = [];
    for (let key = first; key <= Math.min(first + o.enqueue_concurrency - 1, config.last); key++) keys.push(key);
    await Promise.all(keys.map((key) => Sidequest.build(ClaimcheckJob).queue(QUEUE).maxAttempts(o.max_attempts).enqueue(key)));
  }
  await Sidequest.stop();
  emit({ event: "enqueued", count: config.last - config.first + 1 });
}

async function feed() {  // one job per key read from stdin, each its own insert
  await Sidequest.configure({ backend, skipMigration: true, ...quiet });
  emit({ event: "ready" });
  for await (const key of keys()) {
    const job = await Sidequest.build(ClaimcheckJob).queue(QUEUE).maxAttempts(o.max_attempts).enqueue(key);
    emit({ event: "enqueued", key, job: String(job.id) });
  }
  await Sidequest.stop();
}

async function work() {
  const { version } = JSON.parse((await import("node:fs")).readFileSync(
    path.join(config.modules, "node_modules", "sidequest", "package.json"), "utf8"));
  // Under --faults the stale-job routine's ages are the adapter's lease; it runs on a cron of whole minutes
  // (releaseStaleJobsIntervalMin), every minute at the most, and once when an engine starts.
  const stale = config.faults ? { releaseStaleJobsIntervalMin: 1, releaseStaleJobsMaxStaleMs: o.faults_stale_ms,
                                  releaseStaleJobsMaxClaimedMs: o.faults_stale_ms } : {};
  await Sidequest.start({ backend, skipMigration: true, ...quiet, ...stale, queues: [{ name: QUEUE }],
                          dashboard: { enabled: false } });  // N processes: one dashboard port would collide
  new Recorder(config).hello("sidequest", version, { backend: "postgres" });  // its jobs record in the engine's threads
  await untilStopped(o);
  // sidequest's own SIGTERM handler (gracefulShutdown, its default) stops the engine, waits for the jobs in hand
  // and exits; this waits for it
  await new Promise(() => {});
}

run({ install, enqueue, feed, work }[command]);
