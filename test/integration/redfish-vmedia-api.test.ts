import { MAX_VERSION_STRING } from "../../conductor/api/microversion.ts";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FakeManagement } from "../../conductor/drivers/management/fake.ts";
import { getVirtualMedia } from "../../conductor/operations/virtual-media.ts";
import { basic, writeUserFiles, type TestUser } from "../helpers/auth.ts";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";
import { api, faultOf, startConductor } from "../helpers/conductor.ts";
import { until } from "../helpers/wait.ts";

/**
 * The virtual media API (Ironic's 1.89 attach/detach) through the redfish driver to the lab's in-memory BMC:
 * `http` hands the BMC the operator's URL, `local` a signed link to the conductor's copy; Ironic's refusals.
 */
describe("virtual media through the API to the lab's Redfish BMC", { timeout: 120_000 }, () => {
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let bmc: RedfishBmc;
  let images: Server;
  let imageUrl = "";
  let imageRequests = 0;
  const iso = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i * 31) % 251));
  let rf = "";
  const v = { "X-OpenStack-Ironic-API-Version": "1.89" };
  const at = (version: string) => ({ "X-OpenStack-Ironic-API-Version": version });
  const media = () => bmc.systems.get("node-1")!.media;
  const driverInfo = () => ({
    redfish_address: bmc.url,
    redfish_system_id: "/redfish/v1/Systems/node-1",
    redfish_username: "admin",
    redfish_password: "bmc-s3cret",
  });

  /** The node once the background attach or detach released its lock. */
  const settled = (node: string) =>
    until(async () => {
      const body = (await api(`${ctx.url}/v1/nodes/${node}`, { headers: v })).body as {
        reservation: string | null;
        last_error: string | null;
      };
      return body.reservation === null ? body : undefined;
    });

  beforeAll(async () => {
    images = createServer((request, response) => {
      imageRequests++;
      if (request.url !== "/boot.iso") {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { "Content-Length": iso.length }).end(iso);
    });
    await new Promise<void>((resolve) => images.listen(0, "127.0.0.1", resolve));
    imageUrl = `http://127.0.0.1:${(images.address() as AddressInfo).port}/boot.iso`;
    bmc = await startRedfishBmc({
      password: "bmc-s3cret",
      systems: [{ id: "node-1", machine: new MemoryMachine(), uuid: "5a1e0f5c-3b1d-4e5e-9a35-8c1d2f6b7a89" }],
    });
    ctx = await startConductor({ fakeDelayMs: 0 });
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: v,
      body: { driver: "redfish", name: "rf-vmedia", deploy_interface: "fake", driver_info: driverInfo() },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    rf = (created.body as { uuid: string }).uuid;
  });
  afterAll(async () => {
    await ctx?.stop();
    await bmc?.stop();
    await new Promise((resolve) => images?.close(resolve));
  });

  const vmedia = (node: string) => `${ctx.url}/v1/nodes/${node}/vmedia`;
  const attach = (node: string, body: unknown, headers = v) =>
    api(vmedia(node), { method: "POST", headers, body });

  it("attaches an http image: the BMC's CD holds the operator's URL, inserted", async () => {
    const r = await attach("rf-vmedia", {
      device_type: "cdrom",
      image_url: imageUrl,
      image_download_source: "http",
    });
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    expect((await settled(rf)).last_error).toBeNull();
    expect(media()).toMatchObject({ image: imageUrl, inserted: true });
    // the operation behind GET …/vmedia (1.93, beyond the maximum yet) lists it under a shared lock
    const node = await ctx.conductor.store.getNode(rf);
    const listed = await getVirtualMedia(ctx.conductor.provisioner, node!);
    expect(listed).toEqual([{ media_types: ["CD", "DVD"], inserted: true, image: imageUrl }]);
  });

  it("detaches the CD by device type (query and path forms) and all devices without one", async () => {
    const byQuery = await api(`${vmedia(rf)}?device_types=cdrom`, { method: "DELETE", headers: v });
    expect(byQuery.status, JSON.stringify(byQuery.body)).toBe(204);
    await settled(rf);
    expect(media()).toMatchObject({ image: null, inserted: false });
    for (const path of [`${vmedia(rf)}/cdrom`, vmedia(rf)]) {
      expect(
        (await attach(rf, { device_type: "cdrom", image_url: imageUrl, image_download_source: "http" }))
          .status,
      ).toBe(204);
      await settled(rf);
      expect(media().inserted).toBe(true);
      expect((await api(path, { method: "DELETE", headers: v })).status).toBe(204);
      expect((await settled(rf)).last_error).toBeNull();
      expect(media()).toMatchObject({ image: null, inserted: false });
    }
    // a floppy named alone leaves the CD in
    await attach(rf, { device_type: "cdrom", image_url: imageUrl, image_download_source: "http" });
    await settled(rf);
    await api(`${vmedia(rf)}?device_types=floppy`, { method: "DELETE", headers: v });
    await settled(rf);
    expect(media().inserted).toBe(true);
    await api(vmedia(rf), { method: "DELETE", headers: v });
    await settled(rf);
  });

  it("attaches a local image (the default): the conductor downloads it once and serves it by a signed link", async () => {
    const before = imageRequests;
    const r = await attach(rf, { device_type: "cdrom", image_url: imageUrl });
    expect(r.status, JSON.stringify(r.body)).toBe(204);
    expect((await settled(rf)).last_error).toBeNull();
    expect(imageRequests - before).toBe(1);
    const { image, inserted } = media();
    expect(inserted).toBe(true);
    expect(image).toMatch(
      new RegExp(`^${ctx.url}/image-cache/vmedia-cdrom-${rf}-[0-9a-f]{12}\\?anvil_expires=`),
    );
    const served = await fetch(image!);
    expect(served.status).toBe(200);
    expect(Buffer.from(await served.arrayBuffer()).equals(iso)).toBe(true);
    // unsigned, the copy is not served
    expect((await fetch(image!.split("?")[0]!)).status).toBeGreaterThanOrEqual(400);
    expect((await api(vmedia(rf), { method: "DELETE", headers: v })).status).toBe(204);
    await settled(rf);
    expect(media().inserted).toBe(false);
    // detached, the conductor's copy is gone
    expect((await fetch(image!)).status).toBe(404);
  });

  it("records a failed attach in last_error in Ironic's words (no floppy slot; an unreachable local image)", async () => {
    const floppy = await attach(rf, {
      device_type: "floppy",
      image_url: imageUrl,
      image_download_source: "http",
    });
    expect(floppy.status).toBe(204);
    expect((await settled(rf)).last_error).toBe(
      `Could not attach device floppy to node ${rf}: No suitable virtual media device found for node ${rf} to mount image ${imageUrl}`,
    );
    const missing = imageUrl.replace("boot.iso", "gone.iso");
    expect((await attach(rf, { device_type: "cdrom", image_url: missing })).status).toBe(204);
    expect((await settled(rf)).last_error).toBe(
      `Could not attach device cdrom to node ${rf}: Failed to download image ${missing}: HTTP 404`,
    );
    expect(media().inserted).toBe(false);
    // the next request clears it
    await attach(rf, { device_type: "cdrom", image_url: imageUrl, image_download_source: "swift" });
    expect((await settled(rf)).last_error).toBeNull();
    expect(media()).toMatchObject({ image: imageUrl, inserted: true });
    await api(vmedia(rf), { method: "DELETE", headers: v });
    await settled(rf);
  });

  it("is a 404 below 1.89 (every method) and GET below 1.93, which lists the slots", async () => {
    for (const method of ["POST", "DELETE", "GET"]) {
      const r = await api(vmedia(rf), {
        method,
        headers: at("1.88"),
        ...(method === "POST" ? { body: { device_type: "cdrom", image_url: imageUrl } } : {}),
      });
      expect(r.status, method).toBe(404);
    }
    expect((await api(vmedia(rf), { headers: v })).status).toBe(404);
    // 1.93: GET lists the slots as Ironic's get_vmedia does
    const listed = await api(vmedia(rf), { headers: at("1.93") });
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual([{ media_types: ["CD", "DVD"], inserted: false, image: null }]);
    const root = await api(`${ctx.url}/v1`);
    expect((root.body as { version: { version: string } }).version.version).toBe(MAX_VERSION_STRING);
    expect(media().inserted).toBe(false);
  });

  it("refuses bad bodies and device types with Ironic's texts before anything reaches the BMC", async () => {
    const cases: [unknown, string][] = [
      [{ image_url: imageUrl }, "Schema error for vmedia: 'device_type' is a required property"],
      [{ device_type: "cdrom" }, "Schema error for vmedia: 'image_url' is a required property"],
      [
        { device_type: "cat", image_url: imageUrl },
        "Schema error for vmedia: 'cat' is not one of ['disk', 'cdrom', 'floppy']",
      ],
      [
        { device_type: "cdrom", image_url: imageUrl, image_download_source: "ftp" },
        "Schema error for vmedia: 'ftp' is not one of ['http', 'local', 'swift']",
      ],
      [{ device_type: "cdrom", image_url: 5 }, "Schema error for vmedia: 5 is not of type 'string'"],
      [
        { device_type: "cdrom", image_url: imageUrl, insecure: true },
        "Schema error for vmedia: Additional properties are not allowed ('insecure' was unexpected)",
      ],
      [{ device_type: "cdrom", image_url: "abcd" }, "Unsupported or missing URL scheme: "],
      [{ device_type: "cdrom", image_url: "ftp://host/x.iso" }, "Unsupported or missing URL scheme: ftp"],
      [
        { device_type: "cdrom", image_url: "nfs://host/share/x.iso" },
        "image_download_source is set to 'local' but the image URL nfs://host/share/x.iso uses the nfs protocol which cannot be downloaded by the conductor. Set image_download_source to 'http' or remove it to use the default.",
      ],
    ];
    for (const [body, message] of cases) {
      const r = await attach(rf, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(faultOf(r.body)).toBe(message);
    }
    const bad = await api(`${vmedia(rf)}?device_types=cdrom,cat,dog`, { method: "DELETE", headers: v });
    expect(bad.status).toBe(400);
    expect(faultOf(bad.body)).toBe("Invalid device type(s) cat, dog (valid are disk, cdrom, floppy)");
    expect(
      (await api(`${ctx.url}/v1/nodes/no-such-node/vmedia`, { method: "DELETE", headers: v })).status,
    ).toBe(404);
    expect(media().inserted).toBe(false);
  });

  it("answers any generated JSON body with Ironic's 400 envelope or a 204, never a 5xx", async () => {
    const device = fc.constantFrom("cdrom", "floppy", "disk", "CDROM", "", "usb");
    // NOTE: traffic stays on loopback: any URL the conductor may download (`local`, the default) is one of
    // these; a generated host only goes with `http`/`swift` (the lab BMC records it, fetches nothing)
    const loopbackOrBroken = fc.oneof(
      fc.constant(imageUrl),
      fc.string().filter((s) => !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(s)),
      fc.constantFrom("http://", "http://[::1", "smb://h/s", "HTTP://127.0.0.1:1/x", "https://127.0.0.1:1/"),
    );
    const body = fc.oneof(
      fc.jsonValue(),
      fc.record(
        {
          device_type: fc.oneof(device, fc.jsonValue()),
          image_url: fc.oneof(loopbackOrBroken, fc.jsonValue()),
          image_download_source: fc.oneof(fc.constantFrom("http", "swift", "local"), fc.jsonValue()),
          extra: fc.jsonValue(),
        },
        { requiredKeys: [] },
      ),
      fc.record({
        device_type: device,
        image_url: fc.webUrl({ withQueryParameters: true, withFragments: true }),
        image_download_source: fc.constantFrom("http", "swift"),
      }),
    );
    let attached = 0;
    await fc.assert(
      fc.asyncProperty(body, async (generated) => {
        const r = await attach(rf, generated);
        if (r.status === 204) {
          attached++;
          await settled(rf);
          return;
        }
        expect(r.status, JSON.stringify(generated)).toBe(400);
        expect(faultOf(r.body).length).toBeGreaterThan(0);
      }),
      { numRuns: 150 },
    );
    // the generator reaches past validation too
    expect(attached).toBeGreaterThan(0);
    await api(vmedia(rf), { method: "DELETE", headers: v });
    await settled(rf);
  });

  it("ipmi has no virtual media: Ironic's UnsupportedDriverExtension (400)", async () => {
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: v,
      body: { driver: "ipmi", name: "ipmi-vmedia", driver_info: { ipmi_address: "127.0.0.1" } },
    });
    expect(made.status).toBe(201);
    const r = await attach("ipmi-vmedia", { device_type: "cdrom", image_url: imageUrl });
    expect(r.status).toBe(400);
    expect(faultOf(r.body)).toBe(
      "Driver ipmi does not support attach_virtual_media (disabled or not implemented).",
    );
    const d = await api(vmedia("ipmi-vmedia"), { method: "DELETE", headers: v });
    expect(d.status).toBe(400);
    expect(faultOf(d.body)).toBe(
      "Driver ipmi does not support detach_virtual_media (disabled or not implemented).",
    );
  });
});

