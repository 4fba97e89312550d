import { defineConfig } from "vitest/config";

/**
 * End-to-end tests on the virtual lab: QEMU under TCG, minutes per case. Two files at a time: a lab case
 * keeps ~1.2 cores busy (the fast-track case: 82 CPU-seconds in 70 s of wall time), and each file's labs
 * have their own directory, free ports and bridge names, so a 2-core machine runs two of them in about
 * two thirds of the time one after the other takes. ANVIL_E2E_WORKERS=1 runs them one at a time.
 */
const workers = Number(process.env.ANVIL_E2E_WORKERS) || 2;

export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.test.ts"],
    globalSetup: ["test/e2e/free-space.setup.ts"],
    testTimeout: 30 * 60_000,
    hookTimeout: 5 * 60_000,
    fileParallelism: workers > 1,
    maxWorkers: workers,
  },
});
