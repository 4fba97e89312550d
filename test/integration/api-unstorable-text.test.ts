// Text no database can keep (a NUL, half a surrogate pair) arrives only as a JSON escape; PostgreSQL refuses
// it with an error deep in the store. Anvil refuses it at the door with a 400, on both databases alike, and
// the rest of the body's text, emoji included, goes through whole.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../shared/log.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";

type Ctx = Awaited<ReturnType<typeof startConductor>>;
let pg: ThrowawayPostgres;
const conductors: [string, Ctx][] = [];

beforeAll(async () => {
  pg = await startPostgres();
  conductors.push(["SQLite", await startConductor({}, { logger: silentLogger })]);
  const database = await pg.freshDatabase("unstorable");
  conductors.push(["PostgreSQL", await startConductor({ databasePath: database }, { logger: silentLogger })]);
}, 120_000);

afterAll(async () => {
  for (const [, ctx] of conductors) await ctx.stop();
  await pg?.stop();
});

/** A JSON text with `escape` (as written on the wire) inside one string or key of a node create body. */
const bodies = (escape: string, n: number): string[] => [
  `{"driver":"fake-hardware","name":"u-${n}","description":"a${escape}b"}`,
  `{"driver":"fake-hardware","name":"u-${n}","extra":{"k${escape}":1}}`,
  `{"driver":"fake-hardware","name":"u-${n}","properties":{"a":[1,{"b":"${escape}"}]}}`,
];

describe.each([0, 1])("text no database stores, refused at the door", (index) => {
  it("a NUL or a lone surrogate anywhere in the body is a 400, and no node is made", async () => {
    const [, ctx] = conductors[index]!;
    let n = 0;
    for (const escape of ["\\u0000", "\\ud83d", "\\uDE00", "x\\ud83dy", "\\ude00\\ud83d"]) {
      for (const raw of bodies(escape, ++n)) {
        const answer = await api(`${ctx.url}/v1/nodes`, { method: "POST", raw });
        expect(answer.status, `${conductors[index]![0]}: ${raw}`).toBe(400);
        const fault = JSON.parse((answer.body as { error_message: string }).error_message) as {
          faultstring: string;
        };
        expect(fault.faultstring).toMatch(/NUL character .* lone UTF-16 surrogate/);
        expect((await api(`${ctx.url}/v1/nodes/u-${n}`)).status).toBe(404);
      }
    }
    // the same in a PATCH: refused, the node unchanged
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { driver: "fake-hardware", name: "kept" },
    });
    expect(made.status).toBe(201);
    const patched = await api(`${ctx.url}/v1/nodes/kept`, {
      method: "PATCH",
      raw: '[{"op":"add","path":"/description","value":"\\ud83d"}]',
    });
    expect(patched.status).toBe(400);
    expect(((await api(`${ctx.url}/v1/nodes/kept`)).body as { description: unknown }).description).toBeNull();
  });

  it("whole pairs, escaped or not, and any well-formed text are stored as sent (property)", async () => {
    const [, ctx] = conductors[index]!;
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: "grapheme", maxLength: 24 }).filter((s) => !s.includes("\u0000")),
        async (description) => {
          const name = `w-${index}-${++n}`;
          // JSON.stringify writes emoji raw; the escaped form of one pair must pass too
          const raw = JSON.stringify({ driver: "fake-hardware", name, description }).replace(
            /[\uD800-\uDBFF][\uDC00-\uDFFF]/g,
            (pair) => `\\u${pair.charCodeAt(0).toString(16)}\\u${pair.charCodeAt(1).toString(16)}`,
          );
          const answer = await api(`${ctx.url}/v1/nodes`, { method: "POST", raw });
          expect(answer.status).toBe(201);
          expect((answer.body as { description: string }).description).toBe(description);
        },
      ),
      { numRuns: 60 },
    );
  });
});
