import { describe, expect, it } from "vitest";
import { createMetrics } from "../../conductor/metrics/metrics.ts";

async function sample(metrics: ReturnType<typeof createMetrics>, name: string): Promise<number | undefined> {
  const text = await metrics.registry.metrics();
  const line = text
    .split("\n")
    .find((l) => l.startsWith(`${name} `) || (l.startsWith(`${name}{`) && l.includes(name)));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

describe("conductor metrics from events", () => {
  it("times a deploy from the request to active, by outcome", async () => {
    const metrics = createMetrics();
    metrics.onEvent({ type: "provision", node: "a", event: "deploy", provision_state: "deploying" });
    metrics.onEvent({ type: "provision", node: "b", event: "deploy", provision_state: "deploying" });
    metrics.onEvent({ type: "provision", node: "a", event: "done", provision_state: "active" });
    metrics.onEvent({ type: "provision", node: "b", event: "fail", provision_state: "deploy failed" });
    metrics.onEvent({ type: "provision", node: "c", event: "inspect", provision_state: "inspecting" });
    metrics.onEvent({ type: "provision", node: "c", event: "done", provision_state: "manageable" });
    const text = await metrics.registry.metrics();
    expect(text).toContain('anvil_provision_duration_seconds_count{operation="deploy",outcome="success"} 1');
    expect(text).toContain('anvil_provision_duration_seconds_count{operation="deploy",outcome="failure"} 1');
    expect(text).toContain('anvil_provision_duration_seconds_count{operation="inspect",outcome="success"} 1');
  });

  it("counts agent sessions and image bytes from progress, once each", async () => {
    const metrics = createMetrics();
    metrics.onEvent({ type: "agent", node: "a", connected: true });
    metrics.onEvent({ type: "agent", node: "b", connected: true });
    metrics.onEvent({ type: "agent", node: "a", connected: false });
    expect(await sample(metrics, "anvil_agent_sessions")).toBe(1);
    metrics.onEvent({ type: "provision", node: "a", event: "deploy", provision_state: "deploying" });
    for (const done of [100, 300, 300, 1000])
      metrics.onEvent({ type: "progress", node: "a", progress: { bytes_done: done, rate_bps: 50 } });
    expect(await sample(metrics, "anvil_image_bytes_written_total")).toBe(1000);
    expect(await sample(metrics, "anvil_image_writes_in_progress")).toBe(1);
    metrics.onEvent({ type: "provision", node: "a", event: "done", provision_state: "active" });
    expect(await sample(metrics, "anvil_image_writes_in_progress")).toBe(0);
  });

  it("counts BMC errors but not successes, and power-sync failures", async () => {
    const metrics = createMetrics();
    metrics.observeBmcCall({ command: "chassis power", outcome: "ok" }, 0.02);
    metrics.observeBmcCall({ command: "chassis power", outcome: "unreachable" }, 6);
    metrics.observePowerSync({ seconds: 1.5, failed: 2, checked: 10 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('anvil_bmc_errors_total{command="chassis power",outcome="unreachable"} 1');
    expect(text).not.toContain('anvil_bmc_errors_total{command="chassis power",outcome="ok"}');
    expect(text).toContain('anvil_bmc_call_duration_seconds_count{command="chassis power",outcome="ok"} 1');
    expect(await sample(metrics, "anvil_power_sync_failures_total")).toBe(2);
  });
});
