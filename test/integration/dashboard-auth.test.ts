import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basic, writeUserFiles } from "../helpers/auth.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { api, startConductor } from "../helpers/conductor.ts";

/** The dashboard against a conductor with http_basic: sign-in, a bearer token, and the API's refusals. */
describe("the dashboard with authentication", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-ui-auth-"));
  const files = writeUserFiles(dir, [
    { name: "admin", password: "admin-pw", role: "admin" },
    { name: "viewer", password: "viewer-pw", role: "reader" },
  ]);
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  let browser: Browser;
  let page: Page;
  let uuid = "";

  beforeAll(async () => {
    ctx = await startConductor({
      auth: { auth_strategy: "http_basic", http_basic_auth_user_file: files.userFile },
    });
    const created = await api(`${ctx.url}/v1/nodes`, {
      method: "POST",
      body: { name: "guarded", driver: "fake-hardware" },
      headers: basic("admin", "admin-pw"),
    });
    uuid = (created.body as { uuid: string }).uuid;
    browser = await launchBrowser();
    page = await browser.newPage();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await ctx?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("asks who you are, refuses a wrong password in words, then shows the fleet", async () => {
    await page.goto(`${ctx.url}/ui/`);
    await page.waitForSelector("form.login");
    await page.fill('input[name="user"]', "viewer");
    await page.fill('input[name="password"]', "wrong");
    await page.click('button[type="submit"]');
    await expect.poll(() => page.locator("form.login .error").innerText()).not.toBe("");
    await page.fill('input[name="password"]', "viewer-pw");
    await page.click('button[type="submit"]');
    await page.waitForSelector('[data-testid="fleet"] tbody tr');
    expect(await page.locator('[data-testid="fleet"] tbody tr').count()).toBe(1);
  }, 60_000);

  it("an action the signed-in reader may not do is refused with the API's message", async () => {
    await page.goto(`${ctx.url}/ui/#/node/${uuid}`);
    await page.waitForSelector('[data-testid="node-state"]');
    await page.click('button[data-action="manage"]');
    await page.click('[data-testid="confirm"]');
    const message = await page.locator('[data-testid="message"]').innerText();
    expect(message).toMatch(/^manage refused: /);
    expect(message).toMatch(/denied|not allowed|forbidden/i);
    // and the node did not move
    const node = await api(`${ctx.url}/v1/nodes/${uuid}`, { headers: basic("admin", "admin-pw") });
    expect((node.body as { provision_state: string }).provision_state).toBe("enroll");
  }, 60_000);
});
