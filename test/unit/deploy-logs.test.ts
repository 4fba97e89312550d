import fc from "fast-check";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { DeployLogStore } from "../../conductor/history/deploy-logs.ts";
import { TarError, readTar, safeEntryName, writeTar } from "../../conductor/history/tar.ts";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  MASK,
  MASK_SLICE_CHARS,
  maskSecretsInText,
  maskSecretsInTextYielding,
} from "../../shared/secrets.ts";

const NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
const INSTANCE = "6e7f5c1c-8f5a-4b59-a1de-7f2a36c1e0a1";
const LIMITS = { maxPerNode: 3, maxBytesPerNode: 1024 * 1024, maxUnpackedBytes: 1024 * 1024 };

/** An archive as the agent makes one: GNU tar of a directory, gzipped. */
function agentArchive(files: Record<string, string>): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "anvil-logs-src-"));
  try {
    mkdirSync(join(dir, "logs"));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, "logs", name), text);
    execFileSync("tar", ["czf", join(dir, "a.tar.gz"), "-C", join(dir, "logs"), "."]);
    return readFileSync(join(dir, "a.tar.gz"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("maskSecretsInText", () => {
  it("masks secret-named values in the shapes logs print them, and leaves the rest", () => {
    const text = [
      'ipmitool -U admin password=hunter2 "token": "tok en" anvil.token=abc',
      '{"level":50,"msg":"login failed: bmc_password=pw9 for admin"}',
      "Authorization: Bearer eyJhbGciOi.x.y fetch http://u:pw@h/i?temp_url_sig=f00&x=1",
      "root=/dev/sda console=ttyS0 keyboard: us",
    ].join("\n");
    const out = maskSecretsInText(text);
    for (const secret of ["hunter2", "tok en", "abc", "pw9", "eyJhbGciOi", ":pw@", "f00"])
      expect(out).not.toContain(secret);
    expect(out).toContain(`password=${MASK}`);
    expect(out).toContain(`"token": "${MASK}"`);
    expect(out).toContain("root=/dev/sda console=ttyS0 keyboard: us");
    expect(out).toContain("for admin");
  });

  it("never lets a value after a secret key through, whatever surrounds it (generated)", () => {
    const key = fc.constantFrom("password", "ipmi_password", "token", "auth_token", "secret", "ssh_key");
    const value = fc.stringMatching(/^[A-Za-z0-9!#$%()*+./<>?@^|~-]{6,20}$/);
    const noise = fc.string({ maxLength: 40 }).map((s) => s.replace(/[\w"'=:]/g, " "));
    fc.assert(
      fc.property(
        fc.tuple(noise, key, fc.constantFrom("=", ": ", "="), value, noise),
        ([before, k, sep, v, after]) => {
          const out = maskSecretsInText(`${before} ${k}${sep}${v} ${after}`);
          expect(out).not.toContain(v);
          expect(maskSecretsInText(out)).toBe(out); // idempotent
        },
      ),
    );
  });

  it("keeps text without secrets as it is and never throws (generated)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (text) => {
        const out = maskSecretsInText(text);
        if (!/password|passwd|secret|token|key|credential|Bearer|Basic|Negotiate|:\/\//i.test(text))
          expect(out).toBe(text);
      }),
    );
  });
});

describe("maskSecretsInTextYielding", () => {
  it("masks exactly as maskSecretsInText, wherever the slices end (generated)", async () => {
    const line = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom(
        "password=hunter2 x",
        '"token": "tok en"',
        "Authorization: Bearer eyJhbGciOi.x.y",
        "fetch http://u:pw@h/i?temp_url_sig=f00&x=1",
        "ipmi_password: ",
        "key=\\",
        '"secret": "a\\"b"',
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(line, { maxLength: 20 }),
        fc.constantFrom("\n", "\r\n", " "),
        fc.integer({ min: 1, max: 64 }),
        async (lines, separator, slice) => {
          const text = lines.join(separator);
          expect(await maskSecretsInTextYielding(text, slice)).toBe(maskSecretsInText(text));
        },
      ),
    );
  });

  it("lets the event loop turn between slices instead of holding it for the whole text", async () => {
    const slices = 40;
    // lines exactly a slice long: one line a slice
    const text = `password=hunter2 ${"x".repeat(MASK_SLICE_CHARS - 18)}\n`.repeat(slices);
    let turns = 0;
    let masking = true;
    const ticker = (async () => {
      while (masking) {
        turns += 1;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    })();
    const out = await maskSecretsInTextYielding(text);
    masking = false;
    await ticker;
    // masking is CPU work only: a synchronous mask would let the ticker run once, at most
    expect(turns).toBeGreaterThanOrEqual(slices - 1);
    expect(out).toBe(maskSecretsInText(text));
    expect(out).not.toContain("hunter2");
  });
});

describe("tar", () => {
  it("reads what GNU tar writes and GNU tar reads what it writes", async () => {
    const entries = await readTar(gunzipSync(agentArchive({ "dmesg.txt": "kernel\n", "b.json": "{}" })), {
      maxEntries: 10,
      maxBytes: 1000,
    });
    expect(entries.map((e) => [e.name, e.data.toString()]).sort()).toEqual([
      ["b.json", "{}"],
      ["dmesg.txt", "kernel\n"],
    ]);
    const dir = mkdtempSync(join(tmpdir(), "anvil-tar-"));
    try {
      writeFileSync(join(dir, "x.tar"), await writeTar(entries, new Date()));
      execFileSync("tar", ["xf", join(dir, "x.tar"), "-C", dir]);
      expect(readFileSync(join(dir, "dmesg.txt"), "utf8")).toBe("kernel\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("writes back a name longer than ustar's 100 bytes that it read", async () => {
    const name = `journal/${"n".repeat(200)}.log`;
    const entries = [{ name, data: Buffer.from("long\n") }];
    expect(await readTar(await writeTar(entries, new Date(0)), { maxEntries: 2, maxBytes: 100 })).toEqual(
      entries,
    );
  });

  it("round-trips any files and refuses archives past its limits", async () => {
    const name = fc.stringMatching(/^[a-z0-9._-]{1,40}$/).filter((n) => safeEntryName(n) === n);
    const files = fc.uniqueArray(fc.record({ name, data: fc.uint8Array({ maxLength: 2000 }) }), {
      maxLength: 8,
      selector: (f) => f.name,
    });
    await fc.assert(
      fc.asyncProperty(files, async (list) => {
        const entries = list.map((f) => ({ name: f.name, data: Buffer.from(f.data) }));
        const tar = await writeTar(entries, new Date(0));
        expect(await readTar(tar, { maxEntries: 8, maxBytes: 16_000 })).toEqual(entries);
        const total = entries.reduce((n, e) => n + e.data.length, 0);
        if (total > 0)
          await expect(readTar(tar, { maxEntries: 8, maxBytes: total - 1 })).rejects.toThrow(TarError);
      }),
    );
  });

  it("never reads past a hostile archive nor hands back a name leaving the root (generated)", async () => {
    const base = await writeTar([{ name: "a.txt", data: Buffer.from("hello") }], new Date(0));
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 0, maxLength: 3000 }), fc.nat(3000), async (bytes, at) => {
        const hostile = Buffer.concat([base.subarray(0, at % base.length), Buffer.from(bytes)]);
        try {
          for (const entry of await readTar(hostile, { maxEntries: 4, maxBytes: 4096 })) {
            expect(entry.name.split("/")).not.toContain("..");
            expect(entry.name.startsWith("/")).toBe(false);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(TarError);
        }
      }),
    );
  });

  it("drops names that climb out or carry control characters", () => {
    expect(safeEntryName("./a/b")).toBe("a/b");
    expect(safeEntryName("../etc/passwd")).toBeNull();
    expect(safeEntryName("a/../../b")).toBeNull();
    expect(safeEntryName("a\nb")).toBeNull();
    expect(safeEntryName("./")).toBeNull();
  });
});

describe("DeployLogStore", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  function store(limits = LIMITS): { store: DeployLogStore; dir: string } {
    const dir = mkdtempSync(join(tmpdir(), "anvil-deploy-logs-"));
    dirs.push(dir);
    return { store: new DeployLogStore(dir, limits), dir };
  }

  it("stores an archive as Ironic names it, with its secrets masked and its reason", async () => {
    const { store: logs, dir } = store();
    const archive = agentArchive({
      "agent.log": '{"level":50,"msg":"write_image failed: sha256 mismatch","token":"t0ps3cret"}\n',
      "cmdline.txt": "BOOT_IMAGE=vmlinuz anvil.conductor=wss://c:6385/v1/agent ipmi_password=hunter2\n",
    });
    const info = await logs.save({ uuid: NODE, instance_uuid: INSTANCE }, archive, {
      reason: "deploy failed",
      at: new Date("2026-11-27T04:20:01.002Z"),
    });
    expect(info.id).toBe(`${NODE}_${INSTANCE}_deploy-failed_2026-11-27-04:20:01.002`);
    expect(readdirSync(join(dir, NODE)).sort()).toEqual([`${info.id}.json`, `${info.id}.tar.gz`]);
    const stored = await logs.read(NODE, info.id);
    const files = Object.fromEntries(
      (await logs.unpack(stored?.archive ?? Buffer.alloc(0))).map((f) => [f.name, f.data.toString()]),
    );
    expect(files["reason.txt"]).toBe("deploy failed\n");
    expect(files["agent.log"]).toContain("sha256 mismatch");
    expect(files["agent.log"]).toContain(`"token":"${MASK}"`);
    expect(files["cmdline.txt"]).toContain(`ipmi_password=${MASK}`);
    const raw = gunzipSync(readFileSync(join(dir, NODE, `${info.id}.tar.gz`))).toString("latin1");
    expect(raw).not.toContain("t0ps3cret");
    expect(raw).not.toContain("hunter2");
    expect(await logs.list(NODE)).toEqual([info]);
  });

  it("masks a large log in slices, answering another request while it saves, every secret masked", async () => {
    const { store: logs } = store({ ...LIMITS, maxUnpackedBytes: 64 * 1024 * 1024 });
    // 4 MiB of agent log lines, a secret on each, so secrets sit at every slice boundary
    const line = (i: number) => `{"level":30,"msg":"step ${i} ipmi_password=pw${i}x and more text"}\n`;
    const lines = Array.from({ length: 70_000 }, (_, i) => line(i)).join("");
    const server = createServer((_request, response) => response.end("pong"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const order: string[] = [];
      const saving = logs
        .save({ uuid: NODE, instance_uuid: null }, agentArchive({ "agent.log": lines }), {
          reason: "deploy failed",
        })
        .then((info) => (order.push("saved"), info));
      const answer = await fetch(`http://127.0.0.1:${port}/`).then((response) => response.text());
      order.push(answer);
      const info = await saving;
      expect(order).toEqual(["pong", "saved"]);
      const stored = await logs.read(NODE, info.id);
      const files = await logs.unpack(stored?.archive ?? Buffer.alloc(0));
      const log = files.find((file) => file.name.endsWith("agent.log"))?.data.toString() ?? "";
      expect(log.length).toBeGreaterThan(lines.length / 2);
      expect(log).not.toMatch(/ipmi_password=pw\d/);
      expect(log.split(`ipmi_password=${MASK}`).length - 1).toBe(70_000);
    } finally {
      server.close();
    }
  });

  it("keeps the newest maxPerNode archives, oldest removed first", async () => {
    const { store: logs } = store();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const info = await logs.save({ uuid: NODE, instance_uuid: null }, agentArchive({ "n.txt": `${i}` }), {
        reason: "clean failed",
        at: new Date(Date.UTC(2026, 10, 27, 4, 0, i)),
      });
      ids.push(info.id);
    }
    expect((await logs.list(NODE)).map((i) => i.id)).toEqual(ids.slice(2));
    expect(await logs.read(NODE, ids[0] ?? "")).toBeNull();
  });

  it("keeps the node within maxBytesPerNode, yet always its newest archive", async () => {
    const { store: logs } = store({ ...LIMITS, maxPerNode: 100, maxBytesPerNode: 1 });
    const at = (s: number) => new Date(Date.UTC(2026, 10, 27, 4, 0, s));
    await logs.save({ uuid: NODE, instance_uuid: null }, agentArchive({ "a.txt": "a" }), {
      reason: "x",
      at: at(1),
    });
    const last = await logs.save({ uuid: NODE, instance_uuid: null }, agentArchive({ "b.txt": "b" }), {
      reason: "x",
      at: at(2),
    });
    expect(await logs.list(NODE)).toEqual([last]);
  });

  it("gives two archives of the same millisecond different ids", async () => {
    const { store: logs } = store();
    const at = new Date("2026-11-27T04:20:01.002Z");
    const a = await logs.save({ uuid: NODE, instance_uuid: null }, agentArchive({ a: "1" }), {
      reason: "r",
      at,
    });
    const b = await logs.save({ uuid: NODE, instance_uuid: null }, agentArchive({ a: "2" }), {
      reason: "r",
      at,
    });
    expect(a.id).not.toBe(b.id);
    expect((await logs.list(NODE)).length).toBe(2);
  });

  it("refuses an archive that unpacks past maxUnpackedBytes, and stores nothing", async () => {
    const { store: logs } = store({ ...LIMITS, maxUnpackedBytes: 64 * 1024 });
    const bomb = gzipSync(await writeTar([{ name: "zeros", data: Buffer.alloc(1024 * 1024) }], new Date()));
    await expect(logs.save({ uuid: NODE, instance_uuid: null }, bomb, { reason: "r" })).rejects.toThrow();
    expect(await logs.list(NODE)).toEqual([]);
  });

  it("answers null for ids that are not its own, path-walking ones included", async () => {
    const { store: logs } = store();
    for (const id of ["../../etc/passwd", "x", "", "a/b", `${NODE}_x`])
      expect(await logs.read(NODE, id)).toBeNull();
  });
});
