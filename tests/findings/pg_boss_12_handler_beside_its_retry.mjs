// pg-boss 12.38.0: a handler that outlives expireInSeconds runs beside its own retry on another worker,
// although no worker failed ("Exactly-once job delivery", README.md / docs/introduction.md).
// Run (Node >= 22.12, a scratch database to throw away afterwards):
//   npm install pg-boss@12.38.0 && node pg_boss_12_handler_beside_its_retry.mjs postgresql://USER@HOST/SCRATCH_DB
// Two PgBoss instances (two workers), one job, expireInSeconds 2, a handler that takes 3 s and ignores
// job.signal. pg-boss 12 fails the job at the expiry and stops the first worker's fetching until its
// handler returns; the second worker fetches the retry while the first handler still runs.
import { PgBoss } from "pg-boss";

const url = process.argv[2];
const queue = "overrun";
const running = new Set();
const t0 = Date.now();
const at = () => ((Date.now() - t0) / 1000).toFixed(2) + "s";

function worker(name) {
  const boss = new PgBoss({ connectionString: url, superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 });
  boss.on("error", (e) => console.error(name, "error:", e.message));
  return { name, boss };
}

const workers = [worker("A"), worker("B")];
for (const { boss } of workers) await boss.start();
await workers[0].boss.createQueue(queue, { expireInSeconds: 2, retryLimit: 2 });
await workers[0].boss.send(queue, { n: 1 });
for (const { name, boss } of workers) {
  await boss.work(queue, { pollingIntervalSeconds: 0.5 }, async ([job]) => {
    const others = [...running];
    running.add(name + ":" + job.retryCount);
    console.log(`${at()} worker ${name} starts job ${job.id} attempt ${job.retryCount + 1}` +
      (others.length ? `  <-- while ${others.join(", ")} still runs it` : ""));
    await new Promise((r) => setTimeout(r, 3000));  // longer than expireInSeconds; job.signal ignored
    running.delete(name + ":" + job.retryCount);
    console.log(`${at()} worker ${name} ends attempt ${job.retryCount + 1}`);
  });
}
await new Promise((r) => setTimeout(r, 9000));
for (const { boss } of workers) await boss.stop({ graceful: false, timeout: 1000 });
