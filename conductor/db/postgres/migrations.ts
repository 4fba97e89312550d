import { INDEXED_INTERNAL_KEYS } from "../store.ts";
import { listJsonSql } from "../summary-json.ts";

const { ramdiskPreparedBy, instancePreparedBy } = INDEXED_INTERNAL_KEYS;

/** Schema versions, applied in order inside one transaction each; schema_version records how many ran. */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE nodes (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    driver TEXT NOT NULL,
    provision_state TEXT NOT NULL,
    power_state TEXT,
    maintenance BOOLEAN NOT NULL DEFAULT FALSE,
    reservation TEXT,
    instance_uuid TEXT UNIQUE,
    resource_class TEXT,
    conductor_group TEXT NOT NULL DEFAULT '',
    owner TEXT,
    lessee TEXT,
    fault TEXT,
    retired BOOLEAN NOT NULL DEFAULT FALSE,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    memory_mb INTEGER,
    cpus INTEGER,
    local_gb INTEGER,
    cpu_arch TEXT,
    capabilities TEXT NOT NULL DEFAULT '',
    doc JSONB NOT NULL
  );
  CREATE TABLE node_traits (
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    trait TEXT NOT NULL,
    PRIMARY KEY (trait, node_uuid)
  );
  CREATE INDEX node_traits_node ON node_traits (node_uuid);
  -- NOTE: only free nodes are indexed, so a claim at 10^5 nodes reads a few rows, not the fleet
  CREATE INDEX nodes_free ON nodes (resource_class, memory_mb, cpus, local_gb)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = FALSE;
  CREATE INDEX nodes_provision_state ON nodes (provision_state);
  CREATE INDEX nodes_resource_class ON nodes (resource_class, provision_state);
  CREATE INDEX nodes_reservation ON nodes (reservation);
  CREATE TABLE ports (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    address TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc JSONB NOT NULL
  );
  CREATE INDEX ports_node ON ports (node_uuid);
  CREATE TABLE allocations (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    state TEXT NOT NULL,
    node_uuid TEXT,
    resource_class TEXT,
    doc JSONB NOT NULL
  );
  CREATE TABLE inventories (
    node_uuid TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc JSONB NOT NULL
  );
  CREATE TABLE agent_tokens (
    node_uuid TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    boot_id TEXT NOT NULL
  );
  `,
  `
  CREATE TABLE conductors (
    identity TEXT PRIMARY KEY,
    hostname TEXT NOT NULL,
    conductor_group TEXT NOT NULL DEFAULT '',
    drivers JSONB NOT NULL,
    url TEXT,
    machine TEXT NOT NULL,
    pid INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    online BOOLEAN NOT NULL
  );
  -- two live conductors never share a hostname
  CREATE UNIQUE INDEX conductors_online_hostname ON conductors (hostname) WHERE online;
  `,
  `
  -- claims walk an index in the order they sort by (measured at 10^5 nodes: sorting every match cost 0.7 s)
  DROP INDEX nodes_free;
  CREATE INDEX nodes_free_fit ON nodes (resource_class, memory_mb, cpus, local_gb, id)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = FALSE;
  CREATE INDEX nodes_free_id ON nodes (resource_class, id)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = FALSE;
  `,
  `
  CREATE TABLE node_history (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL
  );
  CREATE INDEX node_history_node ON node_history (node_uuid, created_at, id);
  `,
  `
  -- A claim with traits walks the claimable nodes that carry its first trait, in its own order, instead of every
  -- free node of the class probing node_traits for each (measured at 10^5 nodes, 1 in 7 with the trait, after
  -- 1,000 claims by class and 200 with the trait: the next one walked 1,206 rows, 5.4 ms). So each trait row
  -- mirrors its node's id, class, sizes and whether the node is claimable (free but for a reservation, which is
  -- brief and changes too often to mirror); the claim still checks the node's own row. Triggers keep the
  -- mirror exact whatever statement writes the node.
  ALTER TABLE node_traits ADD COLUMN node_id BIGINT, ADD COLUMN node_class TEXT,
    ADD COLUMN memory_mb INTEGER, ADD COLUMN cpus INTEGER, ADD COLUMN local_gb INTEGER,
    ADD COLUMN claimable BOOLEAN NOT NULL DEFAULT FALSE;
  UPDATE node_traits t SET node_id = n.id, node_class = n.resource_class,
    memory_mb = n.memory_mb, cpus = n.cpus, local_gb = n.local_gb,
    claimable = (n.provision_state = 'available' AND n.instance_uuid IS NULL AND n.power_state IS NOT NULL
      AND NOT n.maintenance)
    FROM nodes n WHERE n.uuid = t.node_uuid;
  ALTER TABLE node_traits ALTER COLUMN node_id SET NOT NULL;
  -- in the orders claims take: any match (lowest id), best fit (smallest sizes)
  CREATE INDEX node_traits_claimable ON node_traits (trait, node_class, node_id) WHERE claimable;
  CREATE INDEX node_traits_claimable_fit ON node_traits (trait, node_class, memory_mb, cpus, local_gb, node_id)
    WHERE claimable;
  CREATE FUNCTION node_traits_from_node() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    -- NOTE: FOR SHARE waits for a writer of the node that has not committed yet and then reads its result;
    -- that writer's own trigger could not see this row, so reading the old state would leave it stale
    SELECT n.id, n.resource_class, n.memory_mb, n.cpus, n.local_gb,
        n.provision_state = 'available' AND n.instance_uuid IS NULL AND n.power_state IS NOT NULL AND NOT n.maintenance
      INTO NEW.node_id, NEW.node_class, NEW.memory_mb, NEW.cpus, NEW.local_gb, NEW.claimable
      FROM nodes n WHERE n.uuid = NEW.node_uuid FOR SHARE;
    RETURN NEW;
  END $$;
  CREATE TRIGGER node_traits_from_node BEFORE INSERT ON node_traits
    FOR EACH ROW EXECUTE FUNCTION node_traits_from_node();
  CREATE FUNCTION node_traits_follow_node() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE node_traits SET node_class = NEW.resource_class,
        memory_mb = NEW.memory_mb, cpus = NEW.cpus, local_gb = NEW.local_gb,
        claimable = NEW.provision_state = 'available' AND NEW.instance_uuid IS NULL AND NEW.power_state IS NOT NULL
          AND NOT NEW.maintenance
      WHERE node_uuid = NEW.uuid;
    RETURN NULL;
  END $$;
  -- only writes that change the class, sizes or claimability of a node with traits run it (taking or dropping a
  -- reservation does not; the store writes a node's traits into its document and node_traits together)
  CREATE TRIGGER node_traits_follow_node AFTER UPDATE ON nodes FOR EACH ROW
    WHEN (NEW.doc -> 'traits' <> '[]'::jsonb AND (OLD.resource_class IS DISTINCT FROM NEW.resource_class
      OR OLD.memory_mb IS DISTINCT FROM NEW.memory_mb OR OLD.cpus IS DISTINCT FROM NEW.cpus
      OR OLD.local_gb IS DISTINCT FROM NEW.local_gb
      OR (OLD.provision_state = 'available' AND OLD.instance_uuid IS NULL AND OLD.power_state IS NOT NULL
          AND NOT OLD.maintenance)
        IS DISTINCT FROM (NEW.provision_state = 'available' AND NEW.instance_uuid IS NULL
          AND NEW.power_state IS NOT NULL AND NOT NEW.maintenance)))
    EXECUTE FUNCTION node_traits_follow_node();
  `,
  `
  -- The default list page's object of each node (links aside), kept by PostgreSQL on every write of the row:
  -- a page then reads two values a node instead of six and writes no JSON (docs/cluster.md, "The list page").
  -- to_json of text depends on no setting, so the wrapper may say IMMUTABLE, as a generated column requires.
  CREATE FUNCTION anvil_json_text(value TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT COALESCE(to_json(value)::text, 'null') $$;
  ALTER TABLE nodes ADD COLUMN list_json TEXT GENERATED ALWAYS AS (
    ${listJsonSql(
      (column) => `anvil_json_text(${column})`,
      (column) => column,
    )}
  ) STORED;
  `,
  `
  -- Who wrote a node's boot files, as columns kept from the document on every write, with partial indexes:
  -- after a conductor dies, the nodes whose files it wrote are found from the index instead of reading every
  -- waiting and active node's document (1.9 s and +300 MiB at 10^5 nodes, measured on SQLite).
  ALTER TABLE nodes ADD COLUMN ramdisk_prepared_by TEXT
    GENERATED ALWAYS AS (doc -> 'driver_internal_info' ->> '${ramdiskPreparedBy}') STORED;
  ALTER TABLE nodes ADD COLUMN instance_prepared_by TEXT
    GENERATED ALWAYS AS (doc -> 'driver_internal_info' ->> '${instancePreparedBy}') STORED;
  CREATE INDEX nodes_ramdisk_prepared_by ON nodes (ramdisk_prepared_by) WHERE ramdisk_prepared_by IS NOT NULL;
  CREATE INDEX nodes_instance_prepared_by ON nodes (instance_prepared_by) WHERE instance_prepared_by IS NOT NULL;
  `,
  `
  -- Chassis, volume connectors and targets, deploy templates (Ironic's tables of the same names). A node's
  -- chassis is a column kept from its document, indexed: listing a chassis's nodes and refusing to delete a
  -- chassis that has some read the index, not every node.
  ALTER TABLE nodes ADD COLUMN chassis_uuid TEXT GENERATED ALWAYS AS (doc ->> 'chassis_uuid') STORED;
  CREATE INDEX nodes_chassis_uuid ON nodes (chassis_uuid) WHERE chassis_uuid IS NOT NULL;
  CREATE TABLE chassis (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL
  );
  CREATE TABLE volume_connectors (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type TEXT NOT NULL,
    connector_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL,
    UNIQUE (type, connector_id)
  );
  CREATE INDEX volume_connectors_node ON volume_connectors (node_uuid);
  CREATE TABLE volume_targets (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    boot_index INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL,
    UNIQUE (node_uuid, boot_index)
  );
  CREATE TABLE deploy_templates (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL
  );
  `,
  `
  -- Bearer tokens, shared by every conductor on the database: SHA-256 digests only, with the credential
  -- fingerprint they were issued for (a changed password or role no longer matches it)
  CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    user_name TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked BOOLEAN NOT NULL DEFAULT FALSE
  );
  CREATE INDEX tokens_user ON tokens (user_name);
  CREATE INDEX tokens_expires ON tokens (expires_at);
  `,
  `
  -- Port groups (bonds of a node's ports): Ironic's portgroups table, the document beside its unique columns
  CREATE TABLE portgroups (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    address TEXT UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc JSONB NOT NULL
  );
  CREATE INDEX portgroups_node ON portgroups (node_uuid);
  `,
  `
  -- 1.83 child nodes: a node's parent as a column kept from its document, indexed where set. Lists hide
  -- children by default, so every API list reads the (small, usually empty) set of children from the index.
  ALTER TABLE nodes ADD COLUMN parent_node TEXT GENERATED ALWAYS AS (doc ->> 'parent_node') STORED;
  CREATE INDEX nodes_parent_node ON nodes (parent_node) WHERE parent_node IS NOT NULL;
  `,
  `
  -- A node's shard as an indexed column kept from its document: GET /v1/shards counts by it and
  -- GET /v1/nodes?shard=…&sharded=… filters on it without parsing every node.
  ALTER TABLE nodes ADD COLUMN shard TEXT GENERATED ALWAYS AS (doc ->> 'shard') STORED;
  CREATE INDEX nodes_shard ON nodes (shard);
  `,
  `
  -- Secrets every conductor of a cluster shares (the image-link key): created once by the first conductor
  -- to start (insert-if-absent), read by all; deleting a row rotates it at the next start
  CREATE TABLE shared_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  `,
  `
  -- 1.88 port names: unique, and a port is found by its name. Names stored before (hidden, not unique) are
  -- kept for the oldest port holding each and cleared on the others, so the unique index can be built.
  ALTER TABLE ports ADD COLUMN name TEXT;
  UPDATE ports SET name = doc ->> 'name' WHERE id IN (
    SELECT MIN(id) FROM ports WHERE doc ->> 'name' IS NOT NULL GROUP BY doc ->> 'name');
  UPDATE ports SET doc = jsonb_set(doc, '{name}', 'null'::jsonb)
    WHERE name IS NULL AND doc ->> 'name' IS NOT NULL;
  CREATE UNIQUE INDEX ports_name ON ports (name);
  `,
  `
  -- 1.96 inspection rules: conditions and actions applied after inspection, kept as a document; the phase
  -- is a column so the rules of one phase are read without parsing the others
  CREATE TABLE inspection_rules (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    phase TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL
  );
  CREATE INDEX inspection_rules_phase ON inspection_rules (phase);
  `,
  `
  -- 1.92 runbooks: a deploy template's table with an owner column, so a project's list (its own and the
  -- public ones) is read without parsing the others
  CREATE TABLE runbooks (
    id BIGSERIAL PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    owner TEXT,
    created_at TEXT NOT NULL,
    doc JSONB NOT NULL
  );
  CREATE INDEX runbooks_owner ON runbooks (owner);
  `,
  `
  -- 1.112 runbook traits: a runbook runs on the nodes carrying one of its traits (in the document). Each
  -- runbook stored before gets its name as its one trait, so the nodes that could run it still can (Ironic's
  -- online migration migrate_runbook_names_to_traits).
  UPDATE runbooks SET doc = jsonb_set(doc, '{traits}', jsonb_build_array(name)) WHERE NOT doc ? 'traits';
  `,
  `
  -- Each node's "shown text" (conductor/db/node-shown.ts): its detail form at the newest microversion, secrets
  -- masked, written by the store with every write of the node; GET /v1/nodes/detail splices its page from
  -- these instead of parsing and rendering every document. Rows stored before are filled at start.
  ALTER TABLE nodes ADD COLUMN shown TEXT, ADD COLUMN shown_cuts TEXT;
  `,
  `
  -- The shown texts move to a table of their own, one row per node keyed by the node's id: a node row
  -- carried its document twice, so every list scan read (and every write rewrote) twice the bytes. Only the
  -- detail page reads this table. A write of the document deletes the node's text in the same statement
  -- (the trigger), so a text is never older than its document; the store then writes the new one. (Dropped
  -- columns keep their bytes in a row until it is next written.)
  CREATE TABLE node_shown (
    node_id BIGINT PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    shown TEXT,
    shown_cuts TEXT NOT NULL
  );
  INSERT INTO node_shown (node_id, shown, shown_cuts)
    SELECT id, shown, shown_cuts FROM nodes WHERE shown_cuts IS NOT NULL;
  ALTER TABLE nodes DROP COLUMN shown, DROP COLUMN shown_cuts;
  CREATE FUNCTION node_shown_stale() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    DELETE FROM node_shown WHERE node_id = NEW.id;
    RETURN NULL;
  END
  $$;
  CREATE TRIGGER node_shown_stale AFTER UPDATE OF doc ON nodes
    FOR EACH ROW EXECUTE FUNCTION node_shown_stale();
  `,
];
