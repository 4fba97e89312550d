import { runCli } from "./cli.ts";

// Only this file touches process: argv, env, exit.
const code = await runCli(process.argv.slice(2), {
  env: process.env,
  stdout: process.stdout,
  stderr: process.stderr,
});
// NOTE: exit explicitly (idle keep-alive sockets would hold the process open), after the output drains
process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
