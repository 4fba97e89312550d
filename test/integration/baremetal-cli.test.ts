import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startConductor } from "../helpers/conductor.ts";

const run = promisify(execFile);

/** The stock client from Debian's python3-ironicclient, as an operator types it. */
describe("the stock baremetal CLI against the conductor", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let uuid = "";

  const bm = async (...args: string[]): Promise<string> => {
    const { stdout } = await run("baremetal", ["--os-auth-type", "none", "--os-endpoint", ctx.url, ...args], {
      env: { ...process.env, OS_CLOUD: "" },
      timeout: 60_000,
    });
    return stdout;
  };
  const bmJson = async (...args: string[]): Promise<Record<string, unknown>> =>
    JSON.parse(await bm(...args, "-f", "json")) as Record<string, unknown>;
  const state = async (): Promise<string> =>
    (await bm("node", "show", "n1", "--fields", "provision_state", "-f", "value")).trim();

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 20 });
  });
  afterAll(async () => {
    await ctx.stop();
  });

  it("lists drivers", async () => {
    const out = await bm("driver", "list", "-f", "value");
    expect(out).toContain("fake-hardware");
    expect(out).toContain("ipmi");
  });

  it("creates a node and masks its BMC password", async () => {
    const node = await bmJson(
      "node",
      "create",
      "--driver",
      "fake-hardware",
      "--name",
      "n1",
      "--property",
      "cpus=4",
      "--property",
      "memory_mb=8192",
      "--property",
      "local_gb=100",
      "--property",
      "cpu_arch=x86_64",
      "--driver-info",
      "ipmi_address=192.0.2.1",
      "--driver-info",
      "ipmi_password=s3cret",
      "--resource-class",
      "baremetal-small",
    );
    uuid = String(node.uuid);
    expect(node.provision_state).toBe("enroll");
    expect(node.properties).toEqual({ cpus: 4, memory_mb: 8192, local_gb: 100, cpu_arch: "x86_64" });
    const shown = await bmJson("node", "show", "n1");
    expect(shown.driver_info).toEqual({ ipmi_address: "192.0.2.1", ipmi_password: "******" });
    expect(JSON.stringify(shown)).not.toContain("s3cret");
  });

  it("creates and lists a port", async () => {
    const port = await bmJson("port", "create", "--node", uuid, "52:54:00:12:34:56", "--pxe-enabled", "true");
    expect(port.pxe_enabled).toBe(true);
    expect(port.node_uuid).toBe(uuid);
    const ports = await bm("port", "list", "--node", "n1", "-f", "value", "-c", "Address");
    expect(ports.trim()).toBe("52:54:00:12:34:56");
  });

  it("manages, provides and deploys the node", async () => {
    await bm("node", "manage", "n1", "--wait", "60");
    expect(await state()).toBe("manageable");
    await bm("node", "provide", "n1", "--wait", "60");
    expect(await state()).toBe("available");
    await bm("node", "deploy", "n1", "--wait", "60");
    expect(await state()).toBe("active");
    const shown = await bmJson("node", "show", "n1", "--fields", "power_state", "target_provision_state");
    expect(shown.power_state).toBe("power on");
    expect(shown.target_provision_state).toBeNull();
  });

  it("refuses an illegal verb with Ironic's message", async () => {
    const failure = await bm("node", "inspect", "n1").catch((error: { stderr: string }) => error.stderr);
    expect(failure).toContain(
      `The requested action "inspect" can not be performed on node "${uuid}" while it is in state "active".`,
    );
    expect(failure).toContain("HTTP 400");
  });

  it("powers the node off and on", async () => {
    await bm("node", "power", "off", "n1", "--power-timeout", "30");
    expect((await bm("node", "show", "n1", "--fields", "power_state", "-f", "value")).trim()).toBe(
      "power off",
    );
    await bm("node", "power", "on", "n1", "--power-timeout", "30");
    expect((await bm("node", "show", "n1", "--fields", "power_state", "-f", "value")).trim()).toBe(
      "power on",
    );
  });

  it("undeploys the node back to available", async () => {
    await bm("node", "undeploy", "n1", "--wait", "60");
    expect(await state()).toBe("available");
    expect((await bmJson("node", "show", "n1", "--fields", "instance_info")).instance_info).toEqual({});
  });

  it("sets and unsets properties, extra and driver_info", async () => {
    await bm(
      "node",
      "set",
      "n1",
      "--property",
      "rack=r12",
      "--extra",
      "owner=team-a",
      "--driver-info",
      "ipmi_username=admin",
    );
    let shown = await bmJson("node", "show", "n1");
    expect((shown.properties as Record<string, unknown>).rack).toBe("r12");
    expect(shown.extra).toEqual({ owner: "team-a" });
    expect((shown.driver_info as Record<string, unknown>).ipmi_password).toBe("******");
    await bm("node", "set", "n1", "--no-automated-clean");
    expect((await bmJson("node", "show", "n1", "--fields", "automated_clean")).automated_clean).toBe(false);
    await bm("node", "unset", "n1", "--property", "rack", "--extra", "owner");
    shown = await bmJson("node", "show", "n1");
    expect((shown.properties as Record<string, unknown>).rack).toBeUndefined();
    expect(shown.extra).toEqual({});
  });

  it("lists nodes long and with chosen fields", async () => {
    const long = JSON.parse(await bm("node", "list", "--long", "-f", "json")) as Record<string, unknown>[];
    expect(long).toHaveLength(1);
    expect(long[0]?.["Provisioning State"]).toBe("available");
    expect(long[0]?.["Driver Info"]).toEqual({
      ipmi_address: "192.0.2.1",
      ipmi_password: "******",
      ipmi_username: "admin",
    });
    const fields = JSON.parse(
      await bm("node", "list", "--fields", "uuid", "name", "provision_state", "resource_class", "-f", "json"),
    ) as Record<string, unknown>[];
    expect(fields).toEqual([
      { UUID: uuid, Name: "n1", "Provisioning State": "available", "Resource Class": "baremetal-small" },
    ]);
  });

  it("allocates the node by resource class, then releases it", async () => {
    const allocation = await bmJson(
      "allocation",
      "create",
      "--resource-class",
      "baremetal-small",
      "--name",
      "alloc1",
      "--wait",
      "60",
    );
    expect(allocation.state).toBe("active");
    expect(allocation.node_uuid).toBe(uuid);
    const node = await bmJson("node", "show", "n1", "--fields", "instance_uuid", "allocation_uuid");
    expect(node.instance_uuid).toBe(allocation.uuid);
    expect(node.allocation_uuid).toBe(allocation.uuid);
    const shown = await bmJson("allocation", "show", "alloc1");
    expect(shown.node_uuid).toBe(uuid);
    const none = await bm(
      "allocation",
      "create",
      "--resource-class",
      "no-such-class",
      "--name",
      "alloc2",
      "--wait",
      "60",
    )
      .then(() => "succeeded")
      .catch((error: { stderr: string }) => error.stderr);
    expect(none).toContain("no available nodes match the resource class no-such-class");
    await bm("allocation", "delete", "alloc2");
    await bm("allocation", "delete", "alloc1");
    expect((await bmJson("node", "show", "n1", "--fields", "instance_uuid")).instance_uuid).toBeNull();
  });

  it("deletes the node", async () => {
    await bm("node", "delete", "n1");
    expect((await bm("node", "list", "-f", "value")).trim()).toBe("");
    const missing = await bm("node", "show", "n1").catch((error: { stderr: string }) => error.stderr);
    expect(missing).toContain("Node n1 could not be found");
    expect((await bm("port", "list", "-f", "value")).trim()).toBe("");
  });
});
