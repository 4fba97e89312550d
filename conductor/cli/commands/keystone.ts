import { stringOpt } from "../args.ts";
import type { Command } from "../command.ts";
import { CliError, UsageError } from "../errors.ts";
import { printJson, println } from "../output.ts";
import { CatalogError, adminCredentialsFromEnv, registerInCatalog } from "../../auth/keystone-catalog.ts";

const register: Command = {
  words: ["keystone", "register"],
  synopsis: "--public-url URL [--internal-url URL] [--admin-url URL] [--region R] [--service-name NAME]",
  summary: "Register Anvil in Keystone's catalog as the baremetal service with its endpoints (idempotent).",
  details: [
    "An administrator's credentials come from the environment as openstackclient reads them (never argv):",
    "OS_CLOUD (clouds.yaml), or OS_AUTH_URL, OS_USERNAME, OS_PASSWORD with OS_PROJECT_NAME or",
    "OS_SYSTEM_SCOPE=all, OS_USER_DOMAIN_NAME and OS_PROJECT_DOMAIN_NAME (default: Default).",
    "An existing service and endpoints are kept; an endpoint whose URL changed is updated. Run it again at will.",
    "Example: anvil keystone register --public-url https://anvil.example:6385 --internal-url http://10.0.0.5:6385",
  ],
  options: {
    "public-url": { type: "string" },
    "internal-url": { type: "string" },
    "admin-url": { type: "string" },
    region: { type: "string" },
    "service-name": { type: "string" },
  },
  async run(ctx, { values }) {
    const publicUrl = stringOpt(values, "public-url");
    if (!publicUrl) throw new UsageError("--public-url URL is required");
    for (const url of [publicUrl, stringOpt(values, "internal-url"), stringOpt(values, "admin-url")])
      if (url !== undefined && !URL.canParse(url)) throw new UsageError(`not a URL: ${url}`);
    let done: string[];
    try {
      done = await registerInCatalog(adminCredentialsFromEnv(ctx.env), {
        serviceName: stringOpt(values, "service-name") ?? "ironic",
        region: stringOpt(values, "region") ?? "RegionOne",
        endpoints: {
          public: publicUrl,
          internal: stringOpt(values, "internal-url") ?? publicUrl,
          admin: stringOpt(values, "admin-url"),
        },
      });
    } catch (error) {
      if (error instanceof CatalogError) throw new CliError(`anvil: ${error.message}`);
      throw error;
    }
    if (ctx.output.json) return printJson(ctx.output, { done });
    for (const line of done) println(ctx.output.stdout, line);
  },
};

export const keystoneCommands: readonly Command[] = [register];
