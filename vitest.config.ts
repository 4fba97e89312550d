import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/e2e/**", "node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests spawn servers, ipmi_sim and QEMU: two cores cannot run many at once.
    maxWorkers: 2,
  },
});
