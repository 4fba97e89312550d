// Hostile API clients (issue 11, classes 1, 4, 5 and the API parts of 9): every attack is refused with
// Ironic's envelope, the process stays healthy, and other nodes stay byte-for-byte unchanged.
import Database from "better-sqlite3";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STATEMENT_CACHE_SIZE, type SqliteStore } from "../../conductor/db/sqlite/sqlite-store.ts";
import { UNSHOWABLE } from "../../conductor/api/render.ts";
import { api, faultOf, provisionThrough, released, startConductor } from "../helpers/conductor.ts";
import { deepJson, hostileJson, hostilePatch, withSecret } from "../helpers/hostile.ts";
import { recordingLogger } from "../helpers/log.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;

const PROTO_NAMES = Object.getOwnPropertyNames(Object.prototype).sort();
const HEADERS = { "content-type": "application/json", "x-openstack-ironic-api-version": "1.78" };

let ctx: Ctx;
const logLines: string[] = [];
let target = ""; // the node attacks aim at
let bystander = ""; // a node nobody touches: it must never change
let targetPort = "";
let bystanderPort = "";

async function send(
  method: string,
  url: string,
  payload?: string,
): Promise<{ status: number; text: string; json: () => unknown }> {
  const response = await ctx.conductor.app.inject({
    method: method as "POST",
    url,
    headers: HEADERS,
    payload,
  });
  return { status: response.statusCode, text: response.body, json: () => response.json() };
}

/** The bystander node and its ports, as stored. */
async function bystanderText(): Promise<string> {
  const store = ctx.conductor.store;
  return JSON.stringify([
    await store.getNode(bystander),
    await store.listPorts({ node_uuid: bystander }, {}),
  ]);
}

/** Everything the database holds: a rejected request must leave it byte-identical. */
async function snapshot(): Promise<string> {
  const store = ctx.conductor.store;
  return JSON.stringify([
    await store.listNodes({}, {}),
    await store.listPorts({}, {}),
    await store.listAllocations({}, {}),
  ]);
}

/** The process is still itself: no prototype pollution, lists answer, the bystander is as it was. */
async function expectHealthy(bystanderBefore: string): Promise<void> {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTO_NAMES);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  const list = await send("GET", "/v1/nodes/detail");
  expect(list.status).toBe(200);
  expect((list.json() as { nodes: unknown[] }).nodes.length).toBeGreaterThanOrEqual(2);
  expect(await bystanderText()).toBe(bystanderBefore);
}

/** A strict body still validates (a polluted prototype made every one fail with "Unknown attribute(s)"). */
async function expectStrictBodiesWork(): Promise<void> {
  const created = await send("POST", "/v1/nodes", JSON.stringify({ driver: "fake-hardware", name: "probe" }));
  expect(created.status).toBe(201);
  expect((await send("DELETE", "/v1/nodes/probe")).status).toBe(204);
  const unknown = await send("POST", "/v1/nodes", JSON.stringify({ driver: "fake-hardware", colour: "red" }));
  expect(unknown.status).toBe(400);
  expect(faultOf(unknown.json())).toMatch(/colour/);
}

function expectRefused(
  response: { status: number; json: () => unknown },
  status: number,
  message: RegExp,
): void {
  expect(response.status).toBe(status);
  expect(faultOf(response.json())).toMatch(message);
}

beforeAll(async () => {
  ctx = await startConductor({}, { logger: recordingLogger(logLines) });
  const node = async (name: string): Promise<string> => {
    const created = await send(
      "POST",
      "/v1/nodes",
      JSON.stringify({
        name,
        driver: "fake-hardware",
        driver_info: { ipmi_password: "pw", redfish: { password: "deep-pw" } },
        extra: { rack: "r1", list: [1, { a: 2 }] },
      }),
    );
    expect(created.status).toBe(201);
    return (created.json() as { uuid: string }).uuid;
  };
  target = await node("target");
  bystander = await node("bystander");
  const port = async (nodeUuid: string, address: string): Promise<string> => {
    const created = await send("POST", "/v1/ports", JSON.stringify({ node_uuid: nodeUuid, address }));
    expect(created.status).toBe(201);
    return (created.json() as { uuid: string }).uuid;
  };
  targetPort = await port(target, "52:54:00:00:11:01");
  bystanderPort = await port(bystander, "52:54:00:00:11:02");
});
afterAll(async () => {
  await ctx.stop();
});

