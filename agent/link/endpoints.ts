/**
 * The conductors an agent knows how to reach, in the order it tries them: the kernel command line's list
 * (the conductor that booted the node first), plus any a redirect named. A failed dial moves on to the next
 * one, so an agent whose conductor died finds a live one; a redirect makes its target the next one dialled.
 */
/** URLs learned from redirects that are kept at once: each redirect may name a new one, so they are bounded. */
export const MAX_LEARNED_ENDPOINTS = 8;

export class ConductorEndpoints {
  private readonly urls: string[];
  /** URLs a redirect added, oldest first (the kernel command line's are never dropped). */
  private readonly learned: string[] = [];
  private index = 0;

  /** @throws Error when the list is empty */
  constructor(urls: readonly string[]) {
    this.urls = [...new Set(urls)];
    if (this.urls.length === 0) throw new Error("an agent needs at least one conductor URL");
  }

  /** The URL to dial next. */
  current(): string {
    return this.urls[this.index] as string;
  }

  /** Every known URL, in dialling order from the start of the list. */
  all(): readonly string[] {
    return this.urls;
  }

  /** The current conductor could not be reached or dropped us: try the next one. */
  advance(): void {
    this.index = (this.index + 1) % this.urls.length;
  }

  /** A conductor named the node's owner: dial it next (learned, if it was not in the list). */
  redirectTo(url: string): void {
    const known = this.urls.indexOf(url);
    if (known >= 0) {
      this.index = known;
      return;
    }
    this.urls.splice(this.index + 1, 0, url);
    this.index += 1;
    this.learned.push(url);
    if (this.learned.length > MAX_LEARNED_ENDPOINTS) this.forget(this.learned.shift() as string);
  }

  private forget(url: string): void {
    const at = this.urls.indexOf(url);
    this.urls.splice(at, 1);
    if (at < this.index) this.index -= 1;
  }
}

/** Splits a comma-separated list of conductor URLs (anvil.conductor=, --conductor), dropping empty items. */
export function parseConductorUrls(text: string): string[] {
  return text
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

/**
 * Refuses a conductor list that could carry the agent's token in clear where TLS was meant: with a pin every
 * URL must be wss://, and wss:// and ws:// may not be mixed (a dropped wss:// conductor would otherwise send
 * the agent on to a ws:// one). Only ws:// and wss:// are accepted.
 * @throws Error naming the offending URL
 */
export function checkConductorSchemes(urls: readonly string[], pinned: boolean): void {
  const schemes = new Set<string>();
  for (const url of urls) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
    if (scheme !== "ws" && scheme !== "wss")
      throw new Error(`conductor URL ${url} is neither ws:// nor wss://`);
    if (pinned && scheme === "ws") {
      throw new Error(`conductor URL ${url} is ws:// but a certificate pin is set: use wss://`);
    }
    schemes.add(scheme);
  }
  if (schemes.size > 1)
    throw new Error("conductor URLs mix wss:// and ws://: that would let a ws:// one downgrade the link");
}

/**
 * Whether a redirect from `from` to `to` keeps the link's protection: wss:// may only go to wss://, and a
 * pinned link only to wss://. ws:// → wss:// is an upgrade and allowed.
 */
export function redirectAllowed(from: string, to: string, pinned: boolean): boolean {
  const toTls = /^wss:\/\//i.test(to);
  if (!toTls && !/^ws:\/\//i.test(to)) return false;
  if (pinned || /^wss:\/\//i.test(from)) return toTls;
  return true;
}
