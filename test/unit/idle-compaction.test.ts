import { afterEach, describe, expect, it, vi } from "vitest";
import { runInNewContext } from "node:vm";
import {
  DEFAULT_IDLE_COMPACTION,
  IdleCompactionGate,
  type IdleAction,
  startIdleCompaction,
  v8Collection,
} from "../../conductor/idle-compaction.ts";
import { silentLogger } from "../../shared/log.ts";

const MiB = 1024 * 1024;
const policy = { growthBytes: 16 * MiB, quietChecks: 3, quietUtilization: 0.05 };
const busy = 0.5;
const quiet = 0.01;

/** The gate's answers to samples given as [committed MiB, utilisation]. */
function run(gate: IdleCompactionGate, samples: [number, number][]): IdleAction[] {
  return samples.map(([mib, utilization]) => gate.check({ committedBytes: mib * MiB, utilization }));
}

/** A gate whose floor is `mib` (as after a full collection that left the heap there). */
function gateAt(mib: number): IdleCompactionGate {
  const gate = new IdleCompactionGate(policy);
  gate.compacted(mib * MiB);
  return gate;
}

describe("IdleCompactionGate", () => {
  it("asks for a minor collection at the first quiet check after growth, then a full one quietChecks later", () => {
    const gate = gateAt(44);
    expect(
      run(gate, [
        [44, quiet],
        [72, busy],
        [72, quiet],
        [72, quiet],
        [72, quiet],
        [72, quiet],
      ]),
    ).toEqual(["none", "none", "minor", "none", "none", "full"]);
  });

  it("compacts in the first quiet spell after start whatever the heap, since the first check may be mid-burst", () => {
    const gate = new IdleCompactionGate(policy);
    expect(
      run(gate, [
        [61, busy],
        [72, busy],
        [72, quiet],
        [72, quiet],
        [72, quiet],
        [72, quiet],
      ]),
    ).toEqual(["none", "none", "minor", "none", "none", "full"]);
  });

  it("does nothing while the heap has not grown by growthBytes over its floor", () => {
    const gate = gateAt(44);
    const samples: [number, number][] = [
      [44, quiet],
      [59, busy],
      ...Array<[number, number]>(8).fill([59, quiet]),
    ];
    expect(run(gate, samples).every((action) => action === "none")).toBe(true);
  });

  it("closes the window on a busy check and opens it again with a new minor collection", () => {
    const gate = gateAt(40);
    expect(
      run(gate, [
        [40, quiet],
        [72, quiet],
        [72, quiet],
        [72, busy],
        [72, quiet],
        [72, quiet],
      ]),
    ).toEqual(["none", "minor", "none", "none", "minor", "none"]);
  });

  it("takes the heap after a compaction as the floor, so one burst gives one compaction", () => {
    const gate = gateAt(40);
    run(gate, [
      [72, quiet],
      [72, quiet],
      [72, quiet],
    ]);
    expect(gate.check({ committedBytes: 72 * MiB, utilization: quiet })).toBe("full");
    gate.compacted(60 * MiB);
    const after = run(gate, Array<[number, number]>(10).fill([70, quiet]));
    expect(after.every((action) => action === "none")).toBe(true);
    // a later burst that grows the heap 16 MiB over the new floor compacts again
    expect(
      run(gate, [
        [76, busy],
        [76, quiet],
      ]),
    ).toEqual(["none", "minor"]);
  });

  it("follows the heap down when it shrinks on its own", () => {
    const gate = gateAt(60);
    run(gate, [[40, busy]]);
    // 57 MiB is within 16 MiB of 60 but not of the 40 the floor followed down to
    expect(gate.check({ committedBytes: 57 * MiB, utilization: quiet })).toBe("minor");
  });

  it("counts a check as quiet only below quietUtilization", () => {
    const gate = gateAt(40);
    expect(
      run(gate, [
        [72, busy],
        [72, policy.quietUtilization],
        [72, policy.quietUtilization - 0.001],
      ]),
    ).toEqual(["none", "none", "minor"]);
  });

  it("has defaults that wait at least 5 checks between the minor and the full collection", () => {
    // V8 gives the young generation back only after >= 5 s of slow allocation (one check a second)
    expect(DEFAULT_IDLE_COMPACTION.quietChecks).toBeGreaterThanOrEqual(5);
  });
});

describe("v8Collection", () => {
  it("returns V8's gc without leaving a global gc in this context or in contexts made later", () => {
    const hadGc = typeof (globalThis as { gc?: unknown }).gc === "function";
    const gc = v8Collection();
    expect(typeof gc).toBe("function");
    gc({ type: "minor" });
    gc();
    if (!hadGc) expect(typeof (globalThis as { gc?: unknown }).gc).toBe("undefined");
    expect(runInNewContext("typeof gc")).toBe("undefined");
  });
});

describe("startIdleCompaction", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("runs the gate once per check: a minor collection, then a full one, logged with the heap before and after", () => {
    vi.useFakeTimers();
    // [committed MiB, utilisation] per check; the last is read right after the full collection
    const samples: [number, number][] = [
      [72, busy],
      [72, quiet],
      [72, quiet],
      [72, quiet],
      [72, quiet],
      [30, quiet],
    ];
    const calls: string[] = [];
    const logged: object[] = [];
    const logger = { ...silentLogger, debug: (obj: object | string) => void logged.push(obj as object) };
    const stop = startIdleCompaction(logger, {
      policy: { growthBytes: 16 * MiB, quietChecks: 3, quietUtilization: 0.05 },
      sample: () => {
        const [mib, utilization] = samples.shift() ?? [30, quiet];
        return { committedBytes: mib * MiB, utilization };
      },
      collect: (options) => void calls.push(options?.type ?? "full"),
      checkMs: 1000,
    });
    vi.advanceTimersByTime(5000);
    expect(calls).toEqual(["minor", "full"]);
    expect(logged).toEqual([expect.objectContaining({ heap_before_mib: 72, heap_after_mib: 30 })]);
    stop();
    vi.advanceTimersByTime(10_000);
    expect(calls).toEqual(["minor", "full"]);
  });
});