describe("class 1: nothing a client sends reaches Object.prototype", () => {
  it("refuses JSON Patch paths through __proto__, constructor and prototype on nodes, ports, allocations", async () => {
    const before = await bystanderText();
    const db = await snapshot();
    for (const path of [
      "/extra/__proto__/polluted",
      "/extra/a/__proto__/polluted",
      "/extra/constructor/prototype/polluted",
      "/driver_info/prototype",
      "/__proto__/polluted",
    ]) {
      for (const url of [`/v1/nodes/${target}`, `/v1/ports/${targetPort}`]) {
        const response = await send("PATCH", url, JSON.stringify([{ op: "add", path, value: "yes" }]));
        expect(response.status, `${url} ${path}`).toBe(400);
      }
    }
    expectRefused(
      await send(
        "PATCH",
        `/v1/nodes/${target}`,
        '[{"op":"add","path":"/extra/__proto__/polluted","value":1}]',
      ),
      400,
      /__proto__/,
    );
    expect(await snapshot()).toBe(db);
    await expectHealthy(before);
    await expectStrictBodiesWork();
  });

  it("refuses bodies that carry __proto__ or constructor.prototype anywhere", async () => {
    const before = await bystanderText();
    const db = await snapshot();
    const bodies: [string, string, string][] = [
      ["POST", "/v1/nodes", '{"driver":"fake-hardware","extra":{"__proto__":{"polluted":"yes"}}}'],
      [
        "POST",
        "/v1/nodes",
        '{"driver":"fake-hardware","extra":{"constructor":{"prototype":{"polluted":1}}}}',
      ],
      [
        "POST",
        "/v1/ports",
        `{"node_uuid":"${target}","address":"52:54:00:00:11:09","extra":{"__proto__":{"polluted":1}}}`,
      ],
      ["POST", "/v1/allocations", '{"resource_class":"x","extra":{"a":[{"__proto__":{"polluted":1}}]}}'],
      [
        "PATCH",
        `/v1/nodes/${target}`,
        '[{"op":"add","path":"/extra/x","value":{"__proto__":{"polluted":1}}}]',
      ],
      [
        "PUT",
        `/v1/nodes/${target}/states/provision`,
        '{"target":"manage","configdrive":{"meta_data":{"__proto__":{"polluted":1}}}}',
      ],
      ["PUT", `/v1/nodes/${target}/maintenance`, '{"__proto__":{"reason":"x"}}'],
    ];
    for (const [method, url, payload] of bodies) {
      const response = await send(method, url, payload);
      expect(response.status, `${method} ${url} ${payload}`).toBe(400);
      expect(faultOf(response.json())).toMatch(/prototype|forbidden|__proto__|constructor/i);
    }
    expect(await snapshot()).toBe(db);
    await expectHealthy(before);
    await expectStrictBodiesWork();
  });

  it("generated hostile PATCH documents on nodes, ports and allocations: 4xx, nothing polluted (property)", async () => {
    const before = await bystanderText();
    const statuses = new Map<number, number>();
    let tried = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(`/v1/nodes/${target}`, `/v1/ports/${targetPort}`, "/v1/allocations/none"),
        hostilePatch,
        async (url, payload) => {
          const db = await snapshot();
          const response = await send("PATCH", url, payload);
          tried++;
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          expect(response.status).toBeGreaterThanOrEqual(400);
          expect(response.status).toBeLessThan(500);
          expect(faultOf(response.json())).not.toBe("");
          expect(await snapshot()).toBe(db);
          await expectHealthy(before);
          await expectStrictBodiesWork();
        },
      ),
      { numRuns: 300, seed: 1101 },
    );
    console.log(`hostile PATCH: ${tried} tried, statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    await expectHealthy(before);
    await expectStrictBodiesWork();
  });
});

describe("class 4: distinct list queries do not grow the statement cache", () => {
  it("keeps the cache under its bound over thousands of distinct GETs", async () => {
    const store = ctx.conductor.store as SqliteStore;
    const states = ["enroll", "available", "active", "manageable"];
    let sent = 0;
    for (let i = 1; i <= 3000; i++) {
      const filters = [
        `limit=${i}`,
        i % 2 ? `provision_state=${states[i % 4]}` : "",
        i % 3 ? `maintenance=${i % 5 ? "true" : "false"}` : "",
        i % 7 ? "" : `owner=o${i}`,
        i % 11 ? "" : "sort_key=name&sort_dir=desc",
        i % 13 ? "" : `resource_class=rc${i}`,
      ].filter(Boolean);
      const path = ["/v1/nodes", "/v1/nodes/detail", "/v1/ports", "/v1/allocations"][i % 4] ?? "/v1/nodes";
      const query = path.startsWith("/v1/nodes") ? filters.join("&") : `limit=${i}`;
      const response = await send("GET", `${path}?${query}`);
      sent++;
      expect(response.status).toBe(200);
      expect(store.statementCacheSize).toBeLessThanOrEqual(STATEMENT_CACHE_SIZE);
    }
    console.log(`statement cache: ${sent} distinct GETs, ${store.statementCacheSize} statements cached`);
    await expectHealthy(await bystanderText());
  });
});

describe("class 5: depth and size limits", () => {
  it("refuses a deeply nested extra on create and patch, and an oversized body with 413", async () => {
    const before = await bystanderText();
    const db = await snapshot();
    expectRefused(
      await send("POST", "/v1/nodes", `{"driver":"fake-hardware","extra":${deepJson(4000)}}`),
      400,
      /nested more than 32 levels/,
    );
    expectRefused(
      await send(
        "PATCH",
        `/v1/nodes/${target}`,
        `[{"op":"add","path":"/extra/deep","value":${deepJson(4000)}}]`,
      ),
      400,
      /nested more than 32 levels/,
    );
    // 2 MiB: above the 1 MiB default (a 60 MB extra was accepted before)
    const huge = JSON.stringify({ driver: "fake-hardware", extra: { blob: "x".repeat(2 * 1024 * 1024) } });
    expectRefused(await send("POST", "/v1/nodes", huge), 413, /Request is too large/);
    // under the body limit, over the field limit
    const big = JSON.stringify({ driver: "fake-hardware", extra: { blob: "x".repeat(100 * 1024) } });
    expectRefused(await send("POST", "/v1/nodes", big), 400, /Field extra is \d+ bytes.*limit is 65536/);
    expectRefused(
      await send(
        "PATCH",
        `/v1/nodes/${target}`,
        JSON.stringify([{ op: "add", path: "/driver_info/blob", value: "y".repeat(70_000) }]),
      ),
      400,
      /Field driver_info/,
    );
    expect(await snapshot()).toBe(db);
    await expectHealthy(before);
  });

  it("checks the document after the patch: a deep path into a deep value is refused", async () => {
    const before = await bystanderText();
    const deep30 = JSON.parse(deepJson(30)) as unknown; // extra's depth becomes 31: allowed
    const first = await send(
      "PATCH",
      `/v1/nodes/${target}`,
      JSON.stringify([{ op: "add", path: "/extra/d", value: deep30 }]),
    );
    expect(first.status).toBe(200);
    const db = await snapshot();
    const path = "/extra/d" + "/k".repeat(29);
    const second = await send(
      "PATCH",
      `/v1/nodes/${target}`,
      JSON.stringify([{ op: "replace", path, value: { a: { b: { c: 1 } } } }]),
    );
    expectRefused(second, 400, /extra is nested more than 32/);
    expect(await snapshot()).toBe(db);
    expect((await send("PATCH", `/v1/nodes/${target}`, '[{"op":"remove","path":"/extra/d"}]')).status).toBe(
      200,
    );
    await expectHealthy(before);
  });

  it("lets the provision endpoint alone carry a body over the general limit (config drives)", async () => {
    const configdrive = "H4sI" + "A".repeat(2 * 1024 * 1024);
    const response = await send(
      "PUT",
      `/v1/nodes/${target}/states/provision`,
      JSON.stringify({ target: "active", configdrive }),
    );
    // not 413: the body is read and validated, and the verb is illegal in enroll
    expectRefused(response, 400, /can not be performed/);
  });

  it("a row stored before the limits never fails the fleet list, and can be repaired with PATCH", async () => {
    const before = await bystanderText();
    const created = await send(
      "POST",
      "/v1/nodes",
      JSON.stringify({ driver: "fake-hardware", name: "legacy" }),
    );
    const legacy = (created.json() as { uuid: string }).uuid;
    // what an older conductor stored: extra nested 100,000 levels (no JSON.stringify can write that back)
    const db = new Database(ctx.config.databasePath);
    const row = db.prepare("SELECT doc FROM nodes WHERE uuid = ?").get(legacy) as { doc: string };
    const doc = row.doc.replace('"extra":{}', `"extra":${deepJson(100_000)}`);
    db.prepare("UPDATE nodes SET doc = ? WHERE uuid = ?").run(doc, legacy);
    db.close();

    const detail = await send("GET", "/v1/nodes/detail");
    expect(detail.status).toBe(200);
    const shown = (detail.json() as { nodes: { uuid: string; extra: unknown; name: string }[] }).nodes;
    expect(shown.find((n) => n.uuid === legacy)?.extra).toEqual(UNSHOWABLE);
    expect(shown.find((n) => n.uuid === bystander)?.name).toBe("bystander");
    expect((await send("GET", "/v1/nodes")).status).toBe(200);
    const one = await send("GET", `/v1/nodes/${legacy}`);
    expect(one.status).toBe(200);
    expect((one.json() as { extra: unknown }).extra).toEqual(UNSHOWABLE);
    // below the top level it can't be patched (400, not 500); replaced whole, it heals
    expect(
      (await send("PATCH", `/v1/nodes/${legacy}`, '[{"op":"add","path":"/extra/k/x","value":1}]')).status,
    ).toBe(400);
    const repaired = await send("PATCH", `/v1/nodes/${legacy}`, '[{"op":"remove","path":"/extra"}]');
    expect(repaired.status).toBe(200);
    expect((repaired.json() as { extra: unknown }).extra).toEqual({});
    expect((await send("DELETE", `/v1/nodes/${legacy}`)).status).toBe(204);
    await expectHealthy(before);
  });
});

describe("class 9: secrets are masked at any depth wherever a node is shown", () => {
  it("never shows a nested secret in any answer, event or log line (property)", async () => {
    const events: string[] = [];
    const unsubscribe = ctx.conductor.events.subscribe((event) => events.push(JSON.stringify(event)));
    let tried = 0;
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 1e9 }).chain((n) =>
            fc.record({
              secret: fc.constant(`zq-secret-${n}-zq`),
              driverInfo: withSecret(`zq-secret-${n}-zq`),
              instanceInfo: withSecret(`zq-secret-${n}-zq`),
            }),
          ),
          async ({ secret, driverInfo, instanceInfo }) => {
            tried++;
            const answers: string[] = [];
            const created = await send(
              "POST",
              "/v1/nodes",
              JSON.stringify({
                driver: "fake-hardware",
                driver_info: driverInfo,
                instance_info: instanceInfo,
              }),
            );
            expect(created.status).toBe(201);
            const uuid = (created.json() as { uuid: string }).uuid;
            answers.push(created.text);
            answers.push((await send("GET", `/v1/nodes/${uuid}`)).text);
            answers.push((await send("GET", `/v1/nodes/${uuid}?fields=driver_info,instance_info`)).text);
            answers.push((await send("GET", "/v1/nodes/detail")).text);
            answers.push((await send("GET", "/v1/nodes?fields=uuid,driver_info,instance_info")).text);
            const patched = await send(
              "PATCH",
              `/v1/nodes/${uuid}`,
              JSON.stringify([{ op: "add", path: "/extra/probe", value: 1 }]),
            );
            expect(patched.status).toBe(200);
            answers.push(patched.text);
            // a client echoing the masked view back keeps the real secret
            const echoed = JSON.parse(answers[1] ?? "{}") as { driver_info: unknown };
            const replaced = await send(
              "PATCH",
              `/v1/nodes/${uuid}`,
              JSON.stringify([{ op: "replace", path: "/driver_info", value: echoed.driver_info }]),
            );
            expect(replaced.status).toBe(200);
            answers.push(replaced.text);
            expect(JSON.stringify((await ctx.conductor.store.getNode(uuid))?.driver_info)).toContain(secret);
            expect((await send("DELETE", `/v1/nodes/${uuid}`)).status).toBe(204);
            for (const text of [...answers, ...events, ...logLines]) expect(text).not.toContain(secret);
          },
        ),
        { numRuns: 40, seed: 909 },
      );
    } finally {
      unsubscribe();
    }
    console.log(
      `masking: ${tried} nodes with nested secrets, ${events.length} events, ${logLines.length} log lines checked`,
    );
  });
});

describe("every write endpoint against hostile shapes", () => {
  it("never answers 5xx, and rejected requests change nothing (property)", async () => {
    const before = await bystanderText();
    const writes: [string, string][] = [
      ["POST", "/v1/nodes"],
      ["PATCH", `/v1/nodes/${target}`],
      ["PUT", `/v1/nodes/${target}/states/provision`],
      ["PUT", `/v1/nodes/${target}/states/power`],
      ["PUT", `/v1/nodes/${target}/management/boot_device`],
      ["PUT", `/v1/nodes/${target}/traits`],
      ["PUT", `/v1/nodes/${target}/traits/__proto__`],
      ["PUT", `/v1/nodes/${target}/maintenance`],
      ["PUT", `/v1/nodes/${target}/states/console`],
      ["PUT", `/v1/nodes/${target}/management/indicators/led-0@system`],
      ["POST", "/v1/ports"],
      ["PATCH", `/v1/ports/${targetPort}`],
      ["POST", "/v1/allocations"],
      ["PATCH", "/v1/allocations/none"],
    ];
    const statuses = new Map<number, number>();
    let tried = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...writes),
        fc.oneof(hostileJson, hostilePatch),
        async ([method, url], payload) => {
          const db = await snapshot();
          const response = await send(method, url, payload);
          tried++;
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          expect(response.status, `${method} ${url} ${payload.slice(0, 200)}`).toBeLessThan(500);
          if (response.status >= 400) {
            expect(faultOf(response.json())).not.toBe("");
            expect(await snapshot()).toBe(db);
          }
          expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTO_NAMES);
          expect(await bystanderText()).toBe(before);
          await ctx.conductor.provisioner.settle();
        },
      ),
      { numRuns: 400, seed: 20261124 },
    );
    console.log(`hostile writes: ${tried} tried, statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    await expectHealthy(before);
    await expectStrictBodiesWork();
    expect((await ctx.conductor.store.getPort(bystanderPort))?.node_uuid).toBe(bystander);
  });
});

