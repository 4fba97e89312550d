import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, provisionThrough, startConductor } from "../helpers/conductor.ts";

let ctx: Awaited<ReturnType<typeof startConductor>>;

beforeAll(async () => {
  ctx = await startConductor();
});
afterAll(async () => {
  await ctx.stop();
});

describe("GET /metrics", () => {
  it("answers the operator's questions in Prometheus format after a deploy", async () => {
    const created = await api(`${ctx.url}/v1/nodes`, { method: "POST", body: { driver: "fake-hardware" } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const node = created.body as { uuid: string };
    // each verb's 202 read and each state waited for with a deadline (a refused verb hung here unnamed)
    await provisionThrough(ctx.url, node.uuid, [
      ["manage", "manageable"],
      ["provide", "available"],
      ["active", "active"],
    ]);
    await api(`${ctx.url}/v1/nodes/no-such-node`);
    // a BMC that is not there: the call fails, and the failure is counted
    const bmc = (
      await api(`${ctx.url}/v1/nodes`, {
        method: "POST",
        body: {
          driver: "ipmi",
          driver_info: { ipmi_address: "127.0.0.1", ipmi_port: 9, ipmi_password: "x" },
        },
      })
    ).body as { uuid: string };
    const bootDevice = await api(`${ctx.url}/v1/nodes/${bmc.uuid}/management/boot_device`);
    expect(bootDevice.status).toBeGreaterThanOrEqual(400);

    const response = await fetch(`${ctx.url}/metrics`);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = await response.text();
    expect(text).toContain('anvil_nodes{provision_state="active"} 1');
    expect(text).toMatch(/anvil_provision_duration_seconds_count\{operation="deploy",outcome="success"\} 1/);
    expect(text).toMatch(/anvil_provision_duration_seconds_count\{operation="clean",outcome="success"\} 1/);
    expect(text).toMatch(
      /anvil_http_request_duration_seconds_count\{method="GET",route="\/v1\/nodes\/:ident",status="404"\} 1/,
    );
    expect(text).toMatch(/anvil_bmc_errors_total\{command="chassis bootparam",outcome="\w+"\} 1/);
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    // node names never become labels
    expect(text).not.toContain("no-such-node");
    // room for waitForState's own 60 s to name the state
  }, 120_000);
});

describe("the Grafana dashboard in deploy/grafana", () => {
  it("only graphs metrics the conductor exports", async () => {
    const dashboard = JSON.parse(
      readFileSync(new URL("../../deploy/grafana/anvil-dashboard.json", import.meta.url), "utf8"),
    ) as { panels: { targets: { expr: string }[] }[] };
    const exported = new Set(
      (await (await fetch(`${ctx.url}/metrics`)).text())
        .split("\n")
        .filter((l) => l.startsWith("# TYPE "))
        .map((l) => l.split(" ")[2]),
    );
    const used = dashboard.panels.flatMap((p) =>
      p.targets.flatMap((t) => t.expr.match(/\b(anvil|process)_[a-z_]+/g) ?? []),
    );
    expect(used.length).toBeGreaterThan(10);
    for (const name of used) {
      const base = name.replace(/_(bucket|count|sum)$/, "");
      expect(exported.has(base) || exported.has(name), name).toBe(true);
    }
  });
});
