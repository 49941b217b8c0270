from __future__ import annotations

import base64

import yaml

from corral.core import kubeconfig


def test_token_kubeconfig_has_one_current_context() -> None:
    config = kubeconfig.build(
        "demo", "https://10.0.0.1:6443", b"CA PEM", kubeconfig.Credentials(token="t-1:key")
    )
    parsed = yaml.safe_load(kubeconfig.dump(config))

    assert parsed["current-context"] == "demo"
    assert parsed["contexts"] == [{"name": "demo", "context": {"cluster": "demo", "user": "demo"}}]
    cluster = parsed["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"CA PEM"
    assert parsed["users"][0]["user"] == {"token": "t-1:key"}


def test_certificate_credentials_are_embedded_and_a_missing_ca_is_left_out() -> None:
    config = kubeconfig.build(
        "m", "https://h", None, kubeconfig.Credentials(client_cert=b"C", client_key=b"K")
    )
    assert "certificate-authority-data" not in config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == b"C"
    assert base64.b64decode(user["client-key-data"]) == b"K"
