"""Which file-system types are network (or FUSE) file systems: pure, shared by the fs probes and the verdict."""

from __future__ import annotations

# Prefixes of the types psutil / /proc/mounts report: nfs and nfs4, fuse.sshfs and other FUSE mounts, ...
NETWORK_FS_PREFIXES = ("nfs", "cifs", "smb", "lustre", "gpfs", "beegfs", "ceph", "fuse", "9p", "glusterfs")


def is_network_fs(fstype: str) -> bool:
    return fstype.lower().startswith(NETWORK_FS_PREFIXES)
