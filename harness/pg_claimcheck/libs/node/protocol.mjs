// The worker side of claimcheck's external adapter protocol (docs/contracts.md, "External library
// adapters"), for Node. An adapter script imports this, loads its library from the cache directory
// claimcheck installed it into, and calls `execution` from the task it registers with the library.
//
// Every record is one JSON line written to stdout with a single synchronous write(2), so a SIGKILL
// loses at most the end of the execution it interrupted, never a start (stdout is a file the
// coordinator opened for this worker).
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { threadId } from "node:worker_threads";

export const PROTOCOL = 1;

/** The subcommand and its configuration: `node SCRIPT install|enqueue|work CONFIG_JSON`. */
export function args() {
  const [command, json] = process.argv.slice(2);
  return { command, config: JSON.parse(json) };
}

/** The library as installed by claimcheck into `config.modules` (a directory holding node_modules). */
export function library(config, name) {
  const require = createRequire(path.join(config.modules, "package.json"));
  return require(name);
}

/** `feed`: the keys to enqueue, one per line on stdin, as they come (pg_claimcheck/libs/feed.py sends each on
 * its schedule). An adapter emits `{"event": "ready"}` once its library can enqueue (the schedule starts
 * then), enqueues each key through its library and emits `{"event": "enqueued", "key": K}`. */
export async function* keys() {
  const readline = await import("node:readline");
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line.trim()) yield Number(line);
  }
}

export function emit(record) {
  fs.writeSync(1, JSON.stringify(record) + "\n");
}

/** Seconds since the epoch on this host's clock. */
export function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

function drawSeconds(work, rng) {
  if (work.kind === "fixed") return work.a_ms / 1000;
  if (work.kind === "uniform") return (work.a_ms + (work.b_ms - work.a_ms) * rng()) / 1000;
  return work.a_ms > 0 ? (-Math.log(1 - rng()) * work.a_ms) / 1000 : 0;
}

function mulberry32(seed) {  // a small seeded generator: each worker draws its own sequence
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Recorder {
  constructor(config) {
    this.config = config;
    this.rng = mulberry32(config.worker + 1);
    this.runs = 0;  // this worker's executions so far: an end names its start, as one job may run twice at once
    // A library that runs its jobs in worker threads (sidequest) has a recorder per thread, all writing to the
    // worker's one stdout (from a process the library forked, too): a thread's runs are named by its process and thread.
    this.thread = threadId ? `${process.pid}.${threadId}.` : "";
  }

  hello(library, version, extra = {}) {
    emit({ event: "hello", protocol: PROTOCOL, library, version, worker: this.config.worker, pid: process.pid,
           ...extra });
  }

  /** One execution of job `key`: `job` and `attempt` as the library reports them, `claimedAt` the
   * library's own time of the claim (a Date or epoch seconds, the server's clock) when it has one. */
  async execution(key, job, attempt, claimedAt) {
    const claimed = claimedAt instanceof Date ? claimedAt.getTime() / 1000 : claimedAt;
    const run = this.thread ? `${this.thread}${++this.runs}` : ++this.runs;
    emit({ event: "start", run, key, job: String(job), attempt: attempt ?? null, t: now(), claimed_at: claimed ?? null });
    let stalled = false;
    try {
      fs.unlinkSync(this.config.stall_flag);
      stalled = true;
    } catch {}
    if (stalled) {
      // Blocks the event loop, as a CPU-bound or blocking call inside a task does: whatever the
      // library does on timers (heartbeats, maintenance) stops with it.
      emit({ event: "stall", run, key, t: now() });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, this.config.stall_s * 1000);
    } else {
      const pause = drawSeconds(this.config.work, this.rng);
      if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause * 1000));
    }
    emit({ event: "end", run, key, t: now() });
  }
}

/** Wait for the coordinator's stop (SIGTERM, or SIGINT), then arm the exit (4) `o.stop_grace_s`
 * later, in case the library's graceful stop that follows hangs. `loop`, when given, is the promise
 * of the library's worker loop: its ending before the stop is an error naming `what`. */
export async function untilStopped(o, loop = null, what = "the library's worker loop") {
  const stopped = new Promise((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  const ended = await Promise.race([stopped.then(() => "signal"), ...(loop ? [loop.then(() => "ended")] : [])]);
  if (ended === "ended") throw new Error(`${what} ended by itself`);
  setTimeout(() => process.exit(4), o.stop_grace_s * 1000).unref();
}

/** Run `main` for the subcommand; a failure goes to stderr (its last line is the worker's last
 * words in the report) and exits 3, as the Python worker does. */
export function run(main) {
  const die = (err) => {
    process.stderr.write(`${err?.stack ?? err}`.split("\n")[0] + "\n");
    process.exit(3);
  };
  process.on("uncaughtException", die);  // a library error nobody caught: one line, then exit 3
  process.on("unhandledRejection", die);
  if (typeof main !== "function") die(new Error(`unknown command ${process.argv[2]}: install, enqueue, feed, work or sql`));
  main().then((code) => process.exit(code ?? 0), die);
}
