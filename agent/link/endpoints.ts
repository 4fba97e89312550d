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
