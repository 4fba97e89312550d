import type { AtaSecurity } from "../disk-tools.ts";

export interface AtaIdentify {
  /** null when the drive has no Security section (not ATA, or no security feature set). */
  security: AtaSecurity | null;
  /** "Deterministic read ZEROs after TRIM": discarded sectors read back as zeros. */
  trimReadsZero: boolean;
}

/**
 * Reads `hdparm -I`. The Security section's lines are tab-indented, with "not" before a negated state:
 * "\t\tsupported", "\tnot\tenabled", "\t\tfrozen", "\t\tsupported: enhanced erase",
 * "\t98min for SECURITY ERASE UNIT. 98min for ENHANCED SECURITY ERASE UNIT."
 */
export function parseHdparmIdentify(text: string): AtaIdentify {
  const lines = text.split("\n");
  const trimReadsZero = lines.some((line) => /Deterministic read ZEROs after TRIM/i.test(line));
  const start = lines.findIndex((line) => /^Security:\s*$/.test(line));
  if (start < 0) return { security: null, trimReadsZero };
  const states = new Set<string>();
  let times = "";
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith("\t")) break;
    const words = line.trim().split(/\s+/).join(" ");
    if (/SECURITY ERASE UNIT/.test(words)) times = words;
    else states.add(words);
  }
  return {
    security: {
      supported: states.has("supported"),
      enabled: states.has("enabled"),
      locked: states.has("locked"),
      frozen: states.has("frozen"),
      countExpired: states.has("expired: security count"),
      enhancedErase: states.has("supported: enhanced erase"),
      eraseMinutes: minutes(/(\d+)min for SECURITY ERASE UNIT/.exec(times)?.[1]),
      enhancedEraseMinutes: minutes(/(\d+)min for ENHANCED SECURITY ERASE UNIT/.exec(times)?.[1]),
    },
    trimReadsZero,
  };
}

function minutes(value: string | undefined): number | null {
  return value === undefined ? null : Number(value);
}
