"""`publicEndpoints`: where a workload can be reached from outside the cluster, from the
Services that select its pods and the Ingresses that route to those Services."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Obj = Mapping[str, Any]


def selects(service: Obj, pod_labels: Mapping[str, str]) -> bool:
    """A Service with no selector selects nothing (its endpoints are written by hand)."""
    selector = (service.get("spec") or {}).get("selector") or {}
    return bool(selector) and all(pod_labels.get(k) == v for k, v in selector.items())


def _balancer_addresses(obj: Obj) -> list[str]:
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return sorted({entry.get("ip") or entry.get("hostname") for entry in ingress} - {None, ""})


def public_endpoints(
    pod_labels: Mapping[str, str],
    services: Iterable[Obj],
    ingresses: Iterable[Obj],
    node_addresses: list[str],
) -> list[dict[str, Any]]:
    """`node_addresses`: the addresses of the nodes running the workload's pods, where a
    NodePort answers."""
    found: list[dict[str, Any]] = []
    selecting = [s for s in services if selects(s, pod_labels)]
    for service in selecting:
        meta, spec = service["metadata"], service.get("spec") or {}
        service_id = f"{meta['namespace']}:{meta['name']}"
        kind = spec.get("type", "ClusterIP")
        for port in spec.get("ports") or []:
            entry = {"protocol": port.get("protocol", "TCP"), "serviceId": service_id, "kind": kind}
            if kind == "NodePort" and port.get("nodePort"):
                found.append({**entry, "addresses": node_addresses, "port": port["nodePort"]})
            elif kind == "LoadBalancer":
                found.append(
                    {**entry, "addresses": _balancer_addresses(service), "port": port["port"]}
                )
    names = {s["metadata"]["name"] for s in selecting}
    for ingress in ingresses:
        meta, spec = ingress["metadata"], ingress.get("spec") or {}
        secured = {h for tls in spec.get("tls") or [] for h in tls.get("hosts") or []}
        for rule in spec.get("rules") or []:
            host = rule.get("host", "")
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = ((path.get("backend") or {}).get("service") or {}).get("name")
                if backend not in names:
                    continue
                https = host in secured
                found.append(
                    {
                        "addresses": _balancer_addresses(ingress),
                        "port": 443 if https else 80,
                        "protocol": "HTTPS" if https else "HTTP",
                        "hostname": host,
                        "path": path.get("path", "/"),
                        "ingressId": f"{meta['namespace']}:{meta['name']}",
                        "kind": "Ingress",
                    }
                )
    return found
