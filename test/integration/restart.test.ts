import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { api, provisionThrough, released, spawnConductor } from "../helpers/conductor.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-restart-"));
const args = [
  "--db",
  join(dir, "anvil.sqlite"),
  "--data-dir",
  dir,
  "--power-sync-interval",
  "0",
  "--fake-delay-ms",
  "3000",
];
const children: { kill(signal: NodeJS.Signals): boolean }[] = [];

afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("a conductor killed mid-transition", () => {
  it("leaves no node stuck or locked after it starts again", async () => {
    const first = await spawnConductor(args);
    children.push(first.child);
    const created = await api(`${first.url}/v1/nodes`, {
      method: "POST",
      body: { name: "r1", driver: "fake-hardware" },
    });
    expect(created.status).toBe(201);
    await provisionThrough(first.url, "r1", [["manage", "manageable"]]);
    await released(first.url, "r1");
    const provide = await api(`${first.url}/v1/nodes/r1/states/provision`, {
      method: "PUT",
      body: { target: "provide" },
    });
    expect(provide.status, JSON.stringify(provide.body)).toBe(202);
    const cleaning = (await api(`${first.url}/v1/nodes/r1`)).body as Record<string, unknown>;
    expect(cleaning.provision_state).toBe("cleaning");
    // the holder is the process's unique identity: the name plus an instance id
    expect(cleaning.reservation).toMatch(/^127\.0\.0\.1\/[0-9a-f]{8}$/);

    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));

    const second = await spawnConductor(args);
    children.push(second.child);
    const node = (await api(`${second.url}/v1/nodes/r1`)).body as Record<string, unknown>;
    expect(node.provision_state).toBe("clean failed");
    expect(node.reservation).toBeNull();
    expect(String(node.last_error)).toMatch(/conductor restarted while the node was in "cleaning"/);

    // and the node can be recovered the usual way
    await provisionThrough(second.url, "r1", [["manage", "manageable"]]);
    second.child.kill("SIGTERM");
    // two conductor starts (30 s each at most) and a wait: room for waitForState's 60 s to name the state
  }, 150_000);
});
