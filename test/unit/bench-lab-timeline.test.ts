import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { splitOf, stampLines, walkMilestones } from "../../scripts/bench/lab-timeline.ts";

const MARKER = /ANVIL-TEST-IMAGE-BOOTED/;
const iso = (ms: number): string => new Date(ms).toISOString();

describe("walkMilestones", () => {
  const vmStarts = [
    { at: 1_000, order: "n" },
    { at: 30_000, order: "c" },
  ];
  const lines = [
    { at: 2_000, text: "http://10.0.2.100/boot/boot.ipxe... ok" },
    { at: 4_000, text: "http://10.0.2.100/images/ramdisk/anvil.kernel... ok" },
    { at: 6_000, text: "http://10.0.2.100/images/ramdisk/anvil.initramfs... ok" },
    { at: 9_000, text: "anvil-init: kernel 6.1.0 up 2.5s; ramdisk abc" },
    { at: 11_000, text: "anvil-init: starting agent (up 4.1s): anvil-agent service ..." },
    { at: 12_000, text: '{"level":30,"msg":"agent starting"}' },
    // a second agent start in the same boot does not move the milestone
    { at: 20_000, text: "anvil-init: starting agent (up 13s): anvil-agent service ..." },
    { at: 31_000, text: "Booting from Hard Disk..." },
    { at: 35_000, text: "ANVIL-TEST-IMAGE-BOOTED anvil-test" },
  ];
  const events = [
    { type: "agent", at: iso(12_500), connected: true },
    { type: "provision", at: iso(500), provision_state: "cleaning" },
    { type: "step", at: iso(14_000), kind: "deploy", step: "write_image", status: "done" },
    { type: "step", at: iso(13_000), kind: "deploy", step: "write_image", status: "start" },
    { type: "progress", at: "not a time", step: "x" },
  ];

  it("orders console lines, VM starts and conductor events on one clock", () => {
    const milestones = walkMilestones({ vmStarts, lines, events, marker: MARKER });
    expect(milestones.map((m) => m.what)).toEqual([
      "state cleaning",
      "power on (boot network)",
      "iPXE fetches its script",
      "iPXE has the kernel",
      "iPXE has the initramfs (downloads done)",
      "kernel done: ramdisk init runs",
      "init starts the agent",
      "agent's first log line (Node is up)",
      "agent hello (connected)",
      "step deploy.write_image done",
      "power on (boot disk)",
      "SeaBIOS boots the disk",
      "the image's marker (booted)",
    ]);
    expect(milestones.find((m) => m.what === "init starts the agent")?.at).toBe(11_000);
  });

  it("splits the boots into the issue's parts", () => {
    const split = splitOf(walkMilestones({ vmStarts, lines, events, marker: MARKER }));
    expect(Object.fromEntries(split)).toEqual({
      "power on → iPXE fetches its script": 1_000,
      "iPXE script → kernel + initramfs downloaded": 4_000,
      "downloaded → ramdisk init runs (kernel boot)": 3_000,
      "init runs → agent started (modules, DHCP)": 2_000,
      "agent started → its first log line (Node's start)": 1_000,
      "agent's first log line → hello": 500,
      "power on (disk) → the image's marker": 5_000,
    });
  });

  it("sums a part over every boot and skips a boot that never reached its end", () => {
    const twoBoots = [
      { at: 0, order: "n" },
      { at: 10_000, order: "n" },
    ];
    const console_ = [
      { at: 1_000, text: "iPXE> chain http://10.0.2.100/boot/boot.ipxe" },
      { at: 11_500, text: "http://10.0.2.100/boot/boot.ipxe... ok" },
    ];
    const split = splitOf(
      walkMilestones({ vmStarts: twoBoots, lines: console_, events: [], marker: MARKER }),
    );
    expect(split.get("power on → iPXE fetches its script")).toBe(2_500);
    expect(split.has("agent's first log line → hello")).toBe(false);
  });
});

describe("stampLines", () => {
  let dir = "";
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("stamps whole lines as they are appended and keeps what a carriage return redraw ends with", async () => {
    dir = mkdtempSync(join(tmpdir(), "stamp-"));
    const file = join(dir, "serial.log");
    const follower = stampLines(file, 10);
    await sleep(30); // the file does not exist yet: nothing, no error
    writeFileSync(file, "first\nhttp://x/anvil.kernel... 10%\r");
    await sleep(50);
    appendFileSync(file, "http://x/anvil.kernel... ok\r\nthird without newline");
    follower.stop();
    expect(follower.lines.map((l) => l.text)).toEqual(["first", "http://x/anvil.kernel... ok"]);
    expect(follower.lines[1]!.at).toBeGreaterThanOrEqual(follower.lines[0]!.at);
  });
});
