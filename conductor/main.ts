import { createLogger } from "../shared/log.ts";
import { AuthConfigError } from "./auth/strategy.ts";
import { ConfigError, applyReload, loadConfig, usage } from "./config-loader.ts";
import { runDemo } from "./demo.ts";
import { startIdleCompaction } from "./idle-compaction.ts";
import { createConductor } from "./server.ts";

async function main(): Promise<void> {
  let loaded;
  try {
    loaded = loadConfig({ argv: process.argv.slice(2), env: process.env });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`anvil-conductor: bad configuration: ${error.message}`);
    process.exitCode = 2;
    return;
  }
  if (loaded.help) {
    console.log(usage());
    return;
  }
  const { demo } = loaded;
  const config = loaded.config;
  const logger = createLogger({ level: config.logLevel, name: "conductor", format: config.logFormat });
  const conductor = createConductor(config, { logger });
  const url = await conductor.start();
  // the heap a burst of requests grew goes back to the system once the conductor is quiet again
  const stopCompaction = startIdleCompaction(logger);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    stopCompaction();
    conductor.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  // SIGHUP re-reads the config file and applies what is safe to change on a running conductor.
  process.on("SIGHUP", () => {
    try {
      const next = loadConfig({ argv: process.argv.slice(2), env: process.env }).config;
      const { applied, needRestart } = applyReload(config, next);
      logger.setLevel?.(config.logLevel);
      logger.info({ applied, need_restart: needRestart }, "configuration reloaded");
    } catch (error) {
      logger.error({ err: error }, "configuration reload refused; the settings in force are unchanged");
    }
  });
  if (demo) await runDemo(conductor, { url, config });
}

main().catch((error: unknown) => {
  // a refused configuration is the operator's to fix: say what, without a stack trace
  if (error instanceof AuthConfigError) {
    console.error(`anvil-conductor: ${error.message}`);
    process.exit(2);
  }
  console.error(error);
  process.exit(1);
});
