import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HashRing } from "../../conductor/cluster/hash-ring.ts";
import { api, provisionThrough, released, spawnConductor } from "../helpers/conductor.ts";
import { startHttpImageServer } from "../helpers/http-image-server.ts";
import { nodeCaughtMidWrite } from "../helpers/mid-write.ts";
import { clusterSuite } from "../helpers/cluster-suite.ts";
import { until } from "../helpers/wait.ts";

type Node = {
  uuid: string;
  provision_state: string;
  reservation: string | null;
  last_error: string | null;
  conductor: string | null;
};

const suite = clusterSuite("anvil-takeover-");
const { dir, children } = suite;

function conductorArgs(database: string, name: string, fakeDelayMs = 4000): string[] {
  return [
    ...["--db", database, "--name", name, "--data-dir", join(dir, name)],
    ...["--heartbeat-interval", "1", "--dead-after", "3", "--power-sync-interval", "0"],
    ...["--fake-delay-ms", String(fakeDelayMs)],
  ];
}

describe("takeover between conductor processes on one PostgreSQL", () => {
  it("SIGKILL one conductor mid-cleaning: its nodes get a live owner, fail cleanly, keep no dead lock", async () => {
    const database = await suite.pg.freshDatabase("takeover");
    const a = await spawnConductor(conductorArgs(database, "cond-a"));
    children.push(a.child);
    const b = await spawnConductor(conductorArgs(database, "cond-b"));
    children.push(b.child);

    const uuids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const created = await api(`${a.url}/v1/nodes`, {
        method: "POST",
        body: { name: `t-${i}`, driver: "fake-hardware" },
      });
      expect(created.status).toBe(201);
      uuids.push((created.body as Node).uuid);
    }
    // on PostgreSQL the state is written a round trip before the lock is released: a provide sent as soon
    // as "manageable" shows can be refused 409, so each node is released first
    await Promise.all(
      uuids.map(async (uuid) => {
        await provisionThrough(a.url, uuid, [["manage", "manageable"]]);
        await released(a.url, uuid);
      }),
    );
    // every provide is sent to conductor A; each runs on the conductor that holds the node's lock
    for (const uuid of uuids) {
      const put = await api(`${a.url}/v1/nodes/${uuid}/states/provision`, {
        method: "PUT",
        body: { target: "provide" },
      });
      expect(put.status).toBe(202);
    }
    const cleaning = await Promise.all(
      uuids.map(async (u) => (await api(`${b.url}/v1/nodes/${u}`)).body as Node),
    );
    const heldByA = cleaning.filter((n) => n.reservation?.startsWith("cond-a/")).map((n) => n.uuid);
    expect(heldByA.length).toBeGreaterThan(0);
    console.log(
      `takeover: ${heldByA.length} of ${uuids.length} nodes mid-cleaning under cond-a when it is killed`,
    );

    a.child.kill("SIGKILL");
    const killedAt = Date.now();

    // conductor B sees A dead and owns every node
    await until(
      async () => {
        const list = (
          (await api(`${b.url}/v1/conductors`)).body as {
            conductors: { hostname: string; alive: boolean; owned_nodes: number }[];
          }
        ).conductors;
        const deadA = list.find((c) => c.hostname === "cond-a")?.alive === false;
        return deadA && list.find((c) => c.hostname === "cond-b")?.owned_nodes === uuids.length
          ? true
          : undefined;
      },
      { what: "cond-a declared dead" },
    );
    // no node keeps a dead reservation; A's in-flight work failed with the reason, the rest finished
    const settled = await until(
      async () => {
        const nodes = await Promise.all(
          uuids.map(async (u) => (await api(`${b.url}/v1/nodes/${u}`)).body as Node),
        );
        return nodes.every((n) => n.reservation === null && n.provision_state !== "cleaning")
          ? nodes
          : undefined;
      },
      { what: "every node settled" },
    );
    console.log(`takeover: all settled ${Date.now() - killedAt} ms after SIGKILL (dead after 3 s)`);
    for (const node of settled) {
      expect(node.conductor).toBe("cond-b");
      if (heldByA.includes(node.uuid)) {
        expect(node.provision_state).toBe("clean failed");
        expect(node.last_error).toMatch(
          /Conductor cond-a stopped heartbeating while the node was in "cleaning"/,
        );
      } else {
        expect(node.provision_state).toBe("available");
      }
    }
    // and a taken-over node can be recovered through the new owner
    await provisionThrough(b.url, heldByA[0]!, [["manage", "manageable"]]);
    // two conductor starts (30 s each at most) and three waits of 60 s: room for a wait to name what it awaited
  }, 180_000);

  it("SIGKILL the conductor while the agent writes the image: the new owner gets the agent's result, and the image is written once", async () => {
    const database = await suite.pg.freshDatabase("takeover_agent_step");
    const a = await spawnConductor(conductorArgs(database, "step-a", 0));
    children.push(a.child);
    const b = await spawnConductor(conductorArgs(database, "step-b", 0));
    children.push(b.child);
    const ring = new HashRing(["step-a", "step-b"]);
    let uuid = randomUUID();
    while (ring.lookup(uuid, 1)[0] !== "step-a") uuid = randomUUID();

    const images = await startHttpImageServer();
    const node = await nodeCaughtMidWrite({ url: b.url, dir, images, mac: "52:54:00:0e:3e:01", uuid });
    node.boot([a.url, b.url]); // the list its owner wrote: the owner first
    try {
      const writing = await node.writing();

      a.child.kill("SIGKILL");
      node.resume(); // the agent finishes while its conductor is dead, and keeps the result until someone acks it
      const done = await until(
        async () => {
          const node = (await api(`${b.url}/v1/nodes/${uuid}`)).body as Node;
          return node.provision_state === "active" || node.provision_state === "deploy failed"
            ? node
            : undefined;
        },
        { what: "the deploy to finish through step-b" },
      );
      expect(done.last_error).toBeNull();
      expect(done.provision_state).toBe("active");
      expect(done.conductor).toBe("step-b");
      // and no lock is kept: on PostgreSQL "active" is written a round trip before the lock is released, so
      // the release is waited for (named if it never comes), not read off the same answer
      await released(b.url, uuid);
      // one transfer and one write: the new owner asked for the same command and got its result
      await node.expectWrittenOnce(writing);
    } finally {
      await node.stop();
      await images.close();
    }
  }, 180_000);
});
