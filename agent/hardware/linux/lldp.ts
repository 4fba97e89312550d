import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LldpRaw, splitTlvs } from "../../../shared/lldp.ts";
import { exec, ExecTimeoutError } from "../../../shared/system/exec.ts";
import { firstLldpPdu } from "./pcap.ts";

/** IPA's lldp_timeout is 30 s (a switch sends every 30 s); Anvil's default is short, as every NIC waits it. */
export const DEFAULT_LLDP_TIMEOUT_S = 3;
/** The kernel parameter that sets it (seconds; 0 turns the collector off). */
export const LLDP_TIMEOUT_PARAM = "anvil.lldp_timeout";
/** IPA's name for the same setting, accepted too (an operator's kernel_append_params may carry either). */
export const IPA_LLDP_TIMEOUT_PARAM = "ipa-lldp-timeout";

/** The LLDP timeout a kernel command line asks for: anvil.lldp_timeout, else IPA's ipa-lldp-timeout. */
export function lldpTimeoutParam(cmdline: ReadonlyMap<string, string>): string | undefined {
  return cmdline.get(LLDP_TIMEOUT_PARAM) ?? cmdline.get(IPA_LLDP_TIMEOUT_PARAM);
}

/**
 * The timeout a kernel parameter value asks for, in seconds: the default when absent, null (off) at 0.
 * @throws Error for a value that is not a number of seconds from 0 to 600
 */
export function lldpTimeoutOf(value: string | undefined): number | null {
  if (value === undefined) return DEFAULT_LLDP_TIMEOUT_S;
  const seconds = Number(value);
  if (value.trim() === "" || !Number.isFinite(seconds) || seconds < 0 || seconds > 600) {
    throw new Error(`${LLDP_TIMEOUT_PARAM}=${value.slice(0, 40)} is not a number of seconds from 0 to 600`);
  }
  return seconds === 0 ? null : seconds;
}

/** Where frames come from: tcpdump in the ramdisk; tests pass a fake. */
export type FrameCapture = (
  iface: string,
  options: { timeoutMs: number; signal?: AbortSignal },
) => Promise<Uint8Array | null>;

/**
 * One LLDP frame from `iface` with tcpdump (Node has no AF_PACKET socket): promiscuous, as IPA's raw socket
 * is (LLDP's group address is not one a NIC accepts otherwise), stopping at the first frame or the deadline.
 * The capture goes to a file, not stdout: exec reads stdout as text. Null when no frame came.
 */
export const tcpdumpCapture: FrameCapture = async (iface, { timeoutMs, signal }) => {
  const dir = await mkdtemp(join(tmpdir(), "anvil-lldp-"));
  const file = join(dir, "frame.pcap");
  try {
    // -U: each packet is flushed as it is written, so a capture killed at the deadline keeps what it has.
    // -Z root: Debian's tcpdump otherwise switches to a "tcpdump" user the ramdisk does not have.
    const args = ["-i", iface, "-c", "1", "-s", "1600", "-U", "-n", "-Z", "root", "-w", file];
    await exec("tcpdump", [...args, "ether", "proto", "0x88cc"], { timeoutMs, signal }).catch(
      (error: unknown) => {
        if (!(error instanceof ExecTimeoutError)) throw error;
      },
    );
    const bytes = await readFile(file).catch(() => null);
    return bytes === null ? null : firstLldpPdu(bytes);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};

/**
 * IPA's lldp collector: one frame per interface, listened for on all of them at once for at most
 * `timeoutS`, as `lldp_raw` (an interface that heard nothing gets an empty list, as in IPA). A capture that
 * fails (no tcpdump, interface gone) counts as nothing heard: LLDP never fails an inspection.
 */
export async function collectLldp(
  ifaces: readonly string[],
  options: { timeoutS: number; capture?: FrameCapture; signal?: AbortSignal },
): Promise<LldpRaw> {
  const capture = options.capture ?? tcpdumpCapture;
  const timeoutMs = Math.round(options.timeoutS * 1000);
  const frames = await Promise.all(
    ifaces.map((iface) => capture(iface, { timeoutMs, signal: options.signal }).catch(() => null)),
  );
  const raw: LldpRaw = {};
  ifaces.forEach((iface, index) => {
    const pdu = frames[index];
    raw[iface] = pdu === null || pdu === undefined ? [] : splitTlvs(pdu);
  });
  return raw;
}
