import { sqliteHarness } from "./harness.ts";
import { resourcesContract } from "./resources.contract.ts";

resourcesContract("SQLite", sqliteHarness("resources"));
