import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startConductor } from "../helpers/conductor.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const BIN = resolve(ROOT, "bin/anvil");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as an operator runs it: bin/anvil, a child process, from a directory that is not the repo. */
function anvil(url: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(
      BIN,
      args,
      { cwd: "/", env: { ...process.env, ANVIL_URL: url, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

const json = (run: Run): Record<string, unknown> => {
  expect(run.stderr).toBe("");
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout) as Record<string, unknown>;
};

/** The "a -> b" pairs of a wait's output, in order. */
const transitions = (output: string): string[] =>
  [
    ...output.matchAll(
      /^\d\d:\d\d:\d\dZ {2}([a-z][a-z -]*) -> ([a-z][a-z -]*?)(?: \(target: [a-z -]+\))?$/gm,
    ),
  ].map((m) => `${m[1]} -> ${m[2]}`);

describe("anvil CLI against a conductor (fake-hardware)", () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let uuid = "";
  const cli = (...args: string[]): Promise<Run> => anvil(ctx.url, args);

  beforeAll(async () => {
    ctx = await startConductor({ fakeDelayMs: 200 });
  });
  afterAll(async () => {
    await ctx.stop();
  });

  it("creates a node with a port; --json prints the API's node", async () => {
    const node = json(
      await cli(
        "node",
        "create",
        "--json",
        "--driver",
        "fake-hardware",
        "--name",
        "n1",
        "--property",
        "cpus=8",
        "--property",
        "memory_mb=16384",
        "--property",
        "local_gb=100",
        "--driver-info",
        "ipmi_address=192.0.2.10",
        "--driver-info",
        "ipmi_password=hunter2",
        "--resource-class",
        "baremetal",
        "--port",
        "52:54:00:aa:bb:01",
      ),
    );
    expect(node).toMatchObject({
      name: "n1",
      driver: "fake-hardware",
      provision_state: "enroll",
      resource_class: "baremetal",
      properties: { cpus: "8", memory_mb: "16384", local_gb: "100" },
    });
    uuid = String(node.uuid);
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("shows the node as a table with the BMC password masked", async () => {
    const run = await cli("node", "show", "n1");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^\| provision_state +\| enroll +\|$/m);
    expect(run.stdout).toContain('"ipmi_password":"******"');
    expect(run.stdout).not.toContain("hunter2");
    const shown = json(await cli("node", "show", uuid, "--json"));
    expect((shown.driver_info as Record<string, unknown>).ipmi_password).toBe("******");
  });

  it("takes BMC passwords from the environment (--driver-info-env), never from argv", async () => {
    const secret = "from-env-Pa55";
    const node = json(
      await anvil(
        ctx.url,
        [
          "node",
          "create",
          "--json",
          "--driver",
          "fake-hardware",
          "--name",
          "envpw",
          "--driver-info-env",
          "ipmi_password=BMC_PW",
        ],
        {
          BMC_PW: secret,
        },
      ),
    );
    expect(node.driver_info).toEqual({ ipmi_password: "******" });
    const stored = await ctx.conductor.store.getNode("envpw");
    expect(stored?.driver_info.ipmi_password).toBe(secret);
    const unset = await cli("node", "set", "envpw", "--driver-info-env", "ipmi_password=NO_SUCH_VAR_X");
    expect(unset.code).toBe(2);
    expect(unset.stderr).toContain("$NO_SUCH_VAR_X is not set");
    expect((await cli("node", "delete", "envpw")).code).toBe(0);
  });

  it("lists nodes in aligned columns, with filters", async () => {
    const run = await cli("node", "list");
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines[1]).toMatch(
      /^\| UUID +\| Name +\| Instance UUID +\| Power State +\| Provisioning State +\| Maintenance +\|$/,
    );
    expect(lines.find((l) => l.includes(uuid))).toMatch(/\| n1 +\| None +\| .+ \| enroll +\| False +\|$/);
    expect(new Set(lines.map((l) => l.length)).size).toBe(1);
    const listed = json(
      await cli("node", "list", "--json", "--state", "enroll", "--resource-class", "baremetal"),
    );
    expect((listed.nodes as { uuid: string }[]).map((n) => n.uuid)).toEqual([uuid]);
    const none = json(await cli("node", "list", "--json", "--state", "active"));
    expect(none.nodes).toEqual([]);
  });

  it("lists and creates ports", async () => {
    const run = await cli("port", "list", "--node", "n1");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/\| 52:54:00:aa:bb:01 \| [0-9a-f-]{36} \| True +\|/);
    const port = json(
      await cli("port", "create", "--json", "--node", "n1", "52:54:00:AA:BB:02", "--pxe-enabled", "false"),
    );
    expect(port).toMatchObject({ address: "52:54:00:aa:bb:02", node_uuid: uuid, pxe_enabled: false });
    const ports = json(await cli("port", "list", "--json", "--node", uuid)).ports as { address: string }[];
    expect(ports.map((p) => p.address).sort()).toEqual(["52:54:00:aa:bb:01", "52:54:00:aa:bb:02"]);
    const deleted = await cli("port", "delete", String(port.uuid));
    expect(deleted.code).toBe(0);
    expect((json(await cli("port", "list", "--json", "--node", uuid)).ports as unknown[]).length).toBe(1);
  });

  it("manage --wait shows enroll -> verifying -> manageable", async () => {
    const run = await cli("node", "manage", "n1", "--wait", "--timeout", "30");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(transitions(run.stdout)).toEqual(["enroll -> verifying", "verifying -> manageable"]);
    expect(run.stdout).toMatch(/n1 is manageable\n$/);
  });

  it("provide --wait cleans to available; deploy --wait reaches active and sets instance_info", async () => {
    const provide = await cli("node", "provide", "n1", "--wait");
    expect(provide.code).toBe(0);
    expect(transitions(provide.stdout)).toEqual(["manageable -> cleaning", "cleaning -> available"]);

    const deploy = await cli(
      "node",
      "deploy",
      "n1",
      "--image",
      "http://images.example/disk.raw",
      "--checksum",
      "sha256:" + "ab".repeat(32),
      "--wait",
    );
    expect(deploy.stderr).toBe("");
    expect(deploy.code).toBe(0);
    expect(transitions(deploy.stdout)).toEqual(["available -> deploying", "deploying -> active"]);
    const node = json(await cli("node", "show", "n1", "--json"));
    expect(node.provision_state).toBe("active");
    expect(node.instance_info).toMatchObject({
      image_source: "http://images.example/disk.raw",
      image_os_hash_algo: "sha256",
      image_os_hash_value: "ab".repeat(32),
    });
  });

  it("a refused action prints the API's faultstring and exits 1", async () => {
    const run = await cli("node", "deploy", "n1");
    expect(run, JSON.stringify(run)).toMatchObject({ code: 1 });
    expect(run.stdout).toBe("");
    expect(run.stderr.trim()).toBe(
      `The requested action "active" can not be performed on node "${uuid}" while it is in state "active".`,
    );
    const waited = await cli("node", "deploy", "n1", "--wait");
    expect(waited.code).toBe(1);
    expect(waited.stdout).toBe("");
    expect(waited.stderr).toContain('while it is in state "active"');
    const missing = await cli("node", "show", "no-such-node");
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe("Node no-such-node could not be found.");
  });

  it("usage errors exit 2", async () => {
    expect((await cli("node", "list", "--bogus")).code).toBe(2);
    expect((await cli("node", "show")).code).toBe(2);
    expect((await cli("node", "frobnicate", "n1")).code).toBe(2);
    const help = await cli("node", "deploy", "--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: anvil node deploy ID/);
  });

  it("powers the node off and on", async () => {
    const off = await cli("node", "power", "off", "n1", "--wait");
    expect(off.code).toBe(0);
    expect(off.stdout.trim()).toBe("n1: power off");
    expect(json(await cli("node", "show", "n1", "--json")).power_state).toBe("power off");
    const on = json(await cli("node", "power", "on", "n1", "--wait", "--json"));
    expect(on.power_state).toBe("power on");
  });

  it("undeploy --wait goes through deleting and cleaning back to available", async () => {
    const run = await cli("node", "undeploy", "n1", "--wait", "--json");
    expect(run.code).toBe(0);
    expect(transitions(run.stderr)).toEqual([
      "active -> deleting",
      "deleting -> cleaning",
      "cleaning -> available",
    ]);
    expect((JSON.parse(run.stdout) as { provision_state: string }).provision_state).toBe("available");
  });

  it("wait --state returns at once when the node is there; a wrong settled state fails", async () => {
    const there = await cli("node", "wait", "n1", "--state", "available");
    expect(there.code).toBe(0);
    const elsewhere = await cli("node", "wait", "n1", "--state", "active", "--timeout", "5");
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toContain('settled in "available", not "active"');
  });

  it("sets fields with JSON Patch and toggles maintenance", async () => {
    const node = json(
      await cli("node", "set", "n1", "--json", "--property", "cpu_arch=x86_64", "--extra", "rack=r1"),
    );
    expect(node.properties).toMatchObject({ cpus: "8", cpu_arch: "x86_64" });
    expect(node.extra).toEqual({ rack: "r1" });
    expect((await cli("node", "maintenance", "set", "n1", "--reason", "disk swap")).code).toBe(0);
    const listed = json(await cli("node", "list", "--json", "--maintenance", "--long"));
    expect((listed.nodes as { maintenance_reason: string }[])[0]?.maintenance_reason).toBe("disk swap");
    expect((await cli("node", "maintenance", "unset", "n1")).code).toBe(0);
    expect(json(await cli("node", "show", "n1", "--json")).maintenance).toBe(false);
  });

  it("creates, shows and deletes allocations; no match exits 1 with last_error", async () => {
    const allocation = json(
      await cli(
        "allocation",
        "create",
        "--json",
        "--resource-class",
        "baremetal",
        "--name",
        "a1",
        "--memory-mb",
        "8192",
        "--vcpus",
        "4",
        "--match",
        "best_fit",
      ),
    );
    expect(allocation).toMatchObject({ name: "a1", state: "active", node_uuid: uuid });
    const shown = await cli("allocation", "show", "a1");
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^\\| node_uuid +\\| ${uuid} +\\|$`, "m"));
    const listed = await cli("allocation", "list");
    expect(listed.stdout).toMatch(/\| a1 +\| baremetal +\| active +\|/);

    const none = await cli("allocation", "create", "--resource-class", "baremetal", "--name", "a2");
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("no available nodes match the resource class baremetal");

    expect((await cli("allocation", "delete", "a1")).code).toBe(0);
    expect((await cli("allocation", "delete", "a2")).code).toBe(0);
    expect(json(await cli("allocation", "list", "--json")).allocations).toEqual([]);
    expect(json(await cli("node", "show", "n1", "--json")).allocation_uuid).toBeNull();
  });

  it("deletes nodes; a missing one makes the command exit 1 after deleting the rest", async () => {
    const run = await cli("node", "delete", "n1", "ghost");
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("Deleted node n1");
    expect(run.stderr).toContain("Failed to delete node ghost: Node ghost could not be found.");
    expect(json(await cli("node", "list", "--json")).nodes).toEqual([]);
  });
});