describe("virtual media policies on fake-hardware (records what is attached)", { timeout: 60_000 }, () => {
  const USERS: TestUser[] = [
    { name: "sysadmin", password: "pw-sysadmin", role: "admin" },
    { name: "sysreader", password: "pw-sysreader", role: "reader" },
    { name: "a-member", password: "pw-a-member", role: "member", project: "A" },
    { name: "a-reader", password: "pw-a-reader", role: "reader", project: "A" },
    { name: "b-member", password: "pw-b-member", role: "member", project: "B" },
  ];
  const dir = mkdtempSync(join(tmpdir(), "anvil-vmedia-policy-"));
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let uuid = "";
  const as = (user: string, init: { method: string; body?: unknown }) =>
    api(`${ctx.url}/v1/nodes/vm-a/vmedia`, {
      ...init,
      headers: { ...basic(user, `pw-${user}`), "X-OpenStack-Ironic-API-Version": "1.89" },
    });
  const fake = () => ctx.conductor.drivers.get("fake-hardware")!.management as FakeManagement;
  const settle = () =>
    until(async () => ((await ctx.conductor.store.getNode(uuid))?.reservation === null ? true : undefined));

  beforeAll(async () => {
    const files = writeUserFiles(dir, USERS);
    ctx = await startConductor({
      auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
    });
    const made = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      headers: basic("sysadmin", "pw-sysadmin"),
      body: { driver: "fake-hardware", name: "vm-a", owner: "A" },
    });
    uuid = (made.body as { uuid: string }).uuid;
  });
  afterAll(async () => {
    await ctx?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("attach and detach are for system and owner members; readers get 403, other projects 404", async () => {
    const body = {
      device_type: "floppy",
      image_url: "http://127.0.0.1:9/f.img",
      image_download_source: "http",
    };
    const got: [string, number][] = [];
    for (const user of ["sysreader", "a-reader", "b-member", "a-member"]) {
      got.push([user, (await as(user, { method: "POST", body })).status]);
      await settle();
    }
    expect(got).toEqual([
      ["sysreader", 403],
      ["a-reader", 403],
      ["b-member", 404],
      ["a-member", 204],
    ]);
    expect(fake().vmedia.get(`${uuid} floppy`)).toBe("http://127.0.0.1:9/f.img");
    const detach: [string, number][] = [];
    for (const user of ["a-reader", "b-member", "sysadmin"]) {
      detach.push([user, (await as(user, { method: "DELETE" })).status]);
      await settle();
    }
    expect(detach).toEqual([
      ["a-reader", 403],
      ["b-member", 404],
      ["sysadmin", 204],
    ]);
    expect(fake().vmedia.has(`${uuid} floppy`)).toBe(false);
    // node history names who asked, never the image's URL
    const history = await api(`${ctx.url}/v1/nodes/vm-a/history`, {
      headers: { ...basic("sysadmin", "pw-sysadmin"), "X-OpenStack-Ironic-API-Version": "1.89" },
    });
    const events = (history.body as { history: { event: string }[] }).history.map((h) => h.event);
    expect(events).toEqual(
      expect.arrayContaining([
        "Virtual media floppy attach requested by a-member",
        "Virtual media detach requested by sysadmin",
      ]),
    );
    expect(JSON.stringify(history.body)).not.toContain("f.img");
  });
});
