"""The single-node tier's cluster DNS records, kept in step with the API server (no CoreDNS image here).

Polls Services and Endpoints once a second with the admin token of a kubeconfig written by
scripts/kube-apiserver.sh, and rewrites one hosts file that dnsmasq (`--hostsdir`) reloads on change:

    <service>.<namespace>.svc.<domain>            the ClusterIP, or every ready endpoint of a headless one
    <hostname>.<service>.<namespace>.svc.<domain> each endpoint that names a hostname (StatefulSet pods)

Usage: python3 cluster_dns.py KUBECONFIG HOSTS_FILE [DOMAIN]   (stdlib only: it runs on the host's python3)
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator

POLL_SECONDS = 1.0


def read_kubeconfig(path: str) -> tuple[str, str]:
    """The server URL and bearer token of the kubeconfig kube-apiserver.sh writes (flow-style lines)."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    server = re.search(r'server: "([^"]+)"', text)
    token = re.search(r'token: "([^"]+)"', text)
    if server is None or token is None:
        raise SystemExit(f"cluster_dns: no server or token in {path}")
    return server.group(1), token.group(1)


def get(server: str, token: str, path: str) -> dict:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the apiserver's self-signed certificate, on this machine
    request = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5, context=context) as response:
        return json.load(response)


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
    server, token = read_kubeconfig(kubeconfig)
    written: list[str] | None = None
    while True:
        try:
            lines = sorted(
                {
                    f"{ip} {name}"
                    for ip, name in records(
                        get(server, token, "/api/v1/services"),
                        get(server, token, "/api/v1/endpoints"),
                        domain,
                    )
                }
            )
        except OSError as error:  # the apiserver restarting: keep the last records
            print(f"cluster_dns: {error}", file=sys.stderr, flush=True)
        else:
            if lines != written:
                write_atomically(hosts_file, lines)
                written = lines
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main()
