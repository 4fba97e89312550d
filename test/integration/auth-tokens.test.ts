import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../shared/log.ts";
import { basic, htpasswdLine, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { api, startConductor } from "../helpers/conductor.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-tokens-"));
const USERS: TestUser[] = [
  { name: "admin", password: "admin-pass", role: "admin" },
  { name: "rotates", password: "old-pass", role: "reader" },
  { name: "demoted", password: "demoted-pass", role: "admin" },
  { name: "leaves", password: "leaves-pass", role: "reader" },
  { name: "stays", password: "stays-pass", role: "reader" },
];
let ctx: Awaited<ReturnType<typeof startConductor>>;

beforeAll(async () => {
  writeUserFiles(dir, USERS);
  ctx = await startConductor(
    { auth: { auth_strategy: "http_basic", http_basic_auth_user_file: join(dir, "htpasswd") } },
    { logger: silentLogger },
  );
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function tokenOf(user: TestUser): Promise<Record<string, string>> {
  const issued = await api(`${ctx.url}/v1/auth/tokens`, {
    method: "POST",
    headers: basic(user.name, user.password),
  });
  expect(issued.status).toBe(201);
  return { Authorization: `Bearer ${(issued.body as { token: string }).token}` };
}

/**
 * Rewrites the user files (the entries of users named in `keep` byte for byte), then waits for the
 * once-a-second stat to see them.
 */
async function rewrite(users: TestUser[], keep: string[]): Promise<void> {
  const old = readFileSync(join(dir, "htpasswd"), "utf8").split("\n");
  writeUserFiles(dir, users);
  const lines = users.map((u) =>
    keep.includes(u.name) ? old.find((l) => l.startsWith(`${u.name}:`))! : htpasswdLine(u.name, u.password),
  );
  writeFileSync(join(dir, "htpasswd"), lines.join("\n") + "\n");
  await new Promise((r) => setTimeout(r, 1100));
}

describe("tokens follow their users' entries", () => {
  it("a token dies when its user's password, role or existence changes; others' live on", async () => {
    const [admin, rotates, demoted, leaves, stays] = USERS as [TestUser, ...TestUser[]] as TestUser[];
    const held = new Map<string, Record<string, string>>();
    for (const user of [rotates!, demoted!, leaves!, stays!]) held.set(user.name, await tokenOf(user));
    for (const [name, headers] of held)
      expect((await api(`${ctx.url}/v1/nodes`, { headers })).status, name).toBe(200);

    await rewrite(
      [
        admin!,
        { ...rotates!, password: "new-pass" },
        { ...demoted!, role: "reader" },
        // leaves: gone from both files
        stays!,
      ],
      ["admin", "demoted", "stays"],
    );
    for (const name of ["rotates", "demoted", "leaves"])
      expect((await api(`${ctx.url}/v1/nodes`, { headers: held.get(name) })).status, name).toBe(401);
    expect((await api(`${ctx.url}/v1/nodes`, { headers: held.get("stays") })).status).toBe(200);
    // the new password gets a working token again
    const fresh = await tokenOf({ ...rotates!, password: "new-pass" });
    expect((await api(`${ctx.url}/v1/nodes`, { headers: fresh })).status).toBe(200);
  });

  it("an admin lists every user's tokens and revokes another's; a reader sees only their own", async () => {
    const admin = USERS[0]!;
    const stays = USERS[4]!;
    const adminToken = await tokenOf(admin);
    const readerToken = await tokenOf(stays);
    const all = (await api(`${ctx.url}/v1/auth/tokens`, { headers: adminToken })).body as {
      tokens: { id: string; user: string }[];
    };
    expect(all.tokens.map((t) => t.user)).toEqual(expect.arrayContaining(["admin", "stays"]));
    const own = (await api(`${ctx.url}/v1/auth/tokens`, { headers: readerToken })).body as {
      tokens: { id: string; user: string }[];
    };
    expect(own.tokens.every((t) => t.user === "stays")).toBe(true);
    const adminsId = all.tokens.find((t) => t.user === "admin")!.id;
    // a reader cannot see or revoke another user's token
    expect(
      (await api(`${ctx.url}/v1/auth/tokens/${adminsId}`, { method: "DELETE", headers: readerToken })).status,
    ).toBe(404);
    for (const t of all.tokens.filter((t) => t.user === "stays"))
      expect(
        (await api(`${ctx.url}/v1/auth/tokens/${t.id}`, { method: "DELETE", headers: adminToken })).status,
      ).toBe(204);
    expect((await api(`${ctx.url}/v1/nodes`, { headers: readerToken })).status).toBe(401);
  });
});
