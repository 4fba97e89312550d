import type { AtaSecurity, DiskTools } from "../../hardware/disk-tools.ts";
import { parseHdparmIdentify } from "../../hardware/linux/hdparm-identify.ts";

export class AtaEraseError extends Error {
  override name = "AtaEraseError";
}

/**
 * The throwaway user password the erase needs (the ATA command requires one). hdparm takes it on argv, so it
 * must not be a secret; "NULL" is what IPA uses, so either agent can unlock a drive the other left locked.
 */
const PASSWORD = "NULL";

export interface AtaEraseOptions {
  tools: DiskTools;
  enhanced: boolean;
  signal?: AbortSignal;
}

/**
 * ATA SECURITY ERASE UNIT through hdparm: set a user password (security enabled), erase with it (which
 * clears it again), then check that security is off. Whatever fails after the password is set, the
 * drive is unlocked and its password disabled before the error leaves, so no drive is left locked.
 * @throws AtaEraseError naming the hdparm step that failed
 */
export async function ataSecureErase(device: string, options: AtaEraseOptions): Promise<void> {
  const { tools, signal } = options;
  const before = await security(device, tools, signal);
  if (!before.supported) throw new AtaEraseError(`${device} does not support ATA security`);
  if (before.frozen) throw new AtaEraseError(`${device}'s security is frozen`);
  if (before.locked) throw new AtaEraseError(`${device} is locked with a password this agent does not know`);
  const minutes = (options.enhanced ? before.enhancedEraseMinutes : before.eraseMinutes) ?? 120;
  try {
    if (!before.enabled)
      await hdparm(tools, { args: ["--user-master", "u", "--security-set-pass", PASSWORD, device], signal });
    await hdparm(tools, {
      args: [
        "--user-master",
        "u",
        options.enhanced ? "--security-erase-enhanced" : "--security-erase",
        PASSWORD,
        device,
      ],
      signal,
      // hdparm waits for the drive; give it twice the drive's own estimate.
      timeoutMs: Math.max(2 * minutes, 30) * 60_000,
    });
    const after = await security(device, tools, signal);
    if (after.enabled || after.locked)
      throw new AtaEraseError(`${device} still has security enabled after the erase`);
  } catch (error) {
    await clearPassword(device, tools);
    throw error;
  }
}

/** Best effort, and not cancellable: this is what leaves the drive usable after a failure or an abort. */
async function clearPassword(device: string, tools: DiskTools): Promise<void> {
  const state = await security(device, tools).catch(() => null);
  if (state !== null && !state.enabled && !state.locked) return;
  if (state === null || state.locked) {
    await hdparm(tools, { args: ["--user-master", "u", "--security-unlock", PASSWORD, device] }).catch(
      () => undefined,
    );
  }
  await hdparm(tools, { args: ["--user-master", "u", "--security-disable", PASSWORD, device] }).catch(
    () => undefined,
  );
}

async function security(device: string, tools: DiskTools, signal?: AbortSignal): Promise<AtaSecurity> {
  const result = await tools.hdparm(["-I", device], { signal });
  if (result.code !== 0) throw new AtaEraseError(`hdparm -I ${device} failed: ${result.stderr.trim()}`);
  const parsed = parseHdparmIdentify(result.stdout).security;
  if (parsed === null) throw new AtaEraseError(`hdparm -I ${device} shows no Security section`);
  return parsed;
}

async function hdparm(
  tools: DiskTools,
  call: { args: string[]; signal?: AbortSignal; timeoutMs?: number },
): Promise<void> {
  const result = await tools.hdparm(call.args, { signal: call.signal, timeoutMs: call.timeoutMs ?? 60_000 });
  if (result.code !== 0) {
    throw new AtaEraseError(
      `hdparm ${call.args.join(" ")} failed: ${(result.stderr.trim() || `exit code ${result.code}`).slice(0, 500)}`,
    );
  }
}
