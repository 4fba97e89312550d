// Ironic starts the consoles that are enabled when a conductor starts: the new conductor's scan finds them in
// the database (only the enabled ones are read) and runs their sessions again.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { api, startConductor } from "../helpers/conductor.ts";
import { waitFor } from "../helpers/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-console-resume-"));
const databasePath = join(dir, "shared.sqlite");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("console sessions at conductor start", () => {
  it("a console enabled before the conductor stopped runs again on the next one, the others stay off", async () => {
    const first = await startConductor({ databasePath });
    const names = ["resume-a", "resume-b", "resume-c"];
    for (const name of names) {
      const created = await api(`${first.url}/v1/nodes`, {
        method: "POST",
        body: { name, driver: "fake-hardware" },
      });
      expect(created.status).toBe(201);
    }
    const put = await api(`${first.url}/v1/nodes/resume-b/states/console`, {
      method: "PUT",
      body: { enabled: true },
    });
    expect(put.status).toBe(202);
    await waitFor(async () => {
      const states = await api(`${first.url}/v1/nodes/resume-b/states`);
      return (states.body as { console_enabled: boolean }).console_enabled;
    });
    await first.stop();

    const second = await startConductor({ databasePath });
    try {
      for (const name of ["resume-a", "resume-c"]) {
        const state = await api(`${second.url}/v1/nodes/${name}/states/console`);
        expect(state.body).toMatchObject({ console_enabled: false, console_info: null });
      }
      const info = await api(`${second.url}/v1/nodes/resume-b/states/console`);
      const body = info.body as { console_enabled: boolean; console_info: { url: string } };
      expect(body.console_enabled).toBe(true);
      const ws = new WebSocket(body.console_info.url);
      const got: Buffer[] = [];
      ws.on("message", (data: Buffer) => got.push(data));
      await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
      await waitFor(() => Buffer.concat(got).toString().includes("resume-b login: "));
      ws.close();
    } finally {
      await second.stop();
    }
  });
});
