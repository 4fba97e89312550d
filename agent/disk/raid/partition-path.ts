/**
 * The device path of partition `number` of `disk`: the kernel appends "p" when the disk's name ends in a
 * digit (/dev/nvme0n1p2, /dev/loop0p1, /dev/md0p1), else nothing (/dev/vda2, /dev/sdb1).
 */
export function partitionPath(disk: string, number: number): string {
  return /\d$/.test(disk) ? `${disk}p${number}` : `${disk}${number}`;
}
