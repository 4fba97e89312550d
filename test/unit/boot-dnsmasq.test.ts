import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidDriverInfo } from "../../conductor/drivers/errors.ts";
import { DnsmasqHosts, dnsmasqConf } from "../../conductor/drivers/boot/dnsmasq.ts";

describe("dnsmasq host files", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-dhcp-"));
  });
  afterEach(async () => rm(dir, { recursive: true, force: true }));

  it("allows a MAC with the anvil tag, one file per MAC", async () => {
    const hosts = new DnsmasqHosts({ hostsDir: dir });
    await hosts.allow("52:54:00:AA:BB:01");
    await hosts.allow("52:54:00:aa:bb:02", { ip: "10.0.0.42" });
    expect((await readdir(dir)).sort()).toEqual(["52-54-00-aa-bb-01", "52-54-00-aa-bb-02"]);
    expect(await readFile(join(dir, "52-54-00-aa-bb-01"), "utf8")).toBe("52:54:00:aa:bb:01,set:anvil\n");
    expect(await readFile(join(dir, "52-54-00-aa-bb-02"), "utf8")).toBe(
      "52:54:00:aa:bb:02,set:anvil,10.0.0.42\n",
    );
  });

  it("denies by overwriting, since dnsmasq ignores deleted files", async () => {
    const hosts = new DnsmasqHosts({ hostsDir: dir });
    await hosts.allow("52:54:00:aa:bb:01");
    await hosts.deny("52:54:00:aa:bb:01");
    expect(await readFile(join(dir, "52-54-00-aa-bb-01"), "utf8")).toBe("52:54:00:aa:bb:01,ignore\n");
  });

  it("refuses hostile MACs and IPs without writing", async () => {
    const hosts = new DnsmasqHosts({ hostsDir: dir });
    await expect(hosts.allow("../../etc/dnsmasq.conf")).rejects.toThrow(InvalidDriverInfo);
    await expect(hosts.allow("52:54:00:aa:bb:01", { ip: "10.0.0.1\ndhcp-script=/bin/sh" })).rejects.toThrow(
      InvalidDriverInfo,
    );
    expect(await readdir(dir)).toEqual([]);
  });
});

describe("dnsmasq.conf", () => {
  const base = {
    interface: "br-prov",
    dhcpRange: { start: "10.0.0.100", end: "10.0.0.200" },
    hostsDir: "/var/lib/anvil/dhcp-hosts",
    ipxeScriptUrl: "http://10.0.0.1:6385/boot/boot.ipxe",
    tftpRoot: "/var/lib/anvil/tftp",
    tftpServer: "10.0.0.1",
  };

  it("hands each client type its boot file, only for tagged machines", () => {
    const conf = dnsmasqConf(base).split("\n");
    expect(conf).toContain("dhcp-hostsdir=/var/lib/anvil/dhcp-hosts");
    expect(conf).toContain("dhcp-ignore=tag:!anvil");
    expect(conf).toContain("dhcp-userclass=set:ipxe,iPXE");
    expect(conf).toContain("dhcp-boot=tag:anvil,tag:ipxe,http://10.0.0.1:6385/boot/boot.ipxe");
    expect(conf).toContain("dhcp-boot=tag:anvil,tag:!ipxe,tag:efi,ipxe.efi,,10.0.0.1");
    expect(conf).toContain("dhcp-boot=tag:anvil,tag:!ipxe,tag:!efi,undionly.kpxe,,10.0.0.1");
    expect(conf).toContain("dhcp-range=10.0.0.100,10.0.0.200,1h");
    expect(conf).not.toContain("enable-ra");
  });

  it("advertises an IPv6 prefix when asked (iPXE stops waiting for a router)", () => {
    const conf = dnsmasqConf({ ...base, raPrefix: "fd00:a::", ignoreUnknown: false }).split("\n");
    expect(conf).toContain("enable-ra");
    expect(conf).toContain("dhcp-range=fd00:a::,ra-only");
    expect(conf).not.toContain("dhcp-ignore=tag:!anvil");
  });

  it("with auto-discovery, answers and boots machines Anvil never named", () => {
    const conf = dnsmasqConf({ ...base, discovery: true }).split("\n");
    expect(conf).not.toContain("dhcp-ignore=tag:!anvil");
    expect(conf).toContain("dhcp-boot=tag:ipxe,http://10.0.0.1:6385/boot/boot.ipxe");
    expect(conf).toContain("dhcp-boot=tag:!ipxe,tag:efi,ipxe.efi,,10.0.0.1");
    expect(conf).toContain("dhcp-boot=tag:!ipxe,tag:!efi,undionly.kpxe,,10.0.0.1");
    // a MAC Anvil set to ignore (a node taken out) still gets nothing: its host line says so
    expect(conf).toContain("dhcp-hostsdir=/var/lib/anvil/dhcp-hosts");
  });

  it("refuses values that would inject lines", () => {
    expect(() => dnsmasqConf({ ...base, interface: "eth0\ndhcp-script=/bin/sh" })).toThrow(InvalidDriverInfo);
  });
});
