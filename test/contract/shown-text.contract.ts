import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { shownRowsOf } from "../helpers/shown-rows.ts";
import type { Identity, Role } from "../../conductor/auth/identity.ts";
import { redactNodeView } from "../../conductor/auth/node-access.ts";
import { shownNodesJson, shownTextServes } from "../../conductor/api/node-shown-page.ts";
import { nodeView, type ViewContext } from "../../conductor/api/views.ts";
import { defaultConfig } from "../../conductor/config.ts";
import { defaultDrivers } from "../../conductor/drivers/registry.ts";
import { NEWEST_NODE_FORM_MINOR } from "../../conductor/db/node-shown.ts";
import { MAX_VERSION } from "../../conductor/api/microversion.ts";
import type { NodeFilter, Store } from "../../conductor/db/store.ts";
import { newNode } from "../../conductor/operations/node-record.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { PROVISION_STATES } from "../../shared/states.ts";
import { useStores, type StoreHarness } from "./harness.ts";

const fake = defaultDrivers(defaultConfig()).get("fake-hardware")!;

/** Text no database refuses (PostgreSQL's jsonb has no \u0000), escapes and non-ASCII included. */
const text = fc
  .string({
    unit: fc.constantFrom("a", "Z", "0", " ", '"', "\\", "/", "é", "\u2028", "😀", "\n", ":", "@", "?"),
  })
  // cut by code points: half a surrogate pair is text no store keeps (the API refuses it: api-unstorable-text)
  .map((s) => Array.from(s).slice(0, 12).join(""));
/** Keys masking looks at (secret-like at any depth), keys it leaves, keys that need escaping. */
const key = fc.constantFrom(
  ...["ipmi_password", "ipmi_address", "token", "auth_key", "key", "deploy_kernel", "image_url", "x"],
  ...['a"b', "é", "configdrive", "Secret", "ssh_key"],
);
/** URLs with credentials and signatures in them, and plain ones. */
const url = fc.constantFrom(
  "http://user:pw@10.0.0.1/img",
  "https://h/o?temp_url_sig=abc&temp_url_expires=1",
  "http://h/plain",
  "swift://tok@h/x",
);
const leaf = fc.oneof(
  text,
  url,
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
);
const json: fc.Arbitrary<Record<string, unknown>> = fc.letrec<{
  object: Record<string, unknown>;
  value: unknown;
}>((tie) => ({
  object: fc.dictionary(key, tie("value"), { maxKeys: 4 }),
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    tie("object"),
    fc.array(tie("value"), { maxLength: 3 }),
  ),
})).object;

const owners = fc.constantFrom<string | null>(null, "A", "B");

/** Fields a document written before them lacks (the view shows their defaults). */
const LATER = [
  "parent_node",
  "firmware_interface",
  "service_step",
  "disable_power_off",
  "instance_name",
  "health",
];

const patch = fc.record(
  {
    driver_info: json,
    driver_internal_info: json,
    instance_info: json,
    extra: json,
    properties: json,
    last_error: fc.option(text),
    description: fc.option(text),
    provision_state: fc.constantFrom(...PROVISION_STATES),
    target_provision_state: fc.option(fc.constantFrom("active", "available")),
    power_state: fc.constantFrom("power on", "power off", null),
    maintenance: fc.boolean(),
    owner: owners,
    lessee: owners,
    traits: fc.array(fc.constantFrom("CUSTOM_A", "CUSTOM_B", "HW_CPU_X86_VMX"), { maxLength: 3 }),
    disable_power_off: fc.constantFrom(true, false, null),
    health: fc.constantFrom("OK", "Warning", null),
  },
  { requiredKeys: [] },
);

/** One write through a store write path. */
const write = fc.oneof(
  fc.record({ kind: fc.constant("update" as const), patch }),
  fc.record({ kind: fc.constant("reserve" as const), holder: fc.constantFrom("c1", "c2") }),
  fc.record({ kind: fc.constant("release" as const), holder: fc.constantFrom("c1", "c2") }),
  fc.record({
    kind: fc.constant("internal" as const),
    // the keys flows write (code's, never a client's): plain names
    changes: fc.dictionary(fc.constantFrom("agent_url", "agent_secret_token", "clean_steps", "x"), json, {
      maxKeys: 3,
    }),
  }),
  fc.record({ kind: fc.constant("progress" as const), progress: fc.option(json) }),
  fc.record({ kind: fc.constant("claim" as const) }),
  fc.record({ kind: fc.constant("release-all" as const), holder: fc.constantFrom("c1", "c2") }),
);

const fleet = fc.array(
  fc.record({
    fields: patch,
    /** a document stored before the later fields (their keys absent) */
    old: fc.boolean(),
    writes: fc.array(fc.record({ write, bySecond: fc.boolean() }), { maxLength: 4 }),
  }),
  { minLength: 1, maxLength: 4 },
);

