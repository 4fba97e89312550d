import { PgStore } from "../../conductor/db/postgres/pg-store.ts";
import { startPostgres, type ThrowawayPostgres } from "../helpers/postgres.ts";
import { resourcesContract } from "./resources.contract.ts";

let server: ThrowawayPostgres | undefined;

// a real server from Debian's packages; if it cannot start, the suite fails with the reason
resourcesContract("PostgreSQL", {
  open: async () => {
    server = await startPostgres();
    const store = new PgStore(await server.freshDatabase("resources"));
    await store.open();
    return store;
  },
  teardown: async () => server?.stop(),
});
