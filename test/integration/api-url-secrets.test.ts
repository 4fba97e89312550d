import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MASK, maskSecrets, maskUrlSecrets, restoreMaskedSecrets } from "../../shared/secrets.ts";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";
import { recordingLogger } from "../helpers/log.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-urls-"));
const files = writeUserFiles(dir, [{ name: "ops", password: "ops-pass", role: "admin" }]);
const logLines: string[] = [];
let ctx: Awaited<ReturnType<typeof startConductor>>;
const as = (path: string, init: { method?: string; body?: unknown } = {}) =>
  api(`${ctx.url}${path}`, { ...init, headers: basic("ops", "ops-pass") });
const SIG = "d41d8cd98f00b204e9800998ecf8427e";
const IMAGE = `http://swift.example/v1/AUTH_x/images/disk.qcow2?temp_url_sig=${SIG}&temp_url_expires=1999999999`;

beforeAll(async () => {
  ctx = await startConductor(
    { auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile } },
    { logger: recordingLogger(logLines) },
  );
});
afterAll(async () => {
  await ctx.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("secrets inside URLs", () => {
  it("masks userinfo passwords and signing query parameters, and nothing else", () => {
    expect(maskUrlSecrets("http://u:pw@h/k?a=1")).toBe(`http://u:${MASK}@h/k?a=1`);
    expect(maskUrlSecrets("https://tok@h/k")).toBe(`https://${MASK}@h/k`);
    expect(
      maskUrlSecrets("https://s3/b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc&X-Amz-Expires=60#f"),
    ).toBe(`https://s3/b/k?X-Amz-Credential=${MASK}&X-Amz-Signature=${MASK}&X-Amz-Expires=60#f`);
    expect(maskUrlSecrets("https://h/?sig=1&token=2&signature=3&x=4")).toBe(
      `https://h/?sig=${MASK}&token=${MASK}&signature=${MASK}&x=4`,
    );
    expect(maskUrlSecrets("not a url?sig=1")).toBe("not a url?sig=1");
    expect(maskSecrets({ a: [{ image_source: IMAGE }] })).toEqual({
      a: [{ image_source: IMAGE.replace(SIG, MASK) }],
    });
  });

  it("never shows a generated signature, and an echoed masked URL restores the real one", () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[a-zA-Z0-9]{8,40}$/),
        fc.constantFrom("temp_url_sig", "X-Amz-Signature", "sig"),
        (secret, name) => {
          const url = `https://h.example/p?${name}=${secret}&other=1`;
          const masked = maskUrlSecrets(url);
          const doc = { image_source: masked };
          restoreMaskedSecrets(doc, { image_source: url });
          return !masked.includes(secret) && doc.image_source === url;
        },
      ),
    );
  });

  it("image_source's temp_url_sig is masked in the API and the history, not in the store", async () => {
    const created = await as("/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", name: "u1" },
    });
    expect(created.status).toBe(201);
    const patched = await as("/v1/nodes/u1", {
      method: "PATCH",
      body: [{ op: "add", path: "/instance_info/image_source", value: IMAGE }],
    });
    expect(patched.status).toBe(200);
    const shown = await as("/v1/nodes/u1");
    expect((shown.body as { instance_info: { image_source: string } }).instance_info.image_source).toBe(
      IMAGE.replace(SIG, MASK),
    );
    const history = await as("/v1/nodes/u1/history/detail");
    const events = (history.body as { history: { uuid: string }[] }).history;
    const full = await Promise.all(events.map((h) => as(`/v1/nodes/u1/history/${h.uuid}`)));
    expect(JSON.stringify(full.map((r) => r.body))).not.toContain(SIG);
    expect(logLines.join("\n")).not.toContain(SIG);
    // a client that read the masked URL and sends it back keeps the real one
    await as("/v1/nodes/u1", {
      method: "PATCH",
      body: [{ op: "replace", path: "/instance_info/image_source", value: IMAGE.replace(SIG, MASK) }],
    });
    const stored = await ctx.conductor.store.getNode("u1");
    expect(stored?.instance_info.image_source).toBe(IMAGE);
  });

  it("deploy kernel and ramdisk URLs with credentials are refused at create and patch", async () => {
    const withCreds = "http://user:s3cret@images.example/ipa.kernel";
    const created = await as("/v1/nodes", {
      method: "POST",
      body: { driver: "fake-hardware", driver_info: { deploy_kernel: withCreds } },
    });
    expect(created.status).toBe(400);
    expect(faultOf(created.body)).toContain("driver_info/deploy_kernel");
    expect(faultOf(created.body)).not.toContain("s3cret");
    await as("/v1/nodes", { method: "POST", body: { driver: "fake-hardware", name: "u2" } });
    const patched = await as("/v1/nodes/u2", {
      method: "PATCH",
      body: [{ op: "add", path: "/driver_info/deploy_ramdisk", value: withCreds }],
    });
    expect(patched.status).toBe(400);
    expect(faultOf(patched.body)).toContain("driver_info/deploy_ramdisk");
    const fine = await as("/v1/nodes/u2", {
      method: "PATCH",
      body: [
        { op: "add", path: "/driver_info/deploy_ramdisk", value: "http://images.example/ipa.initramfs" },
      ],
    });
    expect(fine.status).toBe(200);
  });
});

describe("the dashboard's protective headers", () => {
  it.each(["/ui/", "/ui/app.css"])("%s has CSP, frame and sniffing protection", async (path) => {
    const r = await api(`${ctx.url}${path}`);
    expect(r.status).toBe(200);
    const csp = r.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(r.headers.get("x-frame-options")).toBe("DENY");
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("the API's own answers are not changed by the dashboard's hook", async () => {
    const r = await as("/v1/nodes");
    expect(r.headers.get("x-frame-options")).toBeNull();
  });
});