describe("the config drive is packed without stalling the API", () => {
  it("answers other requests while a 40 MB JSON config drive is built", async () => {
    const own = await startConductor();
    try {
      const created = await api(`${own.url}/v1/nodes`, {
        method: "POST",
        body: { driver: "fake-hardware", name: "cd" },
      });
      expect(created.status).toBe(201);
      await provisionThrough(own.url, "cd", [
        ["manage", "manageable"],
        ["provide", "available"],
      ]);
      await released(own.url, "cd"); // the deploy below needs the lock
      // incompressible user data: the gzip does all the work it can
      const userData = randomBytes(30 * 1024 * 1024).toString("base64");
      let settled = false;
      const deploy = api(`${own.url}/v1/nodes/cd/states/provision`, {
        method: "PUT",
        body: { target: "active", configdrive: { meta_data: { uuid: "x" }, user_data: userData } },
      }).finally(() => {
        settled = true;
      });
      let answered = 0;
      while (!settled) {
        const list = await api(`${own.url}/v1/nodes`);
        expect(list.status).toBe(200);
        if (!settled) answered++;
        await new Promise((resolve) => setTimeout(resolve, 5)); // pace the probe, leave the CPU to the build
      }
      expect((await deploy).status).toBe(202);
      console.log(`config drive: ${answered} list requests answered while the deploy request was in flight`);
      expect(answered).toBeGreaterThan(0);
    } finally {
      await own.stop();
    }
    // 40 MB through JSON parsing, genisoimage and gzip: minutes on a loaded two-core machine, not a goal
  }, 240_000);
});
