"""Print this host's Ray pool resources as `ray start --resources` JSON, from onprem-pools.json.

Usage (on a worker, see onprem.yaml): python3 pool_resources.py POOLS_JSON ADDRESS [ADDRESS ...]
with the host's addresses (e.g. `$(hostname -I)`). Exactly one of them must be a host in the map.
Standard library only: it runs inside the cluster image before Ray starts.
"""

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

POOL_SUFFIX = "_pool"


def host_pool_resources(pool_map: Mapping[str, object], addresses: Sequence[str]) -> dict[str, int]:
    """The pool entries (`rollout_pool`, ...) of the one host in ``pool_map`` matching an address."""
    hosts = pool_map.get("hosts")
    if not isinstance(hosts, Mapping):
        raise ValueError("pool map has no 'hosts' object")
    matches = [address for address in addresses if address in hosts]
    if len(matches) != 1:
        raise ValueError(
            f"expected exactly one of the addresses {list(addresses)} in the pool map, found {matches}"
        )
    entry = hosts[matches[0]]
    return {name: int(count) for name, count in entry.items() if name.endswith(POOL_SUFFIX)}


def main(argv: Sequence[str]) -> int:
    """CLI: print the JSON, or one line on stderr and exit 2 when the host is not in the map."""
    if len(argv) < 2:
        print("usage: pool_resources.py POOLS_JSON ADDRESS [ADDRESS ...]", file=sys.stderr)
        return 2
    try:
        pool_map = json.loads(Path(argv[0]).read_text())
        print(json.dumps(host_pool_resources(pool_map, argv[1:]), sort_keys=True))
    except (OSError, ValueError) as exc:
        print(f"pool_resources: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
