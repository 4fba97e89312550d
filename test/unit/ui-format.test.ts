import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deployFigures } from "../../ui/format.ts";

const MiB = 1024 * 1024;
const swarm = {
  wave: "w1",
  chunk_bytes: 4 * MiB,
  bytes_from_store: 96 * MiB,
  bytes_from_peers: 32 * MiB,
  per_peer: { "aaaaaaaa-1111": 8 * MiB, "bbbbbbbb-2222": 24 * MiB },
  bytes_served: 64 * MiB,
  bad_chunks: 1,
  dropped_peers: { "cccccccc-3333": "bad chunk" },
};

describe("the dashboard's last-deploy figures", () => {
  it("shows size, time and rate of a plain write, and no swarm rows", () => {
    const rows = new Map(
      deployFigures({ image_bytes: 128 * MiB, bytes_written: 64 * MiB, duration_ms: 4000 }),
    );
    expect(rows.get("image")).toBe("128 MiB");
    expect(rows.get("written")).toBe("64.0 MiB");
    expect(rows.get("took")).toBe("4 s");
    expect(rows.get("rate")).toBe("32.0 MiB/s");
    expect(rows.has("from peers")).toBe(false);
  });

  it("splits a swarm deploy's bytes between the store and each peer, biggest first", () => {
    const rows = deployFigures({ image_bytes: 128 * MiB, duration_ms: 1000, swarm });
    const shown = new Map(rows);
    expect(shown.get("from the store")).toBe("96.0 MiB (75 %)");
    expect(shown.get("from peers")).toBe("32.0 MiB (25 %)");
    const peers = rows.filter(([label]) => label.startsWith("  peer "));
    expect(peers).toEqual([
      ["  peer bbbbbbbb", "24.0 MiB"],
      ["  peer aaaaaaaa", "8.0 MiB"],
    ]);
    expect(shown.get("bad chunks refetched")).toBe("1");
    expect(shown.get("dropped cccccccc")).toBe("bad chunk");
  });

  it("counts the peers beyond the five it names", () => {
    const per_peer = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`peer-${i}`, (i + 1) * MiB]));
    const rows = deployFigures({ swarm: { ...swarm, per_peer } });
    expect(rows.filter(([label]) => label.startsWith("  peer "))).toHaveLength(5);
    expect(new Map(rows).get("  other peers")).toBe("3");
  });

  it("never throws on whatever driver_internal_info holds", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const rows = deployFigures(value);
        expect(Array.isArray(rows)).toBe(true);
      }),
    );
    // shaped like a result, with any value in any field
    const anyFields = (keys: string[]) =>
      fc.record(Object.fromEntries(keys.map((k) => [k, fc.jsonValue()])), { requiredKeys: [] });
    fc.assert(
      fc.property(
        fc.record({
          image_bytes: fc.jsonValue(),
          duration_ms: fc.jsonValue(),
          swarm: anyFields(Object.keys(swarm)),
        }),
        (value) => {
          for (const [label, shown] of deployFigures(value)) {
            expect(typeof shown).toBe("string");
            // rows that show a figure are computed, never copied from the input: no NaN or "undefined"
            if (!label.startsWith("dropped") && label !== "swarm stopped")
              expect(shown).toMatch(/^\d[\d.e+]* (B|KiB|MiB|GiB|TiB|s|min|h)\b|^\d+$/);
          }
        },
      ),
    );
    expect(deployFigures(undefined)).toEqual([]);
    expect(deployFigures("text")).toEqual([]);
  });
});
