import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  applyReload,
  loadConfig,
  readConfigFile,
  settingsOf,
} from "../../conductor/config-loader.ts";

const files = (map: Record<string, string>) => (path: string) => {
  const text = map[path];
  if (text === undefined) throw Object.assign(new Error("missing"), { code: "ENOENT" });
  return text;
};

describe("configuration sources", () => {
  it("flags beat the environment, which beats the file, which beats the defaults", () => {
    const readFile = files({
      "c.yaml": "port: 7000\npower_sync:\n  interval_s: 30\n  concurrency: 4\nlog_level: warn\n",
    });
    const fileOnly = loadConfig({ argv: ["--config", "c.yaml"], env: {}, readFile }).config;
    expect(fileOnly.port).toBe(7000);
    expect(fileOnly.powerSync).toMatchObject({ intervalS: 30, concurrency: 4, force: true });
    const withEnv = loadConfig({
      argv: ["--config", "c.yaml"],
      env: { ANVIL_PORT: "7100", ANVIL_POWER_SYNC_INTERVAL_S: "20" },
      readFile,
    }).config;
    expect(withEnv.port).toBe(7100);
    expect(withEnv.powerSync.intervalS).toBe(20);
    expect(withEnv.powerSync.concurrency).toBe(4);
    const withFlags = loadConfig({
      argv: ["--config", "c.yaml", "--port", "7200", "--power-sync-interval", "10"],
      env: { ANVIL_PORT: "7100", ANVIL_POWER_SYNC_INTERVAL_S: "20" },
      readFile,
    }).config;
    expect(withFlags.port).toBe(7200);
    expect(withFlags.powerSync.intervalS).toBe(10);
    expect(withFlags.logLevel).toBe("warn");
    expect(loadConfig({ argv: [], env: {} }).config.port).toBe(6385);
  });

  it("takes Ironic's names for the power sync's workers and interval", () => {
    const { config } = loadConfig({
      argv: ["--sync-power-state-workers", "32", "--sync-power-state-interval", "15"],
      env: {},
    });
    expect(config.powerSync).toMatchObject({ concurrency: 32, intervalS: 15 });
    // the workers a pass may grow to, by a name in the same family
    expect(loadConfig({ argv: [], env: {} }).config.powerSync.maxConcurrency).toBe(32);
    const grown = loadConfig({ argv: ["--sync-power-state-max-workers", "64"], env: {} }).config;
    expect(grown.powerSync.maxConcurrency).toBe(64);
  });

  it("Ironic's RAID step priorities come by their Ironic names, and stay unset by default", () => {
    expect(loadConfig({ argv: [], env: {} }).config.raid).toEqual({});
    const flags = ["--delete-configuration-priority", "100", "--raid-create-configuration-priority", "98"];
    expect(loadConfig({ argv: flags, env: {} }).config.raid).toEqual({
      deleteConfigurationPriority: 100,
      createConfigurationPriority: 98,
    });
    expect(() => loadConfig({ argv: ["--delete-configuration-priority", "-1"], env: {} })).toThrow(
      ConfigError,
    );
  });

  it("the config file may also come from ANVIL_CONFIG", () => {
    const readFile = files({ "e.yaml": "agent:\n  fast_track: true\n" });
    expect(loadConfig({ argv: [], env: { ANVIL_CONFIG: "e.yaml" }, readFile }).config.agent.fastTrack).toBe(
      true,
    );
  });

  it("every setting has a flag and a variable derived from its path", () => {
    const settings = settingsOf();
    const interval = settings.find((s) => s.key === "power_sync.interval_s");
    expect(interval).toMatchObject({ flag: "--power-sync-interval-s", env: "ANVIL_POWER_SYNC_INTERVAL_S" });
    for (const s of settings) {
      const raw = s.kind === "boolean" ? "true" : s.kind === "number" ? "5" : "x";
      // a value the schema refuses (or a group left incomplete) fails naming the setting, never silently
      const group = s.path.length > 1 ? s.path.slice(0, -1).join(".") : s.path.join(".");
      try {
        const { config } = loadConfig({ argv: [], env: { [s.env]: raw } });
        expect(
          s.path.reduce<unknown>((node, key) => (node as Record<string, unknown>)[key], config),
        ).toBeDefined();
      } catch (error) {
        expect((error as Error).message).toContain(group);
      }
    }
  });

  it("an unknown key in the file is an error that names it, at any depth", () => {
    const load = (text: string) => () =>
      loadConfig({ argv: ["--config", "f.yaml"], env: {}, readFile: files({ "f.yaml": text }) });
    expect(load("prot: 1\n")).toThrow(/unknown setting "prot"/);
    expect(load("power_sync:\n  intervall_s: 3\n")).toThrow(/unknown setting "power_sync.intervall_s"/);
    expect(load("__proto__:\n  polluted: 1\n")).toThrow(ConfigError);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("bad values, unknown flags and a missing file are errors naming what is wrong", () => {
    expect(() => loadConfig({ argv: ["--port", "x"], env: {} })).toThrow(/--port: expected a number/);
    expect(() => loadConfig({ argv: [], env: { ANVIL_PORT: "99999" } })).toThrow(/port .*--port/);
    expect(() => loadConfig({ argv: ["--no-such-flag"], env: {} })).toThrow(/no-such-flag/);
    expect(() => loadConfig({ argv: ["--config", "nope.yaml"], env: {}, readFile: files({}) })).toThrow(
      /nope.yaml: ENOENT/,
    );
    expect(() => loadConfig({ argv: [], env: { ANVIL_AGENT_FAST_TRACK: "maybe" } })).toThrow(
      /ANVIL_AGENT_FAST_TRACK/,
    );
  });

  it("never throws anything but a ConfigError on generated YAML", () => {
    let tried = 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), (value) => {
        tried++;
        try {
          readConfigFile(JSON.stringify(value), "gen.yaml");
        } catch (error) {
          expect(error).toBeInstanceOf(ConfigError);
        }
      }),
      { numRuns: 500 },
    );
    console.log(`config files tried: ${tried}`);
  });

  it("the documented example file loads", () => {
    const example = new URL("../../deploy/conductor.example.yaml", import.meta.url).pathname;
    const { config } = loadConfig({ argv: ["--config", example], env: {} });
    expect(config.dataDir).toBe("/var/lib/anvil");
    expect(config.boot.kind).toBe("ipxe");
    expect(readFileSync(example, "utf8")).toContain("Precedence");
  });

  it("the demo's defaults yield to explicit settings", () => {
    const demo = loadConfig({ argv: ["--demo"], env: {} });
    expect(demo.demo).toBe(true);
    expect(demo.config).toMatchObject({
      dataDir: ".anvil/demo",
      databasePath: ".anvil/demo/anvil.sqlite",
      fakeDelayMs: 800,
    });
    expect(loadConfig({ argv: ["--demo", "--fake-delay-ms", "0"], env: {} }).config.fakeDelayMs).toBe(0);
  });
});

describe("reload", () => {
  it("applies the safe settings in place and names the ones that need a restart", () => {
    const current = loadConfig({ argv: [], env: {} }).config;
    const next = loadConfig({
      argv: ["--log-level", "debug", "--port", "7000", "--timeouts-deploy-wait-s", "60"],
      env: {},
    }).config;
    const { applied, needRestart } = applyReload(current, next);
    expect(applied.sort()).toEqual(["logLevel", "timeouts.deployWaitS"]);
    expect(needRestart).toEqual(["port"]);
    expect(current.logLevel).toBe("debug");
    expect(current.timeouts.deployWaitS).toBe(60);
    expect(current.port).toBe(6385);
  });
});
