import { execFileSync, spawn } from "node:child_process";
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "anvil-install-"));
  execFileSync("bash", ["scripts/install.sh", "--no-deps", "--no-start"], {
    env: { ...process.env, DESTDIR: root },
    stdio: "pipe",
  });
}, 120_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("scripts/install.sh into a staging root", () => {
  it("puts the conductor, the CLI, the config and the unit in place", () => {
    for (const path of [
      "opt/anvil/bin/anvil-conductor",
      "opt/anvil/bin/anvil",
      "opt/anvil/conductor/main.ts",
      "opt/anvil/build/conductor/main.js",
      "etc/anvil/conductor.yaml",
      "etc/systemd/system/anvil-conductor.service",
    ])
      expect(existsSync(join(root, path)), path).toBe(true);
    // the commands on PATH are links into the installed tree
    expect(lstatSync(join(root, "usr/local/bin/anvil")).isSymbolicLink()).toBe(true);
    // one byte a character: V8 keeps the bundle's text resident, as UTF-16 when one character is not Latin-1
    const bundle = readFileSync(join(root, "opt/anvil/build/conductor/main.js"));
    expect(bundle.findIndex((byte) => byte > 0x7f)).toBe(-1);
    const config = readFileSync(join(root, "etc/anvil/conductor.yaml"), "utf8");
    expect(config).toMatch(/^data_dir: \/var\/lib\/anvil/m);
    expect(config).toMatch(/^# public_url: /m);
  });

  it("the unit passes systemd-analyze verify and is sandboxed", () => {
    const unit = readFileSync(join(root, "etc/systemd/system/anvil-conductor.service"), "utf8");
    for (const line of [
      "User=anvil",
      "ProtectSystem=strict",
      "NoNewPrivileges=yes",
      "ExecReload=/bin/kill -HUP $MAINPID",
    ])
      expect(unit).toContain(line);
    // verify against the staged tree: the same unit with its paths pointing into the staging root
    const staged = join(root, "anvil-conductor.service");
    writeFileSync(staged, unit.replaceAll("/opt/anvil", join(root, "opt/anvil")));
    const out = execFileSync("systemd-analyze", ["verify", staged], { encoding: "utf8", stdio: "pipe" });
    expect(out.trim()).toBe("");
  });

  it("the installed conductor starts from the installed config file and answers", async () => {
    const data = join(root, "var/lib/anvil");
    const child = spawn(
      join(root, "opt/anvil/bin/anvil-conductor"),
      ["--port", "0", "--data-dir", data, "--db", join(data, "a.sqlite")],
      {
        env: { ...process.env, ANVIL_CONFIG: join(root, "etc/anvil/conductor.yaml") },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stderr! }).on("line", (line) => {
          const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
          if (match?.[1]) resolve(match[1]);
        });
        child.on("exit", (code) => reject(new Error(`exited ${code}`)));
      });
      const response = await fetch(`${url}/v1/nodes`);
      expect(response.status).toBe(200);
      // the service runs the bundle built from the installed sources, with no TypeScript loader
      const argv = readFileSync(`/proc/${child.pid}/cmdline`, "utf8").split("\0");
      expect(argv).toContain(join(root, "opt/anvil/build/conductor/main.js"));
      expect(argv.join(" ")).not.toMatch(/tsx/);
      // and finds the dashboard's files from there
      const page = await fetch(`${url}/ui/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("app.js");
      const script = await fetch(`${url}/ui/app.js`);
      expect(script.status).toBe(200);
      expect((await script.text()).length).toBeGreaterThan(1000);
    } finally {
      child.kill("SIGTERM");
    }
  }, 60_000);
});
