import bcrypt from "bcryptjs";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { HttpBasicAuthenticator } from "../../conductor/auth/authenticator.ts";
import { MemoryTokenStore, TokenService } from "../../conductor/auth/tokens.ts";
import { UserStore } from "../../conductor/auth/user-store.ts";
import { silentLogger } from "../../shared/log.ts";
import { basic, htpasswdLine } from "../helpers/auth.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-lockout-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function authenticator(lines: string[], maxFailures: number): HttpBasicAuthenticator {
  const userFile = join(dir, `htpasswd-${Math.random().toString(36).slice(2)}`);
  writeFileSync(userFile, lines.join("\n") + "\n");
  return new HttpBasicAuthenticator({
    users: new UserStore({ userFile, rolesFile: null }),
    tokens: new TokenService({ store: new MemoryTokenStore(), ttlS: 60 }),
    logger: silentLogger,
    cacheTtlMs: 0,
    maxFailures,
    failureWindowMs: 300_000,
  });
}
const login = (auth: HttpBasicAuthenticator, who: { user: string; password: string; source: string }) =>
  auth
    .authenticate({ authorization: basic(who.user, who.password).Authorization, source: who.source })
    .then((r) => (r.ok ? 200 : r.status));

describe("failed-login limits", () => {
  it("failures from one address do not lock the user out from another", async () => {
    const auth = authenticator([htpasswdLine("victim", "right")], 3);
    const stranger = { user: "victim", password: "guess", source: "192.0.2.66" };
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push(await login(auth, stranger));
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    expect(await login(auth, { user: "victim", password: "right", source: "198.51.100.7" })).toBe(200);
    // and the stranger's address stays limited even with the right password
    expect(await login(auth, { ...stranger, password: "right" })).toBe(429);
  });

  it("one address trying many names is limited across names", async () => {
    const auth = authenticator([htpasswdLine("alice", "right")], 3);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++)
      statuses.push(await login(auth, { user: `name-${i}`, password: "x", source: "192.0.2.9" }));
    // 3 tries per user times 5 per source: the 16th name is refused without a bcrypt
    expect(statuses.slice(0, 15).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(15)).toEqual([429, 429, 429, 429, 429]);
    expect(await login(auth, { user: "alice", password: "right", source: "192.0.2.10" })).toBe(200);
  });

  it("one name tried from many addresses meets a global ceiling", async () => {
    const auth = authenticator([htpasswdLine("bob", "right")], 1);
    const statuses: number[] = [];
    for (let i = 0; i < 22; i++)
      statuses.push(await login(auth, { user: "bob", password: "x", source: `203.0.113.${i}` }));
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(20)).toEqual([429, 429]);
  });
});

describe("unknown user names cost as much as the strongest entry", () => {
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

  it("unknown and existing cost-12 users answer within 20 % of each other", async () => {
    const digest = `$2y$${bcrypt.hashSync("right", 12).slice(4)}`;
    const auth = authenticator([htpasswdLine("fast", "x"), `slow:${digest}`], 1000);
    // the first unknown name makes the dummy digest; measure after it
    await login(auth, { user: "warm-up", password: "x", source: "192.0.2.1" });
    // NOTE: CPU time, not wall time: bcrypt's cost is CPU work on this thread, and the machine is shared, so
    // other processes' load moves wall time but not what this process spends on one answer
    const timed = async (user: string, i: number): Promise<number> => {
      const started = process.cpuUsage();
      expect(await login(auth, { user, password: `wrong-${i}`, source: "192.0.2.1" })).toBe(401);
      const spent = process.cpuUsage(started);
      return (spent.user + spent.system) / 1e3;
    };
    // each ratio compares two neighbouring tries, in alternating order; the median ratio is asserted
    const ratios: number[] = [];
    for (let i = 0; i < 6; i++) {
      const first = i % 2 === 0 ? `ghost-${i}` : "slow";
      const a = await timed(first, i);
      const b = await timed(first === "slow" ? `ghost-${i}` : "slow", i);
      ratios.push(first === "slow" ? b / a : a / b);
    }
    const ratio = median(ratios);
    expect(ratio, `unknown/existing ratios ${ratios.map((r) => r.toFixed(2)).join(", ")}`).toBeGreaterThan(
      0.8,
    );
    expect(ratio, `unknown/existing ratios ${ratios.map((r) => r.toFixed(2)).join(", ")}`).toBeLessThan(1.2);
  }, 60_000);
});