const who = (role: Role | null, project: string | null): Identity => ({
  user: "u",
  role,
  project,
  method: "http_basic",
});
const callers = fc.constantFrom(
  who("admin", null),
  who("reader", null),
  who("admin", "A"),
  who("member", "A"),
  who("reader", "B"),
  who("member", "B"),
  who("member", "C"),
);

async function apply(store: Store, uuid: string, w: WriteOf): Promise<void> {
  switch (w.kind) {
    case "update":
      await store.updateNode(uuid, w.patch as Partial<NodeRecord>);
      return;
    case "reserve":
      await store.reserveNode(uuid, w.holder).catch(() => undefined);
      return;
    case "release":
      await store.releaseNode(uuid, w.holder);
      return;
    case "release-all":
      await store.releaseAllReservations(w.holder);
      return;
    case "internal":
      await store.updateDriverInternalInfo(uuid, w.changes);
      return;
    case "progress":
      await store.setDeployProgress(uuid, w.progress);
      return;
    case "claim": {
      const request = { resourceClass: null, traits: [], candidateNodes: [uuid], spec: null };
      await store.claimNode(randomUUID(), request);
      return;
    }
  }
}
type WriteOf = typeof write extends fc.Arbitrary<infer W> ? W : never;

/**
 * GET /v1/nodes/detail from the stored shown texts (node-shown-page.ts) against the view path (nodeView +
 * redactNodeView over the documents): after writes through every store write path, from both conductors'
 * connections, for every caller and microversion, the two are the same nodes, member for member.
 */
export function shownTextContract(name: string, harness: StoreHarness): void {
  describe(`Node shown texts: ${name}`, () => {
    let store: Store;
    let second: Store | undefined;
    useStores(harness, (opened, other) => {
      store = opened;
      second = other;
    });

    it("property: a detail page from the shown texts equals the view path's, after any writes", async () => {
      let runs = 0;
      let compared = 0;
      await fc.assert(
        fc.asyncProperty(
          fleet,
          fc.array(
            fc.record({
              caller: callers,
              minor: fc.oneof(
                fc.integer({ min: 1, max: MAX_VERSION }),
                fc.constantFrom(NEWEST_NODE_FORM_MINOR, MAX_VERSION),
                fc.constantFrom(NEWEST_NODE_FORM_MINOR, MAX_VERSION),
              ),
              base: fc.constantFrom("http://127.0.0.1:6385", 'http://h:1/p"\\é'),
            }),
            { minLength: 1, maxLength: 4 },
          ),
          async (nodes, reads) => {
            const group = `shown-${runs++}-${randomUUID().slice(0, 8)}`;
            const filter: NodeFilter = { conductor_group: group };
            for (const made of nodes) {
              const record: NodeRecord = {
                ...newNode({ driver: "fake-hardware" }, fake),
                ...(made.fields as Partial<NodeRecord>),
                conductor_group: group,
              };
              if (made.old) for (const field of LATER) delete (record as Record<string, unknown>)[field];
              await store.createNode(record);
              for (const { write: w, bySecond } of made.writes)
                await apply(bySecond && second ? second : store, record.uuid, w);
            }
            const stored = await store.listNodes(filter, {});
            const shown = await shownRowsOf(store, filter);
            // every node was written through the store: each has its text
            expect(shown).not.toBeNull();
            expect(shown!.map((row) => row.uuid)).toEqual(stored.map((node) => node.uuid));
            for (const read of reads) {
              const ctx: ViewContext = {
                minor: read.minor,
                baseUrl: read.base,
                conductorOf: (node) =>
                  node.conductor_group.endsWith("0") ? null : `c-${node.uuid.slice(0, 4)}`,
              };
              if (!shownTextServes(read.minor)) {
                expect(read.minor).toBeLessThan(NEWEST_NODE_FORM_MINOR);
                continue;
              }
              const views = stored.map((node) =>
                redactNodeView(nodeView(node, ctx, { detail: true }), read.caller, node),
              );
              const page = JSON.parse(shownNodesJson(shown!, ctx, read.caller).toString("utf8")) as Record<
                string,
                unknown
              >[];
              const expected = JSON.parse(JSON.stringify(views)) as Record<string, unknown>[];
              expect(page).toEqual(expected);
              // the members come in the view's order (nested objects may come in the database's: jsonb)
              expect(page.map((object) => Object.keys(object))).toEqual(expected.map((o) => Object.keys(o)));
              compared++;
            }
          },
        ),
        { numRuns: 40 },
      );
      console.log(`shown texts (${name}): ${runs} generated fleets, ${compared} pages compared`);
      expect(compared).toBeGreaterThan(0);
    });
  });
}
