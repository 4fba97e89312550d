import { postgresHarness } from "./harness.ts";
import { partialUpdateContract } from "./partial-update.contract.ts";
import { shownTextContract } from "./shown-text.contract.ts";
import { storeContract } from "./store.contract.ts";

storeContract("PostgreSQL", postgresHarness("contract"));
partialUpdateContract("PostgreSQL", postgresHarness("partial"));
shownTextContract("PostgreSQL", postgresHarness("shown"));
