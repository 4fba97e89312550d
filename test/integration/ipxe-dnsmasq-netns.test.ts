import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import type { ExecResult } from "../../shared/system/exec.ts";
import type { DriverNode } from "../../conductor/drivers/interfaces.ts";
import { IpxeBoot } from "../../conductor/drivers/boot/ipxe.ts";
import { DnsmasqHosts, dnsmasqConf } from "../../conductor/drivers/boot/dnsmasq.ts";
import { buildMarkerInitramfs, startQemu } from "../helpers/qemu.ts";
import type { QemuVm } from "../helpers/qemu.ts";

const MAC = "52:54:00:d5:e6:f7";
const SERVER = "10.77.0.1";
const MARKER = "ANVIL-DHCP-RAMDISK-UP";

const canUseNetns = process.getuid?.() === 0;

async function run(command: string, args: string[]): Promise<ExecResult> {
  const result = await exec(command, args, { timeoutMs: 30_000 });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result;
}

/** A daemon run until the abort; its result (or error) for diagnostics. */
function daemon(command: string, args: string[]): { stop: () => Promise<void>; done: Promise<unknown> } {
  const controller = new AbortController();
  const done = exec(command, args, { signal: controller.signal }).catch((error: unknown) => error);
  return {
    done,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

describe.skipIf(!canUseNetns)("real DHCP from dnsmasq in a network namespace", () => {
  const ns = `anvil-h2-${randomBytes(3).toString("hex")}`;
  let dir: string;
  let dnsmasq: ReturnType<typeof daemon> | undefined;
  let httpd: ReturnType<typeof daemon> | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "anvil-dnsmasq-"));
    await run("ip", ["netns", "add", ns]);
    const inNs = (args: string[]): Promise<ExecResult> => run("ip", ["-n", ns, ...args]);
    await inNs(["link", "set", "lo", "up"]);
    await inNs(["link", "add", "br0", "type", "bridge"]);
    await inNs(["addr", "add", `${SERVER}/24`, "dev", "br0"]);
    await inNs(["addr", "add", "fd77::1/64", "dev", "br0", "nodad"]);
    await inNs(["tuntap", "add", "dev", "tap0", "mode", "tap"]);
    await inNs(["link", "set", "tap0", "master", "br0"]);
    await inNs(["link", "set", "tap0", "up"]);
    await inNs(["link", "set", "br0", "up"]);
  });

  afterAll(async () => {
    await dnsmasq?.stop();
    await httpd?.stop();
    await exec("ip", ["netns", "del", ns]);
    await rm(dir, { recursive: true, force: true });
  });

  it("dnsmasq answers the MAC Anvil allowed with boot.ipxe, and the ramdisk boots", async () => {
    const root = join(dir, "http");
    const tftp = join(dir, "tftp");
    const hostsDir = join(dir, "hosts");
    for (const d of [root, tftp, hostsDir, join(root, "images")]) await mkdir(d, { recursive: true });
    const kernelDir = (await run("bash", ["images/kernel/fetch.sh"])).stdout.trim();
    await copyFile(join(kernelDir, "vmlinuz"), join(root, "images", "vmlinuz"));
    await copyFile(await buildMarkerInitramfs(dir, MARKER), join(root, "images", "initramfs"));

    const conf = join(dir, "dnsmasq.conf");
    await writeFile(
      conf,
      dnsmasqConf({
        interface: "br0",
        dhcpRange: { start: "10.77.0.100", end: "10.77.0.150", leaseTime: "10m" },
        hostsDir,
        ipxeScriptUrl: `http://${SERVER}/boot.ipxe`,
        tftpRoot: tftp,
        tftpServer: SERVER,
        raPrefix: "fd77::",
      }),
    );
    const log = join(dir, "dnsmasq.log");
    dnsmasq = daemon("ip", [
      ...["netns", "exec", ns, "dnsmasq", "--keep-in-foreground", `--conf-file=${conf}`, "--user=root"],
      ...[`--pid-file=${join(dir, "dnsmasq.pid")}`, `--dhcp-leasefile=${join(dir, "leases")}`],
      ...["--log-dhcp", `--log-facility=${log}`],
    ]);
    httpd = daemon("ip", ["netns", "exec", ns, "busybox", "httpd", "-f", "-p", `${SERVER}:80`, "-h", root]);
    await sleep(500);

    // Allowed after dnsmasq started: it must pick the host file up through inotify, no restart.
    await new DnsmasqHosts({ hostsDir }).allow(MAC);
    const node: DriverNode = {
      uuid: "3c9e1f20-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
      name: null,
      driver_info: {
        deploy_kernel: `http://${SERVER}/images/vmlinuz`,
        deploy_ramdisk: `http://${SERVER}/images/initramfs`,
      },
      properties: {},
      instance_info: {},
      driver_internal_info: {},
      ports: [{ address: MAC, pxe_enabled: true }],
    };
    await new IpxeBoot({ root, kernelArgs: ["console=ttyS0"] }).prepareRamdisk(node, {
      agentParams: { "anvil.conductor": `ws://${SERVER}:6385/v1/agent` },
    });

    let vm: QemuVm | undefined;
    try {
      vm = await startQemu({
        netns: ns,
        boot: "network",
        nics: [{ kind: "tap", ifname: "tap0", mac: MAC }],
        timeoutMs: 240_000,
      });
      const started = Date.now();
      const serial = await vm.waitForSerial(/CMDLINE: [^\r\n]*\r?\n/, {
        timeoutMs: 220_000,
        failOn: /No bootable device|Kernel panic/,
      });
      console.log(
        `QEMU (TCG) via dnsmasq DHCP: power on to ramdisk init in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      expect(serial).toContain(MARKER);
      expect(serial).toContain(`Filename: http://${SERVER}/boot.ipxe`);
      expect(/CMDLINE: (.*)/.exec(serial)?.[1]?.split(" ")).toEqual(
        expect.arrayContaining([
          `anvil.conductor=ws://${SERVER}:6385/v1/agent`,
          "BOOTIF=01-52-54-00-d5-e6-f7",
        ]),
      );
      const dhcpLog = await readFile(log, "utf8");
      expect(dhcpLog).toMatch(new RegExp(`DHCPACK\\(br0\\) 10\\.77\\.0\\.1\\d\\d ${MAC}`));
      expect(dhcpLog).toMatch(/tags: .*anvil/);
    } finally {
      await vm?.stop();
    }
  }, 300_000);
});
