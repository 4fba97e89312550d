// The microversion tests' shared calls: headers for one version, fresh MACs, a node made at a version.
import { expect } from "vitest";
import { api } from "./conductor.ts";

export type Body = Record<string, unknown>;

export const at = (version: string): Record<string, string> => ({
  "X-OpenStack-Ironic-API-Version": version,
});

/**
 * Calls against one conductor: `nextMac` gives distinct MACs under the file's own prefix (its ports stay
 * apart from other files' in logs), `node` creates a fake-hardware node at a version and expects 201.
 */
export function microApi(url: () => string, macPrefix: string) {
  let macs = 0;
  return {
    nextMac: () => `${macPrefix}:${(macs++ % 256).toString(16).padStart(2, "0")}`,
    async node(version: string, fields: Body = {}): Promise<Body & { uuid: string }> {
      const made = await api(`${url()}/v1/nodes`, {
        method: "POST",
        headers: at(version),
        body: { driver: "fake-hardware", ...fields },
      });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      return made.body as Body & { uuid: string };
    },
  };
}
