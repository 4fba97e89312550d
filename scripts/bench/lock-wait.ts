// What a client acting on a state sees right after a task: a `manage` sent as soon as a power PUT answered 202,
// BENCH_SAMPLES times, against one conductor with Ironic's node_locked_retry window as built (3 attempts, 1 s)
// and, as the same run's baseline, with attempts 1 (refused at once, Anvil before the lock wait). Prints how
// many were refused 409 and how long the accepted ones took to answer.
// Run: flock /tmp/anvil-heavy.lock node --import tsx scripts/bench/lock-wait.ts
import { api, released, startConductor } from "../../test/helpers/conductor.ts";
import { percentile } from "./percentile.ts";

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 300);

interface Outcome {
  refused: number;
  answerMs: number[];
}

async function measure(attempts: number): Promise<Outcome> {
  const ctx = await startConductor({ nodeLockedRetry: { attempts, intervalS: 1 } });
  const outcome: Outcome = { refused: 0, answerMs: [] };
  try {
    for (let i = 0; i < SAMPLES; i++) {
      const created = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
      if (created.status !== 201) throw new Error(`create: ${created.status}`);
      const uuid = (created.body as { uuid: string }).uuid;
      await released(ctx.url, uuid);
      const path = `${ctx.url}/v1/nodes/${uuid}/states`;
      const power = await api(`${path}/power`, { method: "PUT", body: { target: "power on" } });
      if (power.status !== 202) throw new Error(`power: ${power.status}`);
      const t = performance.now();
      const manage = await api(`${path}/provision`, { method: "PUT", body: { target: "manage" } });
      const ms = performance.now() - t;
      if (manage.status === 409) outcome.refused++;
      else if (manage.status === 202) outcome.answerMs.push(ms);
      else throw new Error(`manage: ${manage.status}`);
    }
  } finally {
    await ctx.stop();
  }
  outcome.answerMs.sort((a, b) => a - b);
  return outcome;
}

const line = (name: string, o: Outcome): string =>
  `${name.padEnd(30)} refused ${String(o.refused).padStart(4)} of ${SAMPLES}; accepted ${o.answerMs.length}, ` +
  `answer p50 ${percentile(o.answerMs, 50).toFixed(2)} ms, p99 ${percentile(o.answerMs, 99).toFixed(2)} ms`;

const before = await measure(1);
const now = await measure(3);
console.log(`a manage right after a power PUT's 202, ${SAMPLES} nodes, one conductor (SQLite)`);
console.log(line("attempts 1 (refused at once)", before));
console.log(line("attempts 3, interval 1 s", now));
console.log(`goal: none refused; refused ${before.refused} → ${now.refused}`);
