import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium (scripts/setup/system-deps.sh installs it); nothing is downloaded at test time. */
export const CHROMIUM = process.env.ANVIL_CHROMIUM ?? "/usr/bin/chromium";

/** Headless Chromium as root in a sandbox-less container, with no background traffic to the outside. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
