import { sqliteHarness } from "./harness.ts";
import { partialUpdateContract } from "./partial-update.contract.ts";
import { shownTextContract } from "./shown-text.contract.ts";
import { storeContract } from "./store.contract.ts";

storeContract("SQLite", sqliteHarness("contract"));
partialUpdateContract("SQLite", sqliteHarness("partial"));
shownTextContract("SQLite", sqliteHarness("shown"));
