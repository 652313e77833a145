"""The single-node tier's cluster DNS records, kept in step with the API server (no CoreDNS image here).

Polls Services and Endpoints once a second (cluster_api.Api) and rewrites one hosts file that
dnsmasq (`--hostsdir`) reloads on change:

    <service>.<namespace>.svc.<domain>            the ClusterIP, or every ready endpoint of a headless one
    <hostname>.<service>.<namespace>.svc.<domain> each endpoint that names a hostname (StatefulSet pods)

Usage: python3 cluster_dns.py KUBECONFIG HOSTS_FILE [DOMAIN]   (stdlib only: it runs on the host's python3)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator

from cluster_api import Api

POLL_SECONDS = 1.0


def records(services: dict, endpoints: dict, domain: str) -> Iterator[tuple[str, str]]:
    ready: dict[tuple[str, str], list[dict]] = {}
    for item in endpoints.get("items", []):
        key = (item["metadata"]["namespace"], item["metadata"]["name"])
        for subset in item.get("subsets") or []:
            ready.setdefault(key, []).extend(subset.get("addresses") or [])
    for item in services.get("items", []):
        namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
        fqdn = f"{name}.{namespace}.svc.{domain}"
        cluster_ip = (item.get("spec") or {}).get("clusterIP")
        addresses = ready.get((namespace, name), [])
        if cluster_ip and cluster_ip != "None":
            yield cluster_ip, fqdn
        else:
            for address in addresses:
                yield address["ip"], fqdn
        for address in addresses:
            if address.get("hostname"):
                yield address["ip"], f"{address['hostname']}.{fqdn}"


def write_atomically(path: str, lines: Iterable[str]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".hosts.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("".join(f"{line}\n" for line in lines))
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def main() -> None:
    kubeconfig, hosts_file = sys.argv[1], sys.argv[2]
    domain = sys.argv[3] if len(sys.argv) > 3 else "cluster.local"
    api = Api(kubeconfig)
    written: list[str] | None = None
    while True:
        try:
            found = records(api.get("/api/v1/services"), api.get("/api/v1/endpoints"), domain)
            lines = sorted({f"{ip} {name}" for ip, name in found})
        except OSError as error:  # the apiserver restarting: keep the last records
            print(f"cluster_dns: {error}", file=sys.stderr, flush=True)
        else:
            if lines != written:
                write_atomically(hosts_file, lines)
                written = lines
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
