import { postgresHarness } from "./harness.ts";
import { resourcesContract } from "./resources.contract.ts";

resourcesContract("PostgreSQL", postgresHarness("resources"));
