import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeLabCa } from "../../conductor/tls/lab-ca.ts";
import { startConductor } from "../helpers/conductor.ts";
import { waitFor } from "../helpers/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-tls-mode-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a cluster keeps one TLS mode", () => {
  it("a plain conductor under a dead TLS member's name is refused; a plain member is never an owner", async () => {
    const ca = await makeLabCa({ dir: join(dir, "ca"), names: ["127.0.0.1"] });
    const tls = { cert: ca.cert, key: ca.key, ca: ca.caCert };
    const databasePath = join(dir, "cluster.sqlite");
    const cluster = { heartbeatIntervalS: 0.3, deadAfterS: 1.5 };
    const a = await startConductor({ name: "tl-a", databasePath, cluster, tls });
    try {
      const b = await startConductor({ name: "tl-b", databasePath, cluster, tls });
      expect(b.url).toMatch(/^https:/);
      await b.stop();
      await expect(startConductor({ name: "tl-b", databasePath, cluster })).rejects.toThrow(
        /serves http but the cluster's live members tl-a \(https:.*refusing to join/,
      );
      // one that got in anyway (registered by hand, heartbeating, with a plain URL) owns nothing here
      const identity = `tl-plain/${randomUUID().slice(0, 8)}`;
      const { store, membership } = a.conductor;
      await store.registerConductor(
        {
          identity,
          hostname: "tl-plain",
          conductor_group: "",
          drivers: ["fake-hardware"],
          url: "http://127.0.0.1:1",
          machine: "test",
          pid: 1,
          created_at: new Date().toISOString(),
          heartbeat_at: Date.now(),
          online: true,
        },
        { staleBefore: 0, retire: [] },
      );
      const beat = setInterval(() => void store.touchConductor(identity, Date.now()), 200);
      try {
        await waitFor(() => membership.alive().some((r) => r.hostname === "tl-plain"), {
          what: "the plain member to be seen alive",
        });
        const owners = new Set(
          Array.from(
            { length: 200 },
            () => membership.ownerOf({ uuid: randomUUID(), conductor_group: "" })?.hostname,
          ),
        );
        expect(owners).toEqual(new Set(["tl-a"]));
      } finally {
        clearInterval(beat);
      }
    } finally {
      await a.stop();
    }
  });
});
