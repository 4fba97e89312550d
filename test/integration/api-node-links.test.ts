import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";

const USERS: TestUser[] = [
  { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
  { name: "a-admin", password: "pw-a-admin", role: "admin", project: "A" },
  { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
  { name: "b-admin", password: "pw-b-admin", role: "admin", project: "B" },
];
type User = "sysadmin" | "a-admin" | "a-member" | "b-admin";
const MISSING = "00000000-0000-4000-8000-00000000dead";

const dir = mkdtempSync(join(tmpdir(), "anvil-links-"));
const files = writeUserFiles(dir, USERS);
let ctx: Awaited<ReturnType<typeof startConductor>>;
const uuid: Record<string, string> = {};
let portA = "";

const as = (user: User, path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, { ...init, headers: basic(user, `pw-${user}`) });
const movePort = (user: User, to: string) =>
  as(user, `/v1/ports/${portA}`, {
    method: "PATCH",
    body: [{ op: "replace", path: "/node_uuid", value: to }],
  });
/** The answer with the node's identifier replaced, to compare answers for two different nodes. */
const shape = (r: { status: number; body: unknown }, ident: string) => ({
  status: r.status,
  body: JSON.stringify(r.body).split(ident).join("<node>"),
});

beforeAll(async () => {
  ctx = await startConductor({
    auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
  });
  for (const [name, owner] of [
    ["nA1", "A"],
    ["nA2", "A"],
    ["nB", "B"],
  ] as const) {
    const r = await as("sysadmin", "/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name, owner, resource_class: "links" },
    });
    uuid[name] = (r.body as { uuid: string }).uuid;
  }
  const p = await as("a-admin", "/v1/ports", {
    method: "POST",
    body: { address: "52:54:00:cc:00:01", node_uuid: uuid.nA1 },
  });
  expect(p.status).toBe(201);
  portA = (p.body as { uuid: string }).uuid;
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("policy holds on every node a request touches", () => {
  it("an owner admin cannot move its port onto another project's node", async () => {
    const r = await movePort("a-admin", uuid.nB!);
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe(
      `Unable to apply the requested node_uuid '${uuid.nB}'. Requested value was invalid.`,
    );
    // the same answer as for a node that does not exist
    expect(shape(r, uuid.nB!)).toEqual(shape(await movePort("a-admin", MISSING), MISSING));
    const port = await as("sysadmin", `/v1/ports/${portA}`);
    expect((port.body as { node_uuid: string }).node_uuid).toBe(uuid.nA1);
  });

  it("a move within the project is allowed", async () => {
    const r = await movePort("a-admin", uuid.nA2!);
    expect(r.status).toBe(200);
    expect((r.body as { node_uuid: string }).node_uuid).toBe(uuid.nA2);
    expect((await movePort("a-admin", uuid.nA1!)).status).toBe(200);
  });

  it("a member, who may not update ports, is refused before any move", async () => {
    expect((await movePort("a-member", uuid.nA2!)).status).toBe(403);
  });

  it("?node= of another project's node answers as a missing node (ports and allocations)", async () => {
    for (const path of ["/v1/ports", "/v1/ports/detail", "/v1/allocations"]) {
      const other = await as("b-admin", `${path}?node=${uuid.nA1}`);
      const missing = await as("b-admin", `${path}?node=${MISSING}`);
      expect(other.status).toBe(404);
      expect(shape(other, uuid.nA1!)).toEqual(shape(missing, MISSING));
      expect((await as("a-admin", `${path}?node=${uuid.nA1}`)).status).toBe(200);
      expect((await as("sysadmin", `${path}?node=${uuid.nA1}`)).status).toBe(200);
    }
  });

  it("an allocation naming another project's node answers as for a missing node", async () => {
    const create = (node: string) =>
      as("a-member", "/v1/allocations", { method: "POST", body: { resource_class: "links", node } });
    const other = await create(uuid.nB!);
    expect(other.status).toBe(400);
    expect(shape(other, uuid.nB!)).toEqual(shape(await create(MISSING), MISSING));
    const candidates = await as("a-member", "/v1/allocations", {
      method: "POST",
      body: { resource_class: "links", candidate_nodes: [uuid.nA2, uuid.nB] },
    });
    expect(candidates.status).toBe(400);
    expect(faultOf(candidates.body)).toBe(`Nodes cannot be found: ${uuid.nB}`);
  });
});
