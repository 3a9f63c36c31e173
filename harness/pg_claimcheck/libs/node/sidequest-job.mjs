// The job class claimcheck enqueues through sidequest (pg_claimcheck/libs/node/sidequest.mjs). sidequest runs a job
// by importing the file that exports its class, in a worker thread of the engine process it forks, so this file
// finds the library and the worker's recorder settings in the environment the worker script gave that process
// (CLAIMCHECK_SIDEQUEST: the cache directory, and the worker's config when it runs jobs).
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Recorder } from "./protocol.mjs";

const setup = JSON.parse(process.env.CLAIMCHECK_SIDEQUEST ?? "{}");
// sidequest's ES module build, as its engine imports it: one module instance for the engine and this class
const { Job } = await import(pathToFileURL(path.join(setup.modules, "node_modules", "sidequest", "dist", "index.js")).href);
let recorder = null;

export class ClaimcheckJob extends Job {
  async run(key) {
    recorder ??= new Recorder(setup.config);
    // attempt is sidequest's count, this run included (RunTransition); claimed_at its own time of the claim
    await recorder.execution(key, this.id, this.attempt, this.claimed_at ? new Date(this.claimed_at) : null);
  }
}
