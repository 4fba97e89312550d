import { defineConfig } from "vitest/config";

/** End-to-end tests on the virtual lab: QEMU under TCG, one VM at a time, minutes per case. */
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.test.ts"],
    globalSetup: ["test/e2e/free-space.setup.ts"],
    testTimeout: 30 * 60_000,
    hookTimeout: 5 * 60_000,
    // A TCG guest keeps a core busy: one file, one lab, one VM at a time.
    fileParallelism: false,
    maxWorkers: 1,
  },
});
