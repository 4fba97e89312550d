import { deflateRawSync } from "node:zlib";

/** One guest cluster's content in a built image. */
export interface BuiltCluster {
  /** Guest cluster index. */
  guest: number;
  data: Buffer;
  /** Stored deflate-compressed (qcow2's compressed cluster descriptor). */
  compressed?: boolean;
}

export interface BuildQcow2Options {
  clusterBits: number;
  virtualSize: number;
  clusters: BuiltCluster[];
  /** Host order of the data clusters: "guest" (as qemu-img writes them) or "reversed". Default "guest". */
  order?: "guest" | "reversed";
}

/**
 * A qcow2 v3 image built by hand, laid out header, L1, L2 tables, then data (plain clusters one cluster each,
 * compressed ones packed at sector granularity), with no refcount table (the converter ignores refcounts).
 * Returns the image and the guest disk it must convert to.
 */
export function buildQcow2(options: BuildQcow2Options): { image: Buffer; guest: Buffer } {
  const { clusterBits, virtualSize } = options;
  const cs = 2 ** clusterBits;
  const perL2 = cs / 8;
  const l1Size = Math.ceil(virtualSize / (cs * perL2));
  const l1Clusters = Math.max(1, Math.ceil((l1Size * 8) / cs));
  const l2Used = [...new Set(options.clusters.map((c) => Math.floor(c.guest / perL2)))].sort((a, b) => a - b);
  const l2Cluster = new Map(l2Used.map((index, i) => [index, 1 + l1Clusters + i]));
  let next = (1 + l1Clusters + l2Used.length) * cs;

  const ordered = [...options.clusters].sort((a, b) => a.guest - b.guest);
  if (options.order === "reversed") ordered.reverse();
  const placed: {
    cluster: BuiltCluster;
    host: number;
    stored: Buffer;
    sectors: number;
    compressed: boolean;
  }[] = [];
  for (const cluster of ordered) {
    const stored = cluster.compressed ? deflateRawSync(cluster.data) : cluster.data;
    const sectors = Math.ceil(((next % 512) + stored.length) / 512);
    // The descriptor holds up to 2^(cluster_bits - 8) sectors; what does not fit is stored plain, as qemu does.
    if (cluster.compressed && sectors <= 2 ** (clusterBits - 8)) {
      placed.push({ cluster, host: next, stored, sectors, compressed: true });
      next += stored.length;
    } else {
      next = Math.ceil(next / cs) * cs;
      placed.push({ cluster, host: next, stored: cluster.data, sectors: 0, compressed: false });
      next += cs;
    }
  }
  const image = Buffer.alloc(Math.ceil(next / cs) * cs);
  image.writeUInt32BE(0x514649fb, 0);
  image.writeUInt32BE(3, 4);
  image.writeUInt32BE(clusterBits, 20);
  image.writeBigUInt64BE(BigInt(virtualSize), 24);
  image.writeUInt32BE(l1Size, 36);
  image.writeBigUInt64BE(BigInt(cs), 40);
  image.writeUInt32BE(4, 96); // refcount_order
  image.writeUInt32BE(104, 100); // header_length
  for (const [index, cluster] of l2Cluster) {
    image.writeBigUInt64BE(BigInt(cluster * cs) | (1n << 63n), cs + index * 8);
  }
  const offsetBits = BigInt(62 - (clusterBits - 8));
  const guest = Buffer.alloc(virtualSize);
  for (const { cluster, host, stored, sectors, compressed } of placed) {
    stored.copy(image, host);
    cluster.data.copy(guest, cluster.guest * cs);
    const table = (l2Cluster.get(Math.floor(cluster.guest / perL2)) as number) * cs;
    const entry = compressed
      ? (1n << 62n) | (BigInt(sectors - 1) << offsetBits) | BigInt(host)
      : BigInt(host) | (1n << 63n);
    image.writeBigUInt64BE(entry, table + (cluster.guest % perL2) * 8);
  }
  return { image, guest };
}

/**
 * A qcow2 image (64 KiB clusters) whose one compressed cluster is a deflate bomb: a few hundred bytes that
 * inflate to `clusters` clusters of zeros. An unbounded inflate would allocate all of them.
 */
export function qcow2Bomb(clusters = 64): Buffer {
  const cs = 65536;
  const { image } = buildQcow2({
    clusterBits: 16,
    virtualSize: 4 * cs,
    clusters: [{ guest: 1, data: Buffer.alloc(cs, 7), compressed: true }],
  });
  const bomb = deflateRawSync(Buffer.alloc(clusters * cs));
  // Layout: header, L1, one L2 table (cluster 2), then the compressed data.
  const l2 = 2 * cs;
  const host = Number(image.readBigUInt64BE(l2 + 8) & ((1n << 54n) - 1n));
  const sectors = BigInt(Math.ceil(((host % 512) + bomb.length) / 512));
  image.writeBigUInt64BE((1n << 62n) | ((sectors - 1n) << 54n) | BigInt(host), l2 + 8);
  return Buffer.concat([image.subarray(0, host), bomb, Buffer.alloc(cs)]);
}
