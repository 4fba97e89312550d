import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/e2e/**", "node_modules/**"],
    // above the 60 s of the helpers' own waits (waitForState, until, powerSettled): a hang fails there, naming
    // what it waited for and what it saw, rather than as vitest's bare timeout
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Integration tests spawn servers, ipmi_sim and QEMU: two cores cannot run many at once.
    maxWorkers: 2,
  },
});
