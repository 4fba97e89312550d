import { closeSync, openSync, readSync } from "node:fs";

/** One console line, stamped with the host's clock when the bench first saw it whole (ms). */
export interface StampedLine {
  at: number;
  text: string;
}

/**
 * Follows a growing file (a VM's serial log) and stamps every complete line as it appears, polling every
 * `everyMs`: the guest's console carries no clock of its own before the kernel's, so the host's is the one
 * that spans SeaBIOS, iPXE, the kernel, init and the image. A line is stamped when its newline arrives (iPXE
 * ends a download's line with "ok", so its stamp is the download's end).
 */
export function stampLines(path: string, everyMs = 50): { lines: StampedLine[]; stop(): void } {
  const lines: StampedLine[] = [];
  let offset = 0;
  let partial = "";
  const buffer = Buffer.alloc(1 << 20);
  const poll = (): void => {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch {
      return; // not there yet: the VM has not started
    }
    try {
      for (;;) {
        const read = readSync(fd, buffer, 0, buffer.length, offset);
        if (read === 0) break;
        offset += read;
        partial += buffer.subarray(0, read).toString("latin1");
      }
    } finally {
      closeSync(fd);
    }
    const at = Date.now();
    const parts = partial.split("\n");
    partial = parts.pop() ?? "";
    // iPXE redraws a progress figure with carriage returns: keep what the line finally says
    for (const part of parts)
      lines.push({
        at,
        text:
          part
            .split("\r")
            .filter((p) => p !== "")
            .pop() ?? "",
      });
  };
  const timer = setInterval(poll, everyMs);
  return {
    lines,
    stop: () => {
      clearInterval(timer);
      poll();
    },
  };
}

/** A point of the walk: what happened and when (host ms). */
export interface Milestone {
  at: number;
  what: string;
}

/** What a console line says about the boot, in the order a boot says it; the first match after a VM start counts. */
const CONSOLE_MILESTONES: { what: string; pattern: RegExp; order: "n" | "c" }[] = [
  { what: "iPXE fetches its script", pattern: /boot\.ipxe/, order: "n" },
  { what: "iPXE has the kernel", pattern: /anvil\.kernel.*\bok\b/, order: "n" },
  { what: "iPXE has the initramfs (downloads done)", pattern: /anvil\.initramfs.*\bok\b/, order: "n" },
  { what: "kernel: first line", pattern: /Linux version|^\[\s*0\.0+\]/, order: "n" },
  { what: "kernel done: ramdisk init runs", pattern: /anvil-init: kernel/, order: "n" },
  { what: "init: modules loaded", pattern: /anvil-init: modules loaded/, order: "n" },
  { what: "init: DHCP lease", pattern: /anvil-dhcp: \S+: bound/, order: "n" },
  { what: "init starts the agent", pattern: /anvil-init: starting agent/, order: "n" },
  { what: "agent's first log line (Node is up)", pattern: /agent starting/, order: "n" },
  { what: "SeaBIOS boots the disk", pattern: /Booting from Hard Disk/, order: "c" },
  { what: "the image's kernel runs", pattern: /ANVIL-TEST-IMAGE-CMDLINE/, order: "c" },
];

/**
 * The walk's milestones, oldest first: each VM start (from the lab hook's log), what its console showed
 * (first match of each kind per start), the conductor's events for the node (agent connected, provision
 * states) and the image's marker. Pure: the bench collects, this orders.
 */
export function walkMilestones(input: {
  vmStarts: { at: number; order: string }[];
  lines: StampedLine[];
  events: { type: string; at: string; [key: string]: unknown }[];
  marker: RegExp;
}): Milestone[] {
  const out: Milestone[] = [];
  input.vmStarts.forEach((start, index) => {
    out.push({ at: start.at, what: `power on (boot ${start.order === "n" ? "network" : "disk"})` });
    const until = input.vmStarts[index + 1]?.at ?? Infinity;
    const mine = input.lines.filter((l) => l.at >= start.at && l.at < until);
    for (const { what, pattern, order } of CONSOLE_MILESTONES) {
      if (order !== start.order) continue;
      const line = mine.find((l) => pattern.test(l.text));
      if (line !== undefined) out.push({ at: line.at, what });
    }
    const marker = mine.find((l) => input.marker.test(l.text));
    if (marker !== undefined) out.push({ at: marker.at, what: "the image's marker (booted)" });
  });
  for (const event of input.events) {
    const at = Date.parse(event.at);
    if (Number.isNaN(at)) continue;
    if (event.type === "agent" && event.connected === true) out.push({ at, what: "agent hello (connected)" });
    if (event.type === "provision") out.push({ at, what: `state ${String(event.provision_state)}` });
    if (event.type === "power" && typeof event.power_state === "string")
      out.push({ at, what: `conductor: ${event.power_state}` });
    if (event.type === "step" && event.status !== "start")
      out.push({ at, what: `step ${String(event.kind)}.${String(event.step)} ${String(event.status)}` });
  }
  return out.sort((a, b) => a.at - b.at);
}

/** The split: summed over every boot of the walk (ms), absent parts left out. */
export function splitOf(milestones: Milestone[]): Map<string, number> {
  const split = new Map<string, number>();
  const add = (key: string, ms: number): void => {
    split.set(key, (split.get(key) ?? 0) + ms);
  };
  const parts: [string, string, string][] = [
    ["power on → iPXE fetches its script", "power on (boot network)", "iPXE fetches its script"],
    [
      "iPXE script → kernel + initramfs downloaded",
      "iPXE fetches its script",
      "iPXE has the initramfs (downloads done)",
    ],
    [
      "downloaded → ramdisk init runs (kernel boot)",
      "iPXE has the initramfs (downloads done)",
      "kernel done: ramdisk init runs",
    ],
    ["init runs → agent started (modules, DHCP)", "kernel done: ramdisk init runs", "init starts the agent"],
    [
      "agent started → its first log line (Node's start)",
      "init starts the agent",
      "agent's first log line (Node is up)",
    ],
    ["agent's first log line → hello", "agent's first log line (Node is up)", "agent hello (connected)"],
    ["power on (disk) → the image's marker", "power on (boot disk)", "the image's marker (booted)"],
  ];
  for (const [key, from, to] of parts) {
    for (let i = 0; i < milestones.length; i++) {
      if (milestones[i]?.what !== from) continue;
      const start = milestones[i]!.at;
      const end = milestones.slice(i + 1).find((m) => m.what === to || m.what === from);
      if (end?.what === to) add(key, end.at - start);
    }
  }
  return split;
}
