import { INDEXED_INTERNAL_KEYS } from "../store.ts";
import { listJsonSql } from "../summary-json.ts";

const { ramdiskPreparedBy, instancePreparedBy } = INDEXED_INTERNAL_KEYS;

/** Schema versions, applied in order; PRAGMA user_version records how many ran. Columns derived from the
 * node document (matching columns, traits) are filled by the store re-writing every node after a migration. */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    driver TEXT NOT NULL,
    provision_state TEXT NOT NULL,
    power_state TEXT,
    maintenance INTEGER NOT NULL DEFAULT 0,
    reservation TEXT,
    instance_uuid TEXT UNIQUE,
    resource_class TEXT,
    conductor_group TEXT NOT NULL DEFAULT '',
    owner TEXT,
    lessee TEXT,
    fault TEXT,
    retired INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    doc TEXT NOT NULL
  );
  CREATE INDEX nodes_provision_state ON nodes (provision_state);
  CREATE INDEX nodes_resource_class ON nodes (resource_class, provision_state);
  CREATE INDEX nodes_reservation ON nodes (reservation);
  CREATE TABLE ports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    address TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc TEXT NOT NULL
  );
  CREATE INDEX ports_node ON ports (node_uuid);
  CREATE TABLE allocations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    state TEXT NOT NULL,
    node_uuid TEXT,
    resource_class TEXT,
    doc TEXT NOT NULL
  );
  CREATE TABLE inventories (
    node_uuid TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc TEXT NOT NULL
  );
  `,
  `
  CREATE TABLE agent_tokens (
    node_uuid TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    boot_id TEXT NOT NULL
  );
  `,
  `
  CREATE TABLE node_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX node_history_node ON node_history (node_uuid, created_at, id);
  `,
  `
  ALTER TABLE nodes ADD COLUMN memory_mb INTEGER;
  ALTER TABLE nodes ADD COLUMN cpus INTEGER;
  ALTER TABLE nodes ADD COLUMN local_gb INTEGER;
  ALTER TABLE nodes ADD COLUMN cpu_arch TEXT;
  ALTER TABLE nodes ADD COLUMN capabilities TEXT NOT NULL DEFAULT '';
  CREATE TABLE node_traits (
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    trait TEXT NOT NULL,
    PRIMARY KEY (trait, node_uuid)
  );
  CREATE INDEX node_traits_node ON node_traits (node_uuid);
  -- NOTE: only free nodes are indexed, so a claim at 10^5 nodes reads a few rows, not the fleet
  CREATE INDEX nodes_free ON nodes (resource_class, memory_mb, cpus, local_gb)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = 0;
  `,
  `
  CREATE TABLE conductors (
    identity TEXT PRIMARY KEY,
    hostname TEXT NOT NULL,
    conductor_group TEXT NOT NULL DEFAULT '',
    drivers TEXT NOT NULL,
    url TEXT,
    machine TEXT NOT NULL,
    pid INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    online INTEGER NOT NULL
  );
  -- two live conductors never share a hostname
  CREATE UNIQUE INDEX conductors_online_hostname ON conductors (hostname) WHERE online = 1;
  `,
  `
  -- claims walk an index in the order they sort by (measured at 10^5 nodes: sorting every match cost 0.7 s)
  DROP INDEX nodes_free;
  CREATE INDEX nodes_free_fit ON nodes (resource_class, memory_mb, cpus, local_gb, id)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = 0;
  CREATE INDEX nodes_free_id ON nodes (resource_class, id)
    WHERE provision_state = 'available' AND reservation IS NULL AND instance_uuid IS NULL
      AND power_state IS NOT NULL AND maintenance = 0;
  `,
  `
  -- Who wrote a node's boot files, as columns (virtual: computed from the document on every write) with
  -- partial indexes: after a conductor dies, the nodes whose files it wrote are found from the index instead
  -- of parsing every waiting and active node's document (1.9 s of blocked event loop and +300 MiB at 10^5).
  -- json_valid first: a document SQLite cannot parse (a row stored before the API's depth limits nests deeper
  -- than its 1,000 levels) must still be writable and indexable, not fail every write and this migration
  ALTER TABLE nodes ADD COLUMN ramdisk_prepared_by TEXT GENERATED ALWAYS AS
    (CASE WHEN json_valid(doc) THEN json_extract(doc, '$.driver_internal_info.${ramdiskPreparedBy}') END) VIRTUAL;
  ALTER TABLE nodes ADD COLUMN instance_prepared_by TEXT GENERATED ALWAYS AS
    (CASE WHEN json_valid(doc) THEN json_extract(doc, '$.driver_internal_info.${instancePreparedBy}') END) VIRTUAL;
  CREATE INDEX nodes_ramdisk_prepared_by ON nodes (ramdisk_prepared_by) WHERE ramdisk_prepared_by IS NOT NULL;
  CREATE INDEX nodes_instance_prepared_by ON nodes (instance_prepared_by) WHERE instance_prepared_by IS NOT NULL;
  `,
  `
  -- The default list page's object of each node (links aside), as PostgreSQL keeps it: one definition of the
  -- short list for both schemas. VIRTUAL, so computed as a page reads it, in C, as json_object was before.
  ALTER TABLE nodes ADD COLUMN list_json TEXT GENERATED ALWAYS AS (
    ${listJsonSql(
      (column) => `json_quote(${column})`,
      (column) => `${column} <> 0`,
    )}
  ) VIRTUAL;
  `,
  `
  -- Chassis, volume connectors and targets, deploy templates (Ironic's tables of the same names). A node's
  -- chassis is a column kept from its document, indexed: listing a chassis's nodes and refusing to delete a
  -- chassis that has some read the index, not every node.
  ALTER TABLE nodes ADD COLUMN chassis_uuid TEXT GENERATED ALWAYS AS
    (CASE WHEN json_valid(doc) THEN json_extract(doc, '$.chassis_uuid') END) VIRTUAL;
  CREATE INDEX nodes_chassis_uuid ON nodes (chassis_uuid) WHERE chassis_uuid IS NOT NULL;
  CREATE TABLE chassis (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE TABLE volume_connectors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type TEXT NOT NULL,
    connector_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL,
    UNIQUE (type, connector_id)
  );
  CREATE INDEX volume_connectors_node ON volume_connectors (node_uuid);
  CREATE TABLE volume_targets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    boot_index INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL,
    UNIQUE (node_uuid, boot_index)
  );
  CREATE TABLE deploy_templates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
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
    revoked INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX tokens_user ON tokens (user_name);
  CREATE INDEX tokens_expires ON tokens (expires_at);
  `,
  `
  -- Port groups (bonds of a node's ports): Ironic's portgroups table, the document beside its unique columns
  CREATE TABLE portgroups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT UNIQUE,
    address TEXT UNIQUE,
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    doc TEXT NOT NULL
  );
  CREATE INDEX portgroups_node ON portgroups (node_uuid);
  `,
  `
  -- 1.83 child nodes: a node's parent as a column kept from its document, indexed where set. Lists hide
  -- children by default, so every API list reads the (small, usually empty) set of children from the index.
  ALTER TABLE nodes ADD COLUMN parent_node TEXT GENERATED ALWAYS AS
    (CASE WHEN json_valid(doc) THEN json_extract(doc, '$.parent_node') END) VIRTUAL;
  CREATE INDEX nodes_parent_node ON nodes (parent_node) WHERE parent_node IS NOT NULL;
  `,
  `
  -- A node's shard as an indexed column kept from its document: GET /v1/shards counts by it and
  -- GET /v1/nodes?shard=…&sharded=… filters on it without parsing every node.
  ALTER TABLE nodes ADD COLUMN shard TEXT GENERATED ALWAYS AS (CASE WHEN json_valid(doc) THEN json_extract(doc, '$.shard') END) VIRTUAL;
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
  UPDATE ports SET name = json_extract(doc, '$.name') WHERE id IN (
    SELECT MIN(id) FROM ports WHERE json_valid(doc) AND json_extract(doc, '$.name') IS NOT NULL
    GROUP BY json_extract(doc, '$.name'));
  UPDATE ports SET doc = json_set(doc, '$.name', json('null'))
    WHERE name IS NULL AND json_valid(doc) AND json_extract(doc, '$.name') IS NOT NULL;
  CREATE UNIQUE INDEX ports_name ON ports (name);
  `,
  `
  -- 1.96 inspection rules: conditions and actions applied after inspection, kept as a document; the phase
  -- is a column so the rules of one phase are read without parsing the others
  CREATE TABLE inspection_rules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    phase TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX inspection_rules_phase ON inspection_rules (phase);
  `,
  `
  -- 1.92 runbooks: a deploy template's table with an owner column, so a project's list (its own and the
  -- public ones) is read without parsing the others
  CREATE TABLE runbooks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL UNIQUE,
    owner TEXT,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX runbooks_owner ON runbooks (owner);
  `,
  `
  -- 1.112 runbook traits: a runbook runs on the nodes carrying one of its traits (in the document). Each
  -- runbook stored before gets its name as its one trait, so the nodes that could run it still can (Ironic's
  -- online migration migrate_runbook_names_to_traits).
  UPDATE runbooks SET doc = json_set(doc, '$.traits', json_array(name))
    WHERE json_valid(doc) AND json_type(doc, '$.traits') IS NULL;
  `,
  `
  -- Each node's "shown text" (conductor/db/node-shown.ts): its detail form at the newest microversion, secrets
  -- masked, written by the store with every write of the node; GET /v1/nodes/detail splices its page from
  -- these instead of parsing and rendering every document. Rows stored before are filled at start.
  ALTER TABLE nodes ADD COLUMN shown TEXT;
  ALTER TABLE nodes ADD COLUMN shown_cuts TEXT;
  `,
  `
  -- The shown texts move to a table of their own, one row per node keyed by the node's rowid: a node row
  -- carried its document twice (1.5 KiB each at the API bench's nodes: one row a page instead of two), so
  -- every list scan read twice the pages. Only the detail page reads this table. A write of the document
  -- deletes the node's text in the same statement (the trigger), so a text is never older than its
  -- document; the store then writes the new one.
  CREATE TABLE node_shown (
    node_id INTEGER PRIMARY KEY REFERENCES nodes (id) ON DELETE CASCADE,
    shown TEXT,
    shown_cuts TEXT NOT NULL
  );
  INSERT INTO node_shown (node_id, shown, shown_cuts)
    SELECT id, shown, shown_cuts FROM nodes WHERE shown_cuts IS NOT NULL;
  ALTER TABLE nodes DROP COLUMN shown;
  ALTER TABLE nodes DROP COLUMN shown_cuts;
  CREATE TRIGGER node_shown_stale AFTER UPDATE OF doc ON nodes
  BEGIN
    DELETE FROM node_shown WHERE node_id = new.id;
  END;
  `,
];
