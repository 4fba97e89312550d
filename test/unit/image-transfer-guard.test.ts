import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TransferGuard } from "../../agent/image/transfer-guard.ts";
import type { TransferLimits } from "../../agent/image/transfer-guard.ts";

const LIMITS: TransferLimits = { minBytesPerSecond: 1000, rateWindowMs: 10_000, deadlineSlackMs: 5_000 };

/** A guard on a fake clock: `wait(ms, bytes)` is a read that took ms of network time and brought bytes. */
function guarded(limits: TransferLimits = LIMITS) {
  let now = 0;
  const guard = new TransferGuard(limits, "http://images/disk.raw", () => now);
  return {
    guard,
    idle: (ms: number) => {
      now += ms; // the consumer's time: not waiting for the server
    },
    wait: async (ms: number, bytes: number, total: number | null = null) => {
      // the clock moves once the guard has started timing the wait
      await guard.waitFor(
        Promise.resolve().then(() => {
          now += ms;
        }),
      );
      guard.received(bytes, total);
    },
  };
}

describe("TransferGuard", () => {
  it("a server dripping below the minimum fails once a window of waiting has passed, naming the rate", async () => {
    const { wait } = guarded();
    for (let ms = 1_000; ms < 10_000; ms += 1_000) await wait(1_000, 10); // 10 B/s: not judged yet
    await expect(wait(1_000, 10)).rejects.toMatchObject({
      code: "http_stall",
      message: expect.stringMatching(
        /too slow: 10 B\/s over the last 10\.0 s, below the minimum of 1000 B\/s/,
      ),
    });
  });

  it("time the consumer holds the download back is not blamed on the server", async () => {
    const { wait, idle } = guarded();
    for (let i = 0; i < 50; i++) {
      await wait(1_000, 1_000); // the server keeps the minimum exactly
      idle(60_000); // the disk is slow
    }
  });

  it("a download past its size-derived deadline fails, even at a rate the window accepts", async () => {
    // 20,000 bytes at 1000 B/s + 5 s of slack: 25 s
    const { wait, idle } = guarded();
    await wait(1_000, 1_000, 20_000);
    idle(24_000);
    await expect(wait(1_000, 1_000, 20_000)).rejects.toMatchObject({
      code: "http_stall",
      message: expect.stringMatching(/missed its deadline of 25 s/),
    });
  });

  it("an explicit deadline applies without a known size", async () => {
    const { wait } = guarded({ ...LIMITS, deadlineMs: 3_000 });
    await wait(2_000, 5_000);
    await expect(wait(2_000, 5_000)).rejects.toMatchObject({
      message: expect.stringMatching(/deadline of 3 s/),
    });
  });

  it("any read pattern at or above the minimum rate never fails; one window well below it always does (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 3_000 }), { minLength: 1, maxLength: 200 }),
        async (reads) => {
          const fast = guarded();
          for (const ms of reads) await fast.wait(ms, ms); // exactly 1000 B/s
          const slow = guarded();
          let failed = false;
          let waited = 0;
          for (const ms of [...reads, 10_000, 10_000]) {
            waited += ms;
            try {
              await slow.wait(ms, Math.floor(ms / 4)); // 250 B/s
            } catch {
              failed = true;
              break;
            }
          }
          expect(failed).toBe(true);
          expect(waited).toBeGreaterThanOrEqual(10_000);
        },
      ),
      { numRuns: 200 },
    );
  });
});
